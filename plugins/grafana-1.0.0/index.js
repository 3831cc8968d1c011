/**
 * Grafana for flagsvc: each flag change becomes an annotation (`POST {baseUrl}/api/annotations`
 * with a service account token), so dashboards show when a flag was turned on or off next to
 * the metrics it moved. Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_TAGS = ["flagsvc"];

function settings(config) {
  const c = config ?? {};
  if (typeof c.baseUrl !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(c.baseUrl)) throw new Error(`config.baseUrl must be the http(s) URL of your Grafana, got ${JSON.stringify(c.baseUrl)}`);
  if (typeof c.token !== "string" || c.token === "") throw new Error("config.token is required: a Grafana service account token (glsa_...)");
  if (c.dashboardUID !== undefined && (typeof c.dashboardUID !== "string" || c.dashboardUID === "")) throw new Error("config.dashboardUID must be a non-empty string");
  if (c.panelId !== undefined && (!Number.isInteger(c.panelId) || c.dashboardUID === undefined)) throw new Error("config.panelId must be an integer, and needs config.dashboardUID");
  const tags = c.tags ?? DEFAULT_TAGS;
  if (!Array.isArray(tags) || !tags.every((t) => typeof t === "string" && t !== "")) throw new Error("config.tags must be an array of non-empty strings");
  if (c.environments !== undefined && (!Array.isArray(c.environments) || !c.environments.every((e) => typeof e === "string"))) throw new Error("config.environments must be an array of environment keys");
  return { baseUrl: c.baseUrl.replace(/\/+$/, ""), token: c.token, dashboardUID: c.dashboardUID, panelId: c.panelId, tags, environments: c.environments };
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `annotating flag changes in ${s.baseUrl}${s.dashboardUID ? ` (dashboard ${s.dashboardUID})` : " (organization annotations)"}`);
}

export async function onEvent(event, ctx) {
  const s = settings(ctx.config);
  if (s.environments && !s.environments.includes(event.environment)) return;
  const body = {
    time: Date.parse(event.timestamp),
    tags: [...s.tags, event.event, `flag:${event.data.flagKey}`, `environment:${event.environment}`, `project:${event.projectSlug}`],
    text: describe(event),
  };
  if (s.dashboardUID !== undefined) body.dashboardUID = s.dashboardUID;
  if (s.panelId !== undefined) body.panelId = s.panelId;
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/api/annotations`,
    headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
  });
  if (response.status < 200 || response.status > 299) {
    const message = `Grafana /api/annotations answered ${response.status}: ${response.body.slice(0, 200)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
}

/** One line for a person reading the graph: what happened to which flag, where. */
function describe(event) {
  const { flagKey, previousState, currentState } = event.data;
  const where = `in ${event.environment} (project ${event.projectSlug})`;
  switch (event.event) {
    case "flag.enabled":
      return `Flag ${flagKey} turned on ${where}`;
    case "flag.disabled":
      return `Flag ${flagKey} turned off ${where}`;
    case "flag.created":
      return `Flag ${flagKey} created ${where}, ${currentState.enabled ? "on" : "off"}`;
    case "flag.deleted":
      return `Flag ${flagKey} deleted ${where}`;
    default:
      return "rolloutPercentage" in currentState
        ? `Flag ${flagKey} rollout ${percent(previousState.rolloutPercentage)} -> ${percent(currentState.rolloutPercentage)} ${where}`
        : `Flag ${flagKey} updated ${where}`;
  }
}

function percent(value) {
  return value === null || value === undefined ? "unset" : `${value}%`;
}
