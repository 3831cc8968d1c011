/**
 * Datadog (monitoring): flag changes as Change Tracking events, evaluation counts as a count
 * metric, per Datadog's server-side APIs (the browser RUM SDK's addFeatureFlagEvaluation is the
 * client-side counterpart and is not what this sends).
 *
 * Vendor documents followed:
 * - Submit metrics, POST /api/v2/series on api.<site>, DD-API-KEY, `type` 1 = count, points of
 *   { timestamp (s), value }, 202 { errors: [] }; payload at most 500 KB (512000 bytes):
 *   https://docs.datadoghq.com/api/latest/metrics/submit-metrics/
 * - Points are stored at 1 s resolution and "if any points have the same timestamp, the latest
 *   point overwrites the previous ones": https://docs.datadoghq.com/metrics/introduction/
 * - Post an event (v2), POST /api/v2/events on event-management-intake.<site>, category
 *   "change", attributes.changed_resource { type: "feature_flag" }, author, prev_value /
 *   new_value, impacted_resources (services); title <= 500 chars, message <= 4000, timestamp
 *   ISO 8601 no older than 18 h: https://docs.datadoghq.com/api/latest/events/post-an-event/
 *   and https://docs.datadoghq.com/change_tracking/
 * - Sites and their hosts (datadoghq.com, us3, us5, datadoghq.eu, ap1, ap2, uk1, ddog-gov.com, us2.ddog-gov.com):
 *   the endpoint tables of the two pages above.
 *
 * Idempotency: Datadog offers no insert id for either API. Metrics: the connector is
 * `everySecond`: the sender hands it evaluations once a second, everything it received in that
 * second, and each hand-over becomes one count point per series stamped with the second of the
 * sender's clock (`Math.floor(nowMs / 1000)`), its value the number of those records. So each
 * (series, second) is sent exactly once, and a retry sends the same body (same points, same
 * values), which overwrites itself at Datadog: never counted twice. A point is stamped with the
 * second the sender handed the evaluations over, not the second each was made (usually the
 * next one); a retry more than an hour late is dropped by Datadog (202 with errors, kept as
 * the error). Change events have no insert id: a resend after a lost 2xx (or a crash) may
 * store one change twice. Each carries the flagsvc event id in change_metadata, and as its
 * `aggregation_key` ("flagsvc:<event id>", at most 100 characters), with which Datadog's event
 * correlation deduplicates events into one alert/case (the v2 event payload's documented use:
 * https://docs.datadoghq.com/api/latest/events/post-an-event/); both copies stay in the explorer.
 */
import { Type, type Static } from "@sinclair/typebox";
import { chunk, stateText, trackChangesField, trackEvaluationsField } from "./events";
import { apiHostField, apiUrl, excerpt, parseJson, rateLimitResetMs, statusOutcome, vendorSays } from "./http";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./types";

export const DATADOG_SITES = [
  "datadoghq.com",
  "us3.datadoghq.com",
  "us5.datadoghq.com",
  "datadoghq.eu",
  "ap1.datadoghq.com",
  "ap2.datadoghq.com",
  "uk1.datadoghq.com",
  "ddog-gov.com",
  "us2.ddog-gov.com",
] as const;
export const DATADOG_METRIC = "flagsvc.flag.evaluations";
/** The documented payload limit of /api/v2/series, with room for the envelope. */
export const DATADOG_MAX_BODY_BYTES = 500_000;

const configSchema = Type.Object(
  {
    apiKey: Type.String({
      minLength: 1,
      secret: true,
      description: "A Datadog API key (Organization Settings > API Keys), sent as DD-API-KEY.",
    }),
    applicationKey: Type.Optional(
      Type.String({
        minLength: 1,
        secret: true,
        description: "A Datadog application key, sent as DD-APPLICATION-KEY with change events (the Events API v2 names both keys); leave it out if your organization accepts the API key alone.",
      }),
    ),
    site: Type.Optional(
      Type.Union(
        DATADOG_SITES.map((s) => Type.Literal(s)),
        { default: "datadoghq.com", description: "Your Datadog site: the host of your Datadog app without app. (app.datadoghq.eu -> datadoghq.eu)." },
      ),
    ),
    apiHost: apiHostField("A base URL that replaces both Datadog hosts (a proxy); by default metrics go to https://api.<site> and events to https://event-management-intake.<site>."),
    service: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "The Datadog service (APM service name) a flag change is shown on, as its impacted resource.",
      }),
    ),
    tags: Type.Optional(
      Type.Array(Type.String({ pattern: "^[A-Za-z][^,\\s]*$", maxLength: 200 }), {
        maxItems: 20,
        default: [],
        description: "Tags added to every metric series and event, e.g. team:payments.",
      }),
    ),
    trackEvaluations: trackEvaluationsField(`Send evaluation counts as the count metric ${DATADOG_METRIC}.`),
    trackChanges: trackChangesField("Send flag changes as Change Tracking events."),
  },
  { additionalProperties: false },
);

