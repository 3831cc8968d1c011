/** Evaluation insights and stale flags: request and response schemas (docs/insights.md). */
import { t } from "elysia";
import { OneOf, ResponseInt, Slug, Timestamp } from "../../http/schema";
import { REASONS } from "../../evaluation/types";
import { DAILY_RETENTION_DAYS, HOURLY_RETENTION_DAYS, MAX_RANGE_DAYS } from "./service";
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
