/** Scheduled changes of a flag's state: request and response schemas (docs/targeting.md, "Scheduled changes"). */
import { t } from "elysia";
import { ACTOR_TYPES } from "../../changes/entry";
import { OneOf, Slug, Timestamp } from "../../http/schema";
import { FlagKey, StatePut } from "../flags/model";
import { SCHEDULE_STATUSES } from "./store";

export const MAX_STEPS = 50;

/**
 * ISO 8601 with a zone (`Z` or `±hh:mm`), seconds and fractions optional. Checked as a pattern
 * here; that it is a real time, in the future, by the service.
 */
const AT_PATTERN = "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})$";
const At = () =>
  t.String({
    pattern: AT_PATTERN,
    description: "ISO 8601 time with a zone (Z or ±hh:mm), in the future; answered as UTC with milliseconds",
    error: "Must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z",
  });

/** The state PUT's own schema, each field optional (at least one: checked by the service). */
export const ScheduledState = t.Partial(StatePut, {
  additionalProperties: false,
  title: "ScheduledState",
  description: "What the state PUT would send, each field optional, at least one: `enabled` omitted keeps it; `rolloutPercentage` omitted keeps it, null clears it",
});

const Step = t.Object({ at: At(), state: ScheduledState }, { additionalProperties: false, title: "ScheduleStep" });

export const NewSchedule = t.Object(
  {
    environment: Slug("Environment slug"),
    at: t.Optional(At()),
    state: t.Optional(ScheduledState),
    steps: t.Optional(
      t.Array(Step, {
        minItems: 1,
        maxItems: MAX_STEPS,
        description: `A ramp: 1 to ${MAX_STEPS} steps, all created or none; instead of \`at\` and \`state\``,
        error: `Must be an array of 1 to ${MAX_STEPS} steps { at, state }`,
      }),
    ),
  },
  { additionalProperties: false, title: "NewSchedule", description: "Either `at` and `state` (one schedule) or `steps` (a ramp)" },
);

export const Schedule = t.Object(
  {
    id: t.String({ description: "sch_..." }),
    flagKey: t.String(),
    environment: t.String({ description: "Environment slug" }),
    at: Timestamp("When it applies"),
    state: t.Object({ enabled: t.Optional(t.Boolean()), rolloutPercentage: t.Optional(t.Union([t.Number(), t.Null()])) }),
    status: OneOf(SCHEDULE_STATUSES, { description: SCHEDULE_STATUSES.join(", ") }),
    createdBy: t.Object(
      { type: OneOf(ACTOR_TYPES), id: t.String(), label: t.String({ description: "The user's email or the key's name" }) },
      { description: "Who created it, as the change log's actor; the actor of the state change it applies" },
    ),
    createdAt: Timestamp(),
    appliedAt: t.Union([Timestamp(), t.Null()], { description: "When it was applied; null until then" }),
    error: t.Union([t.String(), t.Null()], { description: "Why it failed (status failed); null otherwise" }),
  },
  { title: "Schedule" },
);

export const ScheduleList = t.Object({ schedules: t.Array(Schedule, { description: "Ordered by at, then id" }) }, { title: "ScheduleList" });

export const ScheduleListQuery = t.Object(
  { status: t.Optional(OneOf(SCHEDULE_STATUSES, { description: `Only schedules of this status: ${SCHEDULE_STATUSES.join(", ")}` })) },
  { additionalProperties: false },
);

export const ScheduleParams = t.Object({ slug: Slug("Project slug"), key: FlagKey("Flag key"), id: t.String({ maxLength: 64, description: "Schedule id (sch_...)" }) });
