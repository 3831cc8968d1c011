/**
 * Braze (crm): segment users by flag state. Each evaluated user gets one custom attribute per
 * flag, `<attributePrefix><flagKey>` = the variant, or "on"/"off" for a flag without variants,
 * through the Track users endpoint; a Braze segment filter on that attribute then selects the
 * users in a given state.
 *
 * Vendor documents followed:
 * - POST /users/track (body, Bearer auth, the three answers: success, success with non-fatal
 *   `errors`, fatal): https://www.braze.com/docs/api/endpoints/user_data/post_user_track/
 *   (braze-inc/braze-docs _docs/_api/endpoints/user_data/post_user_track.md)
 * - Limits, 75 objects (attributes + events + purchases) a request, 50 on Monthly Active Users
 *   CY 24-25 contracts; 429 when over: https://www.braze.com/docs/api/api_limits/
 * - REST endpoints per instance (rest.iad-01.braze.com ... rest.fra-01.braze.eu), API keys:
 *   https://www.braze.com/docs/api/basics/
 * - Errors (fatal 4xx/5xx; 5xx to retry with exponential backoff): https://www.braze.com/docs/api/errors/
 *
 * Idempotency: Braze has no insert id for /users/track (each event object is a new event), so
 * evaluations are sent as attributes, not events: setting an attribute to the value it already
 * has changes nothing, so a retried request never double-counts. Within one call the latest
 * evaluation of a (user, flag) wins and each user is one object (Braze bills data points: only
 * what the call holds is sent).
 */
import { Type, type Static } from "@sinclair/typebox";
import { chunk, latestPerUser, variantLabel } from "./events";
import { apiHostField, apiUrl, excerpt, parseJson, rateLimitResetMs, statusOutcome } from "./http";
import type { Connector, EvaluationRecord, Outcome, VendorRequest, VendorResponse } from "./types";

export const BRAZE_DEFAULT_HOST = "https://rest.iad-01.braze.com";
/** Objects (attributes + events + purchases) a /users/track request may carry. */
export const BRAZE_MAX_OBJECTS = 75;

const configSchema = Type.Object(
  {
    apiKey: Type.String({
      minLength: 1,
      secret: true,
      description: "A Braze REST API key with the users.track permission (Settings > APIs and Identifiers), sent as Authorization: Bearer.",
    }),
    apiHost: apiHostField(
      "Your Braze instance's REST endpoint, e.g. https://rest.iad-05.braze.com or https://rest.fra-01.braze.eu (the API overview's table matches dashboard URLs to REST endpoints); or a proxy.",
      BRAZE_DEFAULT_HOST,
    ),
    environment: Type.Optional(
      Type.String({
        minLength: 1,
        default: "production",
        description: 'Only evaluations in this environment (its slug) update Braze; "*" for every environment (the latest evaluation wins).',
      }),
    ),
    attributePrefix: Type.Optional(
      Type.String({
        pattern: "^[A-Za-z0-9_]*$",
        maxLength: 64,
        default: "flagsvc_",
        description: "The start of each custom attribute's name: one attribute per flag, <prefix><flagKey>, holding the variant or on/off.",
      }),
    ),
    updateExistingOnly: Type.Optional(
      Type.Boolean({
        default: true,
        description: "true: only users that already exist in Braze (by external_id) are updated; false: a profile is created for an unknown user ID.",
      }),
    ),
    batchSize: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: BRAZE_MAX_OBJECTS,
        default: BRAZE_MAX_OBJECTS,
        description: "Users a request: Braze takes 75 objects a request, 50 on Monthly Active Users CY 24-25 contracts (set 50 then).",
      }),
    ),
  },
  { additionalProperties: false },
);

export type BrazeConfig = Static<typeof configSchema>;

/** One attributes object a user (its text): the latest evaluation of each flag in `records`. */
function attributeObjects(records: readonly EvaluationRecord[], config: BrazeConfig): string[] {
  const environment = config.environment ?? "production";
  const prefix = config.attributePrefix ?? "flagsvc_";
  const kept = environment === "*" ? records : records.filter((r) => r.environment === environment);
  const objects: string[] = [];
  for (const [userId, latest] of latestPerUser(kept, (r) => r.flagKey)) {
    const object: Record<string, unknown> = { external_id: userId, _update_existing_only: config.updateExistingOnly ?? true };
    // The value a user's attribute for a flag holds: the variant, else "on"/"off".
    for (const record of latest.values()) object[`${prefix}${record.flagKey}`] = variantLabel(record);
    objects.push(JSON.stringify(object));
  }
  return objects;
}

function evaluations(records: readonly EvaluationRecord[], config: BrazeConfig): VendorRequest[] {
  const url = apiUrl(config.apiHost, BRAZE_DEFAULT_HOST, "/users/track");
  const headers = { "content-type": "application/json", authorization: `Bearer ${config.apiKey}` };
  return chunk(attributeObjects(records, config), config.batchSize ?? BRAZE_MAX_OBJECTS).map((attributes) => ({
    method: "POST",
    url,
    headers,
    body: `{"attributes":[${attributes.join(",")}]}`,
    events: attributes.length,
  }));
}

interface BrazeAnswer {
  errors?: unknown;
  attributes_processed?: unknown;
}

/** A Braze error entry as text: `{ type, input_array, index }` objects, or plain strings. */
function errorText(error: unknown): string {
  if (typeof error === "string") return error;
  if (error && typeof error === "object") {
    const { type, input_array, index } = error as Record<string, unknown>;
    if (typeof type === "string") return input_array !== undefined ? `${type} (${String(input_array)}[${String(index)}])` : type;
  }
  return excerpt(JSON.stringify(error));
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  const answer = (parseJson(response.body) ?? {}) as BrazeAnswer;
  if (response.status >= 200 && response.status < 300) {
    const errors = Array.isArray(answer.errors) ? answer.errors : [];
    if (errors.length === 0) return { kind: "sent", accepted: request.events, rejected: 0, error: null };
    // Non-fatal errors: each names one object (input_array + index); the rest were processed.
    const named = new Set(
      errors.map((e) => {
        const { input_array, index } = (e && typeof e === "object" ? e : {}) as Record<string, unknown>;
        return index === undefined ? JSON.stringify(e) : JSON.stringify([input_array, index]);
      }),
    );
    const rejected = Math.min(request.events, named.size);
    return { kind: "sent", accepted: request.events - rejected, rejected, error: `Braze: ${errors.map(errorText).slice(0, 3).join("; ")}` };
  }
  return statusOutcome("Braze", request, response, {
    // Braze's X-RateLimit-Reset: the UNIX time (seconds) the limit resets.
    fallbackWaitMs: (r) => (r.status === 429 ? rateLimitResetMs(r.headers, "at") : null),
  });
}

export const braze: Connector<BrazeConfig> = {
  type: "braze",
  category: "crm",
  name: "Braze",
  description:
    "Segment users by flag state in Braze: each evaluated user gets a custom attribute per flag (<prefix><flagKey> = the variant, or on/off), sent with /users/track.",
  configSchema,
  evaluations,
  outcome,
};
