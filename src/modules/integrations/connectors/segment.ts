/**
 * Segment (CDP): evaluations as `Experiment Viewed` track events plus one Identify per user with
 * the flag's variant as a trait, flag changes as `Feature Flag <Action>` track events, through
 * the HTTP Tracking API's batch endpoint.
 *
 * Followed:
 * - HTTP API source: https://segment.com/docs/connections/sources/catalog/libraries/server/http-api/
 *   (now https://www.twilio.com/docs/segment/connections/sources/catalog/libraries/server/http-api):
 *   `POST /v1/batch` on https://api.segment.io (EU workspaces: https://events.eu1.segmentapis.com),
 *   `{ batch: [...], context }`, each message with a `type`, a `userId` or `anonymousId`, track
 *   messages with `event`; Basic auth with the source's write key as user and an empty password;
 *   at most 500 KB per batch request, 32 KB per message, 2500 messages per batch; `messageId`
 *   (under 100 characters) dedupes; a 200 for everything but oversize or invalid JSON (400), so a
 *   wrong write key or a message without an id is dropped silently (see the source's debugger);
 *   429 comes with `Retry-After` and `X-RateLimit-Reset` (seconds).
 * - Deduplication: https://segment.com/docs/guides/duplicate-data/ : on `messageId`, over at
 *   least 24 hours.
 * - A/B testing spec: https://segment.com/docs/connections/spec/ab-testing/ : the semantic event
 *   `Experiment Viewed` with `experiment_id`, `experiment_name`, `variation_id`,
 *   `variation_name` (destinations such as Amplitude, Mixpanel and Optimizely map it).
 * - Event naming: https://segment.com/docs/connections/spec/track/ (Object Action, Title Case).
 */
import { type Static, Type } from "@sinclair/typebox";
import { VERSION } from "../../../version";
import {
  actorUserId,
  basicAuth,
  changeId,
  changeProperties,
  chunk,
  evaluationsToSend,
  evaluationProperties,
  hashId,
  latestPerUser,
  regionField,
  sampleRateField,
  trackChangesField,
  trackEvaluationsField,
  variantLabel,
} from "./events";
import { apiHostField, apiUrl, rateLimitResetMs, statusOutcome } from "./http";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./types";

export const SEGMENT_MAX_MESSAGES = 2500;
export const SEGMENT_MAX_BYTES = 500 * 1024;
/** The traits of one Identify, at most: half of Segment's 32 KB a message leaves room for the rest. */
export const IDENTIFY_TRAITS_MAX_BYTES = 16 * 1024;
export const SEGMENT_HOSTS = { us: "https://api.segment.io", eu: "https://events.eu1.segmentapis.com" } as const;
export const EXPOSURE_EVENT = "Experiment Viewed";
export const CHANGE_EVENTS: Record<FlagChangeEvent["event"], string> = {
  "flag.created": "Feature Flag Created",
  "flag.updated": "Feature Flag Updated",
  "flag.deleted": "Feature Flag Deleted",
  "flag.enabled": "Feature Flag Enabled",
  "flag.disabled": "Feature Flag Disabled",
  "flag.stale": "Feature Flag Stale",
};

const configSchema = Type.Object(
  {
    writeKey: Type.String({
      minLength: 1,
      secret: true,
      description: "The write key of a Segment HTTP API source (Connections > Sources > your source > Settings > API Keys), sent as the Basic auth user.",
    }),
    region: regionField(
      SEGMENT_HOSTS,
      "Where the workspace lives: us (api.segment.io) or eu (events.eu1.segmentapis.com). An EU workspace sent to the US host drops the events without an error.",
    ),
    apiHost: apiHostField("Base URL with scheme to send to instead of Segment's API (a proxy, a test receiver). Default: https://api.segment.io, or the region's host."),
    trackEvaluations: trackEvaluationsField(),
    identifyTraits: Type.Optional(
      Type.Boolean({
        default: true,
        description: "With the evaluations, send one Identify per user setting the trait flagsvc_<environment>_<flag key> to the variant served (for audiences and destinations).",
      }),
    ),
    trackChanges: trackChangesField(),
    sampleRate: sampleRateField(),
  },
  { additionalProperties: false },
);

export type SegmentConfig = Static<typeof configSchema>;

const CONTEXT = JSON.stringify({ library: { name: "flagsvc", version: VERSION } });