export type DatadogConfig = Static<typeof configSchema>;

function site(config: DatadogConfig): string {
  return config.site ?? "datadoghq.com";
}

function headers(config: DatadogConfig, withAppKey: boolean): Record<string, string> {
  const h: Record<string, string> = { "content-type": "application/json", accept: "application/json", "dd-api-key": config.apiKey };
  if (withAppKey && config.applicationKey) h["dd-application-key"] = config.applicationKey;
  return h;
}

/** A Datadog tag: lower case, characters outside [a-z0-9_\-:./] as "_", at most 200 chars. */
export function ddTag(key: string, value: string): string {
  return `${key}:${value.toLowerCase().replace(/[^a-z0-9_\-:./]/g, "_")}`.slice(0, 200);
}

interface Series {
  metric: string;
  type: 1;
  interval: 1;
  points: { timestamp: number; value: number }[];
  tags: string[];
}

/**
 * One hand-over: per series (flag, env, variant, enabled, reason and the config's tags) one
 * count point at the second of `nowMs`, the number of its records; the series packed into
 * bodies under the payload limit.
 */
function evaluations(records: readonly EvaluationRecord[], config: DatadogConfig, nowMs: number): VendorRequest[] {
  if (config.trackEvaluations === false) return [];
  const extra = config.tags ?? [];
  const timestamp = Math.floor(nowMs / 1000);
  // series (by the values its tags are made of) -> count; the tags are built once a series.
  const counts = new Map<string, { record: EvaluationRecord; count: number }>();
  for (const r of records) {
    const key = `${r.flagKey}\u0000${r.environment}\u0000${r.variant}\u0000${r.enabled}\u0000${r.reason}`;
    const s = counts.get(key);
    if (s) s.count++;
    else counts.set(key, { record: r, count: 1 });
  }
  // Values that differ can make the same tags (ddTag folds case and characters): one series each.
  const bySeries = new Map<string, { tags: string[]; count: number }>();
  for (const { record: r, count } of counts.values()) {
    const tags = [ddTag("flag", r.flagKey), ddTag("env", r.environment), ddTag("variant", r.variant ?? "none"), ddTag("enabled", String(r.enabled)), ddTag("reason", r.reason), ...extra];
    const key = tags.join(",");
    const s = bySeries.get(key);
    if (s) s.count += count;
    else bySeries.set(key, { tags, count });
  }
  const parts = [...bySeries.values()].map(({ tags, count }) => {
    const series: Series = { metric: DATADOG_METRIC, type: 1, interval: 1, points: [{ timestamp, value: count }], tags };
    return { text: JSON.stringify(series), count };
  });
  const url = apiUrl(config.apiHost, `https://api.${site(config)}`, "/api/v2/series");
  return chunk(parts, Number.POSITIVE_INFINITY, DATADOG_MAX_BODY_BYTES, Buffer.byteLength('{"series":[]}'), (p) => p.text).map((group) => ({
    method: "POST",
    url,
    headers: headers(config, false),
    body: `{"series":[${group.map((p) => p.text).join(",")}]}`,
    events: group.reduce((n, p) => n + p.count, 0),
  }));
}

const VERB: Record<FlagChangeEvent["event"], string> = {
  "flag.created": "created",
  "flag.updated": "updated",
  "flag.deleted": "deleted",
  "flag.enabled": "enabled",
  "flag.disabled": "disabled",
  "flag.stale": "marked stale",
};

