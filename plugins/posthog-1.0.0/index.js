/**
 * PostHog for flagsvc: each flag evaluation of a known user becomes a `$feature_flag_called`
 * event, PostHog's own event for "this user saw this flag value", sent through the capture
 * API's batch endpoint (`POST {baseUrl}/batch/`, the project API key in the body).
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_BASE_URL = "https://us.i.posthog.com";

function settings(config) {
  const c = config ?? {};
  if (typeof c.apiKey !== "string" || c.apiKey === "") throw new Error("config.apiKey is required: the PostHog project API key (phc_...)");
  return { apiKey: c.apiKey, baseUrl: baseUrl(c.baseUrl ?? DEFAULT_BASE_URL) };
}

function baseUrl(value) {
  if (typeof value !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(value)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(value)}`);
  return value.replace(/\/+$/, "");
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `sending $feature_flag_called events to ${s.baseUrl}/batch/`);
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
    events.push({
      event: "$feature_flag_called",
      distinct_id: String(r.userId),
      timestamp: r.evaluatedAt,
      properties: {
        $feature_flag: r.flagKey,
        $feature_flag_response: response,
        [`$feature/${r.flagKey}`]: response,
        flagsvc_environment: r.environment,
        flagsvc_reason: r.reason,
        flagsvc_rule_id: r.ruleId,
      },
    });
  }
  if (events.length > 0) await capture(ctx, s, events);
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
