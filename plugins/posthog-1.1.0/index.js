/**
 * PostHog for flagsvc: each flag evaluation of a known user becomes a `$feature_flag_called`
 * event, PostHog's own event for "this user saw this flag value", optionally also keeping the
 * value as a person property; each flag change becomes an event too. All go through the capture
 * API's batch endpoint (`POST {baseUrl}/batch/`, the project API key in the body).
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_BASE_URL = "https://us.i.posthog.com";
const DEFAULT_CHANGES_DISTINCT_ID = "flagsvc";

function settings(config) {
  const c = config ?? {};
  if (typeof c.apiKey !== "string" || c.apiKey === "") throw new Error("config.apiKey is required: the PostHog project API key (phc_...)");
  if (c.personProperties !== undefined && typeof c.personProperties !== "boolean") throw new Error("config.personProperties must be true or false");
  const changesDistinctId = c.changesDistinctId ?? DEFAULT_CHANGES_DISTINCT_ID;
  if (typeof changesDistinctId !== "string" || changesDistinctId === "") throw new Error("config.changesDistinctId must be a non-empty string");
  return { apiKey: c.apiKey, baseUrl: baseUrl(c.baseUrl ?? DEFAULT_BASE_URL), personProperties: c.personProperties === true, changesDistinctId };
}

function baseUrl(value) {
  if (typeof value !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(value)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(value)}`);
  return value.replace(/\/+$/, "");
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `sending $feature_flag_called and flag change events to ${s.baseUrl}/batch/${s.personProperties ? ", flag values as person properties" : ""}`);
}

/**
 * One event per user, flag and value within a batch (PostHog's SDKs also report a flag value
 * once, not on every call); records without a user are skipped: PostHog needs a distinct_id.
 * One request per batch: the endpoint takes up to 20 MB, 500 records are about 0.2 MB.
 */
export async function onEvaluations(batch, ctx) {
  const s = settings(ctx.config);
  const seen = new Set();
  const events = [];
  for (const r of batch) {
    if (r.userId === null || r.userId === undefined) continue;
    const response = r.variant ?? r.enabled;
    const key = JSON.stringify([r.userId, r.flagKey, response]);
    if (seen.has(key)) continue;
    seen.add(key);
    const properties = {
      $feature_flag: r.flagKey,
      $feature_flag_response: response,
      [`$feature/${r.flagKey}`]: response,
      flagsvc_environment: r.environment,
      flagsvc_reason: r.reason,
      flagsvc_rule_id: r.ruleId,
    };
    // `$set` on an event updates the person's properties: cohorts and filters can then use the value.
    if (s.personProperties) properties.$set = { [`$feature/${r.flagKey}`]: response };
    events.push({ event: "$feature_flag_called", distinct_id: String(r.userId), timestamp: r.evaluatedAt, properties });
  }
  if (events.length > 0) await capture(ctx, s, events);
}

/**
 * A flag change as an event named after it (`flag.enabled`, ...). It belongs to no user:
 * `$process_person_profile: false` keeps PostHog from creating a person for `changesDistinctId`.
 * flagsvc hands events over at least once: `flagsvc_event_id` tells a redelivered one apart.
 */
export async function onEvent(event, ctx) {
  const s = settings(ctx.config);
  const { flagKey, previousState, currentState } = event.data;
  const properties = {
    $feature_flag: flagKey,
    $process_person_profile: false,
    flagsvc_event_id: event.id,
    flagsvc_project: event.projectSlug,
    flagsvc_environment: event.environment,
    flagsvc_previous_enabled: previousState.enabled,
    flagsvc_current_enabled: currentState.enabled,
  };
  if ("rolloutPercentage" in currentState) {
    properties.flagsvc_previous_rollout_percentage = previousState.rolloutPercentage;
    properties.flagsvc_current_rollout_percentage = currentState.rolloutPercentage;
  }
  await capture(ctx, s, [{ event: event.event, distinct_id: s.changesDistinctId, timestamp: event.timestamp, properties }]);
}

async function capture(ctx, s, events) {
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/batch/`,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_key: s.apiKey, batch: events }),
  });
  if (response.status < 200 || response.status > 299) {
    const message = `PostHog /batch/ answered ${response.status}: ${response.body.slice(0, 200)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
}
