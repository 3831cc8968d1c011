/** Evaluation insights and stale flags: request and response schemas (docs/insights.md). */
import { t } from "elysia";
import { OneOf, QueryInt, ResponseInt, Slug, Timestamp } from "../../http/schema";
import { REASONS } from "../../evaluation/types";
import { DAILY_RETENTION_DAYS, DEFAULT_DAYS, HOURLY_RETENTION_DAYS, MAX_DAYS, MAX_FLAGS, MAX_RANGE_DAYS } from "./service";
import { STALE_REASONS } from "./store";

export const INTERVALS = ["hour", "day"] as const;

export const InsightsQuery = t.Object(
  {
    environment: Slug("Environment slug (required; unknown: 404)"),
    from: t.Optional(t.String({ maxLength: 64, description: "ISO 8601 date-time with a zone; the first point is the bucket holding it. Default: `to` minus 24 hours (hour) or 30 days (day)" })),
    to: t.Optional(t.String({ maxLength: 64, description: "ISO 8601 date-time with a zone, excluded. Default: the end of the current hour (day): the current bucket is the last point" })),
    interval: t.Optional(
      OneOf(INTERVALS, {
        description: `hour (default; hourly counts are kept ${HOURLY_RETENTION_DAYS} days, at most ${MAX_RANGE_DAYS.hour} days a request) or day (kept ${DAILY_RETENTION_DAYS} days, at most ${MAX_RANGE_DAYS.day} days a request)`,
        error: "Must be hour or day",
      }),
    ),
  },
  { additionalProperties: false },
);

const Counts = (description: string) => t.Record(t.String(), ResponseInt(), { description });

export const InsightsPoint = t.Object(
  {
    start: Timestamp("The bucket's start (UTC hour or day)"),
    total: ResponseInt({ description: "Production evaluations: every reason but TEST_OVERRIDE" }),
    byVariant: Counts("Production evaluations by variant key (on/off for a boolean flag, or an answer without a variant); a key that is absent is 0"),
    byReason: Counts(`Evaluations by reason (${REASONS.join(", ")}), TEST_OVERRIDE (test sessions) included; a key that is absent is 0`),
  },
  { title: "InsightsPoint" },
);

export const Insights = t.Object(
  {
    flagKey: t.String(),
    environment: t.String({ description: "Environment slug" }),
    interval: OneOf(INTERVALS),
    points: t.Array(InsightsPoint, { description: "Every bucket of the range in order, empty ones with zeros" }),
    lastEvaluatedAt: t.Union([Timestamp(), t.Null()], { description: "The last production evaluation in this environment (never a test-session override); null: never" }),
  },
  { title: "Insights" },
);

export const StaleSchema = t.Union(
  [
    t.Object(
      {
        reason: OneOf(STALE_REASONS, { description: "not_evaluated: no production evaluation in any environment for staleAfterDays days; fully_rolled_out: one value to everyone in every environment, unchanged for staleAfterDays days" }),
        since: Timestamp("When the flag became stale"),
      },
      { title: "Stale" },
    ),
    t.Null(),
  ],
  { description: "null: not stale (docs/insights.md, Stale flags); checked every 5 minutes" },
);

export const DailyInsightsQuery = t.Object(
  {
    flags: t.String({ minLength: 1, maxLength: MAX_FLAGS * 129, description: `Comma-separated flag keys, at most ${MAX_FLAGS} (a page of the flag list); keys that name no flag are left out of the answer`, error: "Must be comma-separated flag keys" }),
    days: t.Optional(QueryInt("^([1-9]|[1-8][0-9]|90)$", `Default ${DEFAULT_DAYS}, at most ${MAX_DAYS}: today (UTC) and the days before it`, `Must be an integer from 1 to ${MAX_DAYS}`)),
    environment: t.Optional(Slug("One environment (unknown: 404); omitted: every environment of the project, summed")),
  },
  { additionalProperties: false },
);

export const DailyInsights = t.Object(
  {
    environment: t.Union([t.String(), t.Null()], { description: "The environment asked for, or null: every environment summed" }),
    from: Timestamp("The start (UTC midnight) of the first day"),
    days: ResponseInt({ description: "How many days: the length of each flag's `days`" }),
    flags: t.Array(
      t.Object(
        {
          flagKey: t.String(),
          total: ResponseInt({ description: "Production evaluations over the days (every reason but TEST_OVERRIDE)" }),
          days: t.Array(ResponseInt(), { description: "Production evaluations a day, oldest first; the last is today, with what is not flushed yet" }),
        },
        { title: "FlagDailyInsights" },
      ),
      { description: "The flags asked for, in the order asked (repeated keys once), without keys that name no flag" },
    ),
  },
  { title: "DailyInsights" },
);
