/**
 * Mixpanel (analytics): evaluations as `$experiment_started` exposure events, flag changes as
 * `Feature Flag Changed` events, through the Ingestion API's `/import` endpoint.
 *
 * Followed:
 * - Import Events: https://developer.mixpanel.com/reference/import-events
 *   (https://docs.mixpanel.com/reference/import-events): `POST /import?strict=1`, JSON array,
 *   at most 2000 events and 2 MB uncompressed per request (the newer page says 10 MB: the
 *   stricter figure is kept); the project token as Basic auth user with an empty password;
 *   each event needs `event`, `properties.time` (ms), `distinct_id` and `$insert_id` (at most
 *   36 bytes, letters, digits and "-"); (event, time, distinct_id, $insert_id) dedupes, so a
 *   retry is safe; `ip: 0` skips the GeoIP lookup (the request comes from flagsvc, not the user);
 *   with strict=1 a 400 lists `failed_records` and the others ARE ingested (`num_records_imported`);
 *   429 and 502/503: back off (no Retry-After documented); never retry a validation 400.
 * - Hosts by data residency: https://docs.mixpanel.com/openapi/ingestion.yaml
 *   (api / api-eu / api-in .mixpanel.com).
 * - Exposure events: https://docs.mixpanel.com/docs/experiments ("Implementation for
 *   Experimentation"): event `$experiment_started` with string properties "Experiment name"
 *   and "Variant name"; the Experiments report reads them.
 * - Event naming (few names, the variation in properties): the "event" section of Import Events.
 */
import { type Static, Type } from "@sinclair/typebox";
import {
  actorUserId,
  basicAuth,
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
  variantLabel,
} from "./events";
import { apiHostField, apiUrl, excerpt, parseJson, statusOutcome } from "./http";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./types";

export const MIXPANEL_MAX_EVENTS = 2000;
export const MIXPANEL_MAX_BYTES = 2 * 1024 * 1024;
export const MIXPANEL_HOSTS = { us: "https://api.mixpanel.com", eu: "https://api-eu.mixpanel.com", in: "https://api-in.mixpanel.com" } as const;
export const EXPOSURE_EVENT = "$experiment_started";
export const CHANGE_EVENT = "Feature Flag Changed";

const configSchema = Type.Object(
  {
    projectToken: Type.String({
      minLength: 1,
      secret: true,
      description: "The Mixpanel project's token (Project Settings > Overview > Access Keys), sent as the Basic auth user of /import.",
    }),
    region: regionField(MIXPANEL_HOSTS, "The project's data residency: us (api.mixpanel.com), eu (api-eu.mixpanel.com) or in (api-in.mixpanel.com)."),
    apiHost: apiHostField("Base URL with scheme to send to instead of Mixpanel's API (a proxy, a test receiver). Default: https://api.mixpanel.com, or the region's host."),
    trackEvaluations: trackEvaluationsField(),
    trackChanges: trackChangesField(),
    sampleRate: sampleRateField(),
  },
  { additionalProperties: false },
);

export type MixpanelConfig = Static<typeof configSchema>;

/** The first 36 hex characters of the id: Mixpanel's `$insert_id` limit (36 bytes, [A-Za-z0-9-]). */
const insertId = (id: string): string => id.slice(0, 36);

function exposure(r: EvaluationRecord, id: string): string {
  return JSON.stringify({
    event: EXPOSURE_EVENT,
    properties: {
      time: epochMs(r.evaluatedAt),
      // An evaluation without a user: Mixpanel takes "" (counted, left out of per-user analysis).
      distinct_id: r.userId ?? "",
      $insert_id: insertId(id),
      ip: 0,
      "Experiment name": r.flagKey,
      "Variant name": variantLabel(r),
      ...evaluationProperties(r),
    },
  });
}

function changeEvent(c: FlagChangeEvent): string {
  return JSON.stringify({
    event: CHANGE_EVENT,
    properties: {
      time: epochMs(c.timestamp),
      distinct_id: actorUserId(c),
      $insert_id: insertId(changeId(c)),
      ip: 0,
      ...changeProperties(c),
    },
  });
}

function requests(events: string[], config: MixpanelConfig): VendorRequest[] {
  const url = apiUrl(config.apiHost, MIXPANEL_HOSTS[config.region ?? "us"] ?? MIXPANEL_HOSTS.us, "/import?strict=1");
  const headers = { authorization: basicAuth(config.projectToken), "content-type": "application/json", accept: "application/json" };
  return chunk(events, MIXPANEL_MAX_EVENTS, MIXPANEL_MAX_BYTES, 2).map((group) => ({
    method: "POST",
    url,
    headers: { ...headers },
    body: `[${group.join(",")}]`,
    events: group.length,
  }));
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  const body = parseJson(response.body);
  if (response.status === 200) {
    const imported = body?.num_records_imported;
    return { kind: "sent", accepted: typeof imported === "number" ? imported : request.events, rejected: 0, error: null };
  }
  // strict=1: a 400 naming failed_records is a partial success; the others were ingested.
  if (response.status === 400 && Array.isArray(body?.failed_records)) {
    const failed: { field?: string; message?: string }[] = body.failed_records;
    const imported = typeof body.num_records_imported === "number" ? body.num_records_imported : Math.max(0, request.events - failed.length);
    const first = failed[0];
    const why = first ? `${first.field ?? "event"}: ${first.message ?? "invalid"}` : excerpt(response.body);
    return { kind: "sent", accepted: imported, rejected: failed.length, error: `Mixpanel rejected ${failed.length} of ${request.events} events (${why})` };
  }
  return statusOutcome("Mixpanel", request, response, { credentialsHint: "check the project token and the region" });
}

export const mixpanel: Connector<MixpanelConfig> = {
  type: "mixpanel",
  category: "analytics",
  name: "Mixpanel",
  description:
    "Sends each evaluation as a $experiment_started exposure event (Experiment name = flag key, Variant name = variant) for Mixpanel's Experiments report, and each flag change as a Feature Flag Changed event, through the /import API.",
  configSchema,
  evaluations(records, config) {
    // No user: Mixpanel takes distinct_id "" (see exposure).
    return requests(evaluationsToSend(records, config, false).map(({ record, id }) => exposure(record, id)), config);
  },
  changes(changes, config) {
    if (config.trackChanges === false) return [];
    return requests(changes.map(changeEvent), config);
  },
  outcome,
};
