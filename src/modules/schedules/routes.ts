/** Scheduled changes of a flag's state: routes (docs/targeting.md, "Scheduled changes"). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { ProjectParams } from "../projects/model";
import { FlagParams } from "../flags/model";
import { MAX_STEPS, NewSchedule, Schedule, ScheduleList, ScheduleListQuery, ScheduleParams } from "./model";
import type { ScheduleService } from "./service";
import { t } from "elysia";

const SCHEDULES = ["Schedules"];
const WHO = "As flags: API keys of scope mgmt or full (their own project only), admin keys, and login JWTs (writes: admin and editor roles)";
const ORDER = "Ordered by `at`, then id; `status=pending|applied|failed|cancelled` keeps those; not paginated";

export const schedulesRoutes = (schedules: ScheduleService) =>
  new Elysia({ name: "flagsvc/schedules" })
    .use(accessGuard())
    .post(
      "/v1/projects/:slug/flags/:key/schedules",
      async ({ params, body, principal, set, status }) => status(201, await schedules.create(authorOf({ principal, set }), params.slug, params.key, body)),
      {
        access: "flags",
        params: FlagParams,
        body: NewSchedule,
        response: { 201: t.Union([Schedule, ScheduleList]) },
        detail: {
          tags: SCHEDULES,
          summary: "Schedule a change of a flag's state",
          description: `\`{ environment, at, state }\`: at \`at\` (ISO 8601 with a zone, in the future), \`state\` (\`{ enabled?, rolloutPercentage? }\`, at least one, validated as the state PUT validates it) is applied to the flag's state in \`environment\` exactly as \`PUT .../states/{environment}\` would, by the schedule's creator (\`createdBy\`), within a second; the change-log entry's \`requestId\` is the schedule's id. Answers 201 with the schedule (\`status: "pending"\`). A ramp: \`{ environment, steps: [{ at, state }, ...] }\` (1 to ${MAX_STEPS} steps) creates every step or none, and answers 201 with \`{ schedules }\` in the order sent. Every problem is listed in \`details\`. ${WHO}.`,
        },
      },
    )
    .get("/v1/projects/:slug/flags/:key/schedules", ({ params, query }) => schedules.list(params.slug, { key: params.key, status: query.status }), {
      access: "flags",
      params: FlagParams,
      query: ScheduleListQuery,
      response: { 200: ScheduleList },
      detail: { tags: SCHEDULES, summary: "List a flag's schedules", description: `Every schedule of the flag, in any environment. ${ORDER}. Unknown project or flag: 404. ${WHO}.` },
    })
    .get("/v1/projects/:slug/schedules", ({ params, query }) => schedules.list(params.slug, { status: query.status }), {
      access: "flags",
      params: ProjectParams,
      query: ScheduleListQuery,
      response: { 200: ScheduleList },
      detail: { tags: SCHEDULES, summary: "List a project's schedules", description: `Every schedule of the project's flags (also of deleted flags: failed). ${ORDER}. ${WHO}.` },
    })
    .delete(
      "/v1/projects/:slug/flags/:key/schedules/:id",
      ({ params, principal, set }) => schedules.cancel(authorOf({ principal, set }), params.slug, params.key, params.id),
      {
        access: "flags",
        params: ScheduleParams,
        response: { 200: Schedule },
        detail: {
          tags: SCHEDULES,
          summary: "Cancel a schedule",
          description: `A pending schedule becomes \`cancelled\` (it stays in the lists) and is never applied; answers 200 with it. A schedule that is not pending (applied, failed, cancelled) is 409 CONFLICT; an unknown id, or one of another flag, 404. ${WHO}.`,
        },
      },
    );
