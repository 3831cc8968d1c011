/**
 * Amplitude (analytics): evaluations as `$exposure` events (shown as "[Experiment] Exposure"),
 * flag changes as `Feature Flag Changed` events, through the HTTP V2 API.
 *
 * Followed:
 * - HTTP V2 API: https://amplitude.com/docs/apis/analytics/http-v2 : `POST /2/httpapi` on
 *   https://api2.amplitude.com (EU: https://api.eu.amplitude.com), JSON `{ api_key, events,
 *   options }` (the key in the body); each event needs `event_type` and a `user_id` or
 *   `device_id`, `time` in ms; `insert_id` dedupes for 7 days; ids shorter than 5 characters
 *   are dropped unless `options.min_id_length` says otherwise; limits: under 1 MB and at most
 *   2000 events per request (413 above); 400 names the events with invalid or missing fields
 *   (`events_with_invalid_fields`, `events_with_missing_fields`, `silenced_events`) and an
 *   invalid key ("Invalid API key"); 429: pause 30 s for the throttled user or device; 500,
 *   502, 504 may have been taken (insert_id makes the retry safe), 503 was not.
 * - Batch and retry: https://amplitude.com/docs/apis/analytics/http-api-batching-retries :
 *   up to 2,000 events per request, retry 429 and 5xx with backoff, and "when a 400 response
 *   lists rejected events, remove those events and resend the rest" (a 400 ingests nothing).
 * - Exposure events: https://amplitude.com/docs/feature-experiment/track-exposure and
 *   https://amplitude.com/docs/feature-experiment/under-the-hood/event-tracking : event type
 *   `$exposure` with event properties `flag_key` and `variant`; it sets the user property
 *   `[Experiment] <flag_key>` and does not count toward the event volume.
 *
 * A 400 listing rejected events ingests none of the batch. The Outcome then counts the rejected
 * ones (`sent`, accepted 0) and `amplitude.remainder(request, response)` builds the request that
 * carries the others (same insert ids), which the sender sends next (`Connector.remainder`).
 */
import { type Static, Type } from "@sinclair/typebox";
import {
  actorUserId,
  changeId,
  changeProperties,
  chunk,
  epochMs,
  evaluationsToSend,
  evaluationProperties,
  regionField,
  sampleRateField,
  trackChangesField,
  trackEvaluationsField,
} from "./events";
import { answered, apiHostField, apiUrl, badCredentials, parseJson, statusOutcome, vendorSays } from "./http";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./types";

export const AMPLITUDE_MAX_EVENTS = 2000;
/** "Keep request sizes under 1 MB". */
export const AMPLITUDE_MAX_BYTES = 1_000_000 - 1;
export const AMPLITUDE_HOSTS = { us: "https://api2.amplitude.com", eu: "https://api.eu.amplitude.com" } as const;
export const EXPOSURE_EVENT = "$exposure";
export const CHANGE_EVENT = "Feature Flag Changed";
/** 429: "pause sending events for that user or device for a period of 30 seconds before retrying". */
export const THROTTLE_PAUSE_MS = 30_000;

const configSchema = Type.Object(
  {
    apiKey: Type.String({
      minLength: 1,
      secret: true,
      description: "The Amplitude project's API key (Settings > Projects > your project > General), sent in the body of each request.",
    }),
    region: regionField(AMPLITUDE_HOSTS, "The project's data center: us (api2.amplitude.com) or eu (api.eu.amplitude.com)."),
    apiHost: apiHostField("Base URL with scheme to send to instead of Amplitude's API (a proxy, a test receiver). Default: https://api2.amplitude.com, or the region's host."),
    trackEvaluations: trackEvaluationsField(),
    trackChanges: trackChangesField(),
    sampleRate: sampleRateField(),
  },
  { additionalProperties: false },
);

export type AmplitudeConfig = Static<typeof configSchema>;

/** Every field of an event is ours, and a user id like "u1" is a real id: keep ids of any length. */
const OPTIONS = JSON.stringify({ min_id_length: 1 });

function exposure(r: EvaluationRecord, id: string, userId: string): string {
  return JSON.stringify({
    user_id: userId,
    event_type: EXPOSURE_EVENT,
    time: epochMs(r.evaluatedAt),
    insert_id: id,
    // flag_key and variant: what Amplitude Experiment reads of an exposure.
    event_properties: evaluationProperties(r),
  });
}

function changeEvent(c: FlagChangeEvent): string {
  return JSON.stringify({
    user_id: actorUserId(c),
    event_type: CHANGE_EVENT,
    time: epochMs(c.timestamp),
    insert_id: changeId(c),
    event_properties: changeProperties(c),
  });
}

function envelope(apiKey: string, events: readonly string[]): string {
  return `{"api_key":${JSON.stringify(apiKey)},"events":[${events.join(",")}],"options":${OPTIONS}}`;
}