/** The trait a user's latest variant of a flag in an environment is kept in. */
export function traitName(environment: string, flagKey: string): string {
  return `flagsvc_${environment}_${flagKey}`;
}

function experimentViewed(r: EvaluationRecord, id: string, userId: string): string {
  const variant = variantLabel(r);
  return JSON.stringify({
    type: "track",
    messageId: id,
    userId,
    event: EXPOSURE_EVENT,
    timestamp: r.evaluatedAt,
    properties: { experiment_id: r.flagKey, experiment_name: r.flagKey, variation_id: variant, variation_name: variant, ...evaluationProperties(r) },
  });
}

/** One Identify per user: each flag's latest variant (per environment) in the records. */
function identifies(records: readonly EvaluationRecord[]): string[] {
  const out: string[] = [];
  for (const [userId, latest] of latestPerUser(records, (r) => traitName(r.environment, r.flagKey))) {
    const at = [...latest.values()].reduce((a, b) => (Date.parse(b.evaluatedAt) > Date.parse(a.evaluatedAt) ? b : a)).evaluatedAt;
    const identify = (traits: Record<string, string>) =>
      out.push(JSON.stringify({ type: "identify", messageId: hashId("identify", userId, JSON.stringify(traits), at), userId, timestamp: at, traits }));
    // A user evaluated on many flags at once: several Identifies, each well under Segment's 32 KB a message.
    let traits: Record<string, string> = {};
    let bytes = 0;
    for (const [name, record] of [...latest].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const value = variantLabel(record);
      const size = Buffer.byteLength(JSON.stringify(name) + JSON.stringify(value)) + 2;
      if (bytes > 0 && bytes + size > IDENTIFY_TRAITS_MAX_BYTES) {
        identify(traits);
        traits = {};
        bytes = 0;
      }
      traits[name] = value;
      bytes += size;
    }
    identify(traits);
  }
  return out;
}

function changeEvent(c: FlagChangeEvent): string {
  return JSON.stringify({
    type: "track",
    messageId: changeId(c),
    userId: actorUserId(c),
    event: CHANGE_EVENTS[c.event] ?? "Feature Flag Updated",
    timestamp: c.timestamp,
    properties: changeProperties(c),
  });
}

function envelope(messages: readonly string[]): string {
  return `{"batch":[${messages.join(",")}],"context":${CONTEXT}}`;
}

function requests(messages: string[], config: SegmentConfig): VendorRequest[] {
  const url = apiUrl(config.apiHost, SEGMENT_HOSTS[config.region ?? "us"] ?? SEGMENT_HOSTS.us, "/v1/batch");
  const headers = { authorization: basicAuth(config.writeKey), "content-type": "application/json" };
  return chunk(messages, SEGMENT_MAX_MESSAGES, SEGMENT_MAX_BYTES, Buffer.byteLength(envelope([]))).map((group) => ({
    method: "POST",
    url,
    headers: { ...headers },
    body: envelope(group),
    events: group.length,
  }));
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  // 400 is the whole batch (too large, invalid JSON): a malformed request, never retried.
  // Segment's 429 gives the wait in Retry-After, or in X-RateLimit-Reset (seconds).
  return statusOutcome("Segment", request, response, { fallbackWaitMs: (r) => (r.status === 429 ? rateLimitResetMs(r.headers, "in") : null) });
}

export const segment: Connector<SegmentConfig> = {
  type: "segment",
  category: "cdp",
  name: "Segment",
  description:
    "Sends each evaluation of an identified user as an Experiment Viewed track event (Segment's A/B testing spec) and an Identify with the trait flagsvc_<environment>_<flag key> = variant, and each flag change as a Feature Flag <Action> track event, through the HTTP API's batch endpoint.",
  configSchema,
  evaluations(records, config) {
    // Segment needs a userId or anonymousId: an anonymous evaluation cannot be attributed.
    const kept = evaluationsToSend(records, config, true);
    const tracks = kept.map(({ record, id }) => experimentViewed(record, id, record.userId!));
    const messages = config.identifyTraits === false ? tracks : [...identifies(kept.map((k) => k.record)), ...tracks];
    return requests(messages, config);
  },
  changes(changes, config) {
    if (config.trackChanges === false) return [];
    return requests(changes.map(changeEvent), config);
  },
  outcome,
};
