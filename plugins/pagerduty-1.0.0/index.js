/**
 * PagerDuty for flagsvc: each flag change becomes a PagerDuty change event (Events API v2,
 * `POST {baseUrl}/v2/change/enqueue`), listed on the service next to its incidents, so
 * responders see "checkout-v2 turned on in production" right before the error spike.
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_BASE_URL = "https://events.pagerduty.com";
const DEFAULT_SOURCE = "flagsvc";
/** The Events API limit on `payload.summary`. */
const SUMMARY_MAX = 1024;

function settings(config) {
  const c = config ?? {};
  if (typeof c.routingKey !== "string" || !/^[A-Za-z0-9]{32}$/.test(c.routingKey)) throw new Error("config.routingKey must be the 32-character integration key of an Events API v2 integration");
  const baseUrl = c.baseUrl ?? DEFAULT_BASE_URL;
  if (typeof baseUrl !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(baseUrl)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  const source = c.source ?? DEFAULT_SOURCE;
  if (typeof source !== "string" || source === "") throw new Error("config.source must be a non-empty string");
  if (c.linkUrl !== undefined && (typeof c.linkUrl !== "string" || !/^https?:\/\/\S+$/.test(c.linkUrl))) throw new Error("config.linkUrl must be an http(s) URL");
  if (c.environments !== undefined && (!Array.isArray(c.environments) || !c.environments.every((e) => typeof e === "string"))) throw new Error("config.environments must be an array of environment keys");
  return { routingKey: c.routingKey, baseUrl: baseUrl.replace(/\/+$/, ""), source, linkUrl: c.linkUrl, environments: c.environments };
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `sending flag changes as change events to ${s.baseUrl}/v2/change/enqueue`);
}

export async function onEvent(event, ctx) {
  const s = settings(ctx.config);
  if (s.environments && !s.environments.includes(event.environment)) return;
  const { flagKey, previousState, currentState } = event.data;
  const body = {
    routing_key: s.routingKey,
    payload: {
      summary: describe(event).slice(0, SUMMARY_MAX),
      timestamp: event.timestamp,
      source: s.source,
      custom_details: { event: event.event, event_id: event.id, project: event.projectSlug, environment: event.environment, flag_key: flagKey, previous_state: previousState, current_state: currentState },
    },
  };
  if (s.linkUrl !== undefined) body.links = [{ href: s.linkUrl, text: "flagsvc" }];
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/v2/change/enqueue`,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (response.status < 200 || response.status > 299) {
    const message = `PagerDuty /v2/change/enqueue answered ${response.status}: ${response.body.slice(0, 200)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
}

/** The change event's title in PagerDuty: what happened to which flag, where. */
function describe(event) {
  const { flagKey, previousState, currentState } = event.data;
  const where = `in ${event.environment} (project ${event.projectSlug})`;
  switch (event.event) {
    case "flag.enabled":
      return `Feature flag ${flagKey} turned on ${where}`;
    case "flag.disabled":
      return `Feature flag ${flagKey} turned off ${where}`;
    case "flag.created":
      return `Feature flag ${flagKey} created ${where}, ${currentState.enabled ? "on" : "off"}`;
    case "flag.deleted":
      return `Feature flag ${flagKey} deleted ${where}`;
    default:
      return "rolloutPercentage" in currentState
        ? `Feature flag ${flagKey} rollout ${percent(previousState.rolloutPercentage)} -> ${percent(currentState.rolloutPercentage)} ${where}`
        : `Feature flag ${flagKey} updated ${where}`;
  }
}

function percent(value) {
  return value === null || value === undefined ? "unset" : `${value}%`;
}