function requests(events: string[], config: AmplitudeConfig): VendorRequest[] {
  const url = apiUrl(config.apiHost, AMPLITUDE_HOSTS[config.region ?? "us"] ?? AMPLITUDE_HOSTS.us, "/2/httpapi");
  const overhead = Buffer.byteLength(envelope(config.apiKey, []));
  return chunk(events, AMPLITUDE_MAX_EVENTS, AMPLITUDE_MAX_BYTES, overhead).map((group) => ({
    method: "POST",
    url,
    headers: { "content-type": "application/json", accept: "*/*" },
    body: envelope(config.apiKey, group),
    events: group.length,
  }));
}

/** The indexes of the events a 400 names (invalid fields, missing fields, silenced devices). */
function rejectedIndexes(body: any): Set<number> {
  const out = new Set<number>();
  for (const map of [body?.events_with_invalid_fields, body?.events_with_missing_fields]) {
    if (map && typeof map === "object") for (const list of Object.values(map)) if (Array.isArray(list)) for (const i of list) if (Number.isInteger(i)) out.add(i);
  }
  if (Array.isArray(body?.silenced_events)) for (const i of body.silenced_events) if (Number.isInteger(i)) out.add(i);
  return out;
}

function isInvalidKey(body: any): boolean {
  return typeof body?.error === "string" && /invalid api key/i.test(body.error);
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  const body = parseJson(response.body);
  const { status } = response;
  if (status === 200) {
    const ingested = body?.events_ingested;
    return { kind: "sent", accepted: typeof ingested === "number" ? ingested : request.events, rejected: 0, error: null };
  }
  if (status === 400 && isInvalidKey(body)) return badCredentials("Amplitude", 400, body.error, "check the API key and the region");
  if (status === 400) {
    const rejected = rejectedIndexes(body);
    if (rejected.size > 0 && rejected.size <= request.events) {
      const fields = [body?.events_with_invalid_fields, body?.events_with_missing_fields].flatMap((m) => (m && typeof m === "object" ? Object.keys(m) : []));
      const why = `${body?.error ?? "invalid events"}${fields.length > 0 ? ` (${fields.join(", ")})` : ""}`;
      const rest = request.events - rejected.size;
      return {
        kind: "sent",
        accepted: 0,
        rejected: rejected.size,
        error: `Amplitude rejected ${rejected.size} of ${request.events} events: ${why}; the batch was not ingested${rest > 0 ? `, the other ${rest} must be resent (amplitude.remainder)` : ""}`,
      };
    }
  }
  // Amplitude's 403 is its firewall or a region it does not serve, not the key (that is a 400).
  if (status === 403) return { kind: "failed", error: `${answered("Amplitude", 403, vendorSays(response.body))} (blocked: its firewall, or a region it does not serve)` };
  // 429: Amplitude documents a 30 s pause for the throttled user or device.
  return statusOutcome("Amplitude", request, response, { fallbackWaitMs: (r) => (r.status === 429 ? THROTTLE_PAUSE_MS : null) });
}

/**
 * After a 400 that names rejected events (nothing of the batch was ingested): the request that
 * carries the other events, unchanged (same insert ids), or null when there is nothing to resend.
 */
function remainder(request: VendorRequest, response: VendorResponse): VendorRequest | null {
  if (response.status !== 400) return null;
  const body = parseJson(response.body);
  if (isInvalidKey(body)) return null;
  const rejected = rejectedIndexes(body);
  if (rejected.size === 0) return null;
  const sent = parseJson(request.body) as { api_key: string; events: unknown[] } | null;
  if (!sent || !Array.isArray(sent.events)) return null;
  const kept = sent.events.filter((_, i) => !rejected.has(i)).map((e) => JSON.stringify(e));
  if (kept.length === 0) return null;
  return { ...request, headers: { ...request.headers }, body: envelope(sent.api_key, kept), events: kept.length };
}

export const amplitude: Connector<AmplitudeConfig> & Required<Pick<Connector, "remainder">> = {
  type: "amplitude",
  category: "analytics",
  name: "Amplitude",
  description:
    "Sends each evaluation of an identified user as an Amplitude Experiment exposure ($exposure, with flag_key and variant: it sets the user property [Experiment] <flag key>), and each flag change as a Feature Flag Changed event, through the HTTP V2 API.",
  configSchema,
  evaluations(records, config) {
    // Amplitude needs a user (or device) id: an anonymous evaluation cannot be attributed.
    return requests(evaluationsToSend(records, config, true).map(({ record, id }) => exposure(record, id, record.userId!)), config);
  },
  changes(changes, config) {
    if (config.trackChanges === false) return [];
    return requests(changes.map(changeEvent), config);
  },
  outcome,
  remainder,
};
