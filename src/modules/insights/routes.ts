/** Evaluation insights per flag (docs/insights.md). */
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { FlagParams } from "../flags/model";
import { DailyInsights, DailyInsightsQuery, Insights, InsightsQuery } from "./model";
import { ProjectParams } from "../projects/model";
import { DAILY_RETENTION_DAYS, DEFAULT_DAYS, HOURLY_RETENTION_DAYS, MAX_DAYS, MAX_FLAGS, MAX_RANGE_DAYS, type InsightsService } from "./service";

export const insightsRoutes = (insights: InsightsService) =>
  new Elysia({ name: "flagsvc/insights" })
    .use(accessGuard())
    .get("/v1/projects/:slug/insights", ({ params, query }) => insights.daily(params.slug, query), {
      access: "flags",
      params: ProjectParams,
      query: DailyInsightsQuery,
      response: { 200: DailyInsights },
      detail: {
        tags: ["Flags"],
        summary: "Daily evaluation totals of a page of flags",
        description: `\`{ environment, from, days, flags: [{ flagKey, total, days: [n, ...] }] }\`: for each flag of \`flags\` (comma-separated keys, at most ${MAX_FLAGS}: a page of the flag list), its production evaluations (every reason but TEST_OVERRIDE) a day, oldest first, over the last \`days\` days (default ${DEFAULT_DAYS}, at most ${MAX_DAYS}; UTC days, today the last, with what is not flushed yet, so an evaluation shows at once), summed over every environment of the project, or over \`environment\` alone. One request for a whole page, instead of one per flag (the console's sparklines), read from the same counts as \`GET .../flags/{key}/insights\` in one query; a separate endpoint rather than \`include=\` on the flag list, so that the list answers without reading counts and the counts can be fetched after it. Keys that name no flag (a flag deleted meanwhile) are left out, not 404. 400 VALIDATION_ERROR: a key that is not a flag key or more than ${MAX_FLAGS} keys (\`query.flags\`), \`days\` out of range. Unknown project or environment: 404. Access as for reading flags: API keys of scope mgmt or full (their own project only), admin keys, login JWTs of every role.`,
      },
    })
    .get("/v1/projects/:slug/flags/:key/insights", ({ params, query }) => insights.query(params.slug, params.key, query), {
    access: "flags",
    params: FlagParams,
    query: InsightsQuery,
    response: { 200: Insights },
    detail: {
      tags: ["Flags"],
      summary: "Evaluation insights of a flag in an environment",
      description: `\`{ flagKey, environment, interval, points: [{ start, total, byVariant, byReason }], lastEvaluatedAt }\` (docs/insights.md). \`environment\` is required. \`interval\`: hour (default) or day. \`from\` and \`to\`: ISO 8601 date-times with a zone; \`to\` (excluded) defaults to the end of the current hour (day), so that the current bucket is the last point, \`from\` to \`to\` minus 24 hours (hour) or 30 days (day); the points are every bucket from the one holding \`from\` up to \`to\`, in order, empty ones listed with zeros. \`byVariant\` is keyed by variant key (on/off for a boolean flag), \`byReason\` by reason; an absent key is 0. Test-session overrides are counted under \`byReason.TEST_OVERRIDE\` only: \`total\` and \`byVariant\` count production traffic (every other reason), and they never set \`lastEvaluatedAt\`. Counts are written every SVC_INSIGHTS_FLUSH_SECONDS (default 10) and the ones not written yet are added to the current bucket, so an evaluation shows at once. Retention: hourly buckets ${HOURLY_RETENTION_DAYS} days (then rolled into daily ones), daily buckets ${DAILY_RETENTION_DAYS} days. 400 VALIDATION_ERROR: a malformed time (\`query.from\`, \`query.to\`), \`from\` not before \`to\`, a range over ${MAX_RANGE_DAYS.hour} days (hour) or ${MAX_RANGE_DAYS.day} days (day), hourly points older than ${HOURLY_RETENTION_DAYS} days (\`query.from\`). Unknown project, flag or environment: 404. Access as for reading flags: API keys of scope mgmt or full (their own project only), admin keys, login JWTs of every role.`,
    },
  });