/** The change log's actor types as Datadog's author types (user, system, api, automation). */
function authorType(actorType: string): "user" | "system" | "api" | "automation" {
  if (actorType === "user" || actorType === "cli") return "user";
  if (actorType === "api_key" || actorType === "admin_key") return "api";
  if (actorType === "system") return "system";
  return "automation";
}

function state(s: FlagChangeEvent["data"]["currentState"]): Record<string, unknown> {
  const out: Record<string, unknown> = { enabled: s.enabled };
  if (s.rolloutPercentage !== undefined && s.rolloutPercentage !== null) out.rolloutPercentage = s.rolloutPercentage;
  return out;
}

/** The same for every resend of a change (its event id is stored with it): Datadog's correlation dedupes on it. */
export function aggregationKey(change: FlagChangeEvent): string {
  return `flagsvc:${change.id}`.slice(0, 100);
}

function changeEvent(change: FlagChangeEvent, config: DatadogConfig): Record<string, unknown> {
  const { flagKey, previousState, currentState } = change.data;
  const verb = VERB[change.event] ?? change.event;
  const attributes: Record<string, unknown> = {
    author: { name: change.actor.label, type: authorType(change.actor.type) },
    changed_resource: { name: flagKey, type: "feature_flag" },
    prev_value: state(previousState),
    new_value: state(currentState),
    change_metadata: {
      flagsvc_event_id: change.id,
      flagsvc_event: change.event,
      project: change.projectSlug,
      environment: change.environment,
      actor_id: change.actor.id,
      actor_type: change.actor.type,
    },
  };
  if (config.service) attributes.impacted_resources = [{ name: config.service, type: "service" }];
  return {
    data: {
      type: "event",
      attributes: {
        aggregation_key: aggregationKey(change),
        category: "change",
        title: `Feature flag ${flagKey} ${verb} in ${change.environment}`.slice(0, 500),
        message: `${change.actor.label} ${verb} ${flagKey} in ${change.environment} (project ${change.projectSlug}): ${stateText(previousState)} -> ${stateText(currentState)}`.slice(0, 4000),
        timestamp: change.timestamp,
        tags: [ddTag("env", change.environment), ddTag("project", change.projectSlug), ddTag("flag", flagKey), "source:flagsvc", ...(config.tags ?? [])],
        attributes,
      },
    },
  };
}

function changes(list: readonly FlagChangeEvent[], config: DatadogConfig): VendorRequest[] {
  if (config.trackChanges === false) return [];
  const url = apiUrl(config.apiHost, `https://event-management-intake.${site(config)}`, "/api/v2/events");
  // The v2 events API takes one event a request.
  return list.map((change) => ({ method: "POST", url, headers: headers(config, true), body: JSON.stringify(changeEvent(change, config)), events: 1 }));
}

/** Datadog's errors: strings, or JSON:API objects { title, detail }. */
function errorsOf(body: string): string[] {
  const answer = parseJson(body) as { errors?: unknown } | null;
  if (!answer || !Array.isArray(answer.errors)) return [];
  return answer.errors.map((e) => (typeof e === "string" ? e : [e?.title, e?.detail].filter((x) => typeof x === "string").join(": ") || excerpt(JSON.stringify(e))));
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  const errors = errorsOf(response.body);
  if (response.status >= 200 && response.status < 300) {
    // /api/v2/series answers 202 { errors: [...] } when it dropped points (e.g. a timestamp out of range) without saying which.
    return { kind: "sent", accepted: request.events, rejected: 0, error: errors.length ? `Datadog: ${errors.slice(0, 3).join("; ")}` : null };
  }
  return statusOutcome("Datadog", request, response, {
    // Datadog's X-RateLimit-Reset: seconds until the window resets.
    fallbackWaitMs: (r) => (r.status === 429 ? rateLimitResetMs(r.headers, "in") : null),
    detail: (r) => (errors.length ? errors.slice(0, 3).join("; ") : vendorSays(r.body)),
  });
}

export const datadog: Connector<DatadogConfig> = {
  type: "datadog",
  category: "monitoring",
  name: "Datadog",
  description: `Flag changes as Datadog Change Tracking events (feature_flag) and evaluation counts as the count metric ${DATADOG_METRIC}, tagged by flag, env, variant, enabled and reason.`,
  configSchema,
  evaluations,
  everySecond: true,
  changes,
  outcome,
};
