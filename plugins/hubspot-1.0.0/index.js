/**
 * HubSpot for flagsvc: the flag values your users are served become contact properties
 * (`flagsvc_<flag>`), through the CRM v3 batch upsert of contacts
 * (`POST {baseUrl}/crm/v3/objects/contacts/batch/upsert`, a private app token), so lists,
 * workflows and sales views can segment contacts by what they see.
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_BASE_URL = "https://api.hubapi.com";
const DEFAULT_ID_PROPERTY = "email";
const DEFAULT_PREFIX = "flagsvc_";
/** HubSpot's batch endpoints take at most 100 inputs per request. */
const BATCH_LIMIT = 100;
/** HubSpot property internal names: lowercase letters, digits, underscores. */
const PROPERTY_NAME = /^[a-z][a-z0-9_]*$/;

function settings(config) {
  const c = config ?? {};
  if (typeof c.accessToken !== "string" || c.accessToken === "") throw new Error("config.accessToken is required: the access token of a HubSpot private app with crm.objects.contacts.write");
  const baseUrl = c.baseUrl ?? DEFAULT_BASE_URL;
  if (typeof baseUrl !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(baseUrl)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  const idProperty = c.idProperty ?? DEFAULT_ID_PROPERTY;
  if (typeof idProperty !== "string" || !PROPERTY_NAME.test(idProperty)) throw new Error(`config.idProperty must be the internal name of a unique contact property, got ${JSON.stringify(idProperty)}`);
  const propertyPrefix = c.propertyPrefix ?? DEFAULT_PREFIX;
  if (typeof propertyPrefix !== "string" || !PROPERTY_NAME.test(propertyPrefix)) throw new Error(`config.propertyPrefix must start a HubSpot property name (lowercase letters, digits, underscores), got ${JSON.stringify(propertyPrefix)}`);
  if (c.environments !== undefined && (!Array.isArray(c.environments) || !c.environments.every((e) => typeof e === "string"))) throw new Error("config.environments must be an array of environment keys");
  return { accessToken: c.accessToken, baseUrl: baseUrl.replace(/\/+$/, ""), idProperty, propertyPrefix, environments: c.environments };
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `upserting contacts by ${s.idProperty} with ${s.propertyPrefix}<flag> properties at ${s.baseUrl}`);
}

/**
 * One input per contact (a batch upsert refuses the same id twice) holding the latest value of
 * each flag it was served; split into requests of 100. Skipped: records without a user, and
 * evaluations of flags that do not exist.
 */
export async function onEvaluations(batch, ctx) {
  const s = settings(ctx.config);
  const contacts = new Map();
  for (const r of batch) {
    if (r.userId === null || r.userId === undefined || r.reason === "FLAG_NOT_FOUND") continue;
    if (s.environments && !s.environments.includes(r.environment)) continue;
    const id = String(r.userId);
    const flags = contacts.get(id) ?? new Map();
    contacts.set(id, flags);
    const previous = flags.get(r.flagKey);
    if (!previous || previous.evaluatedAt <= r.evaluatedAt) flags.set(r.flagKey, r);
  }
  const inputs = [...contacts].map(([id, flags]) => ({
    idProperty: s.idProperty,
    id,
    properties: Object.fromEntries([...flags.values()].map((r) => [propertyName(s.propertyPrefix, r.flagKey), r.variant ?? String(r.enabled)])),
  }));
  for (let i = 0; i < inputs.length; i += BATCH_LIMIT) await upsert(ctx, s, inputs.slice(i, i + BATCH_LIMIT));
}

/** `flagsvc_` + the flag key as a property name: lowercased, anything else than [a-z0-9_] as `_`. */
function propertyName(prefix, flagKey) {
  return prefix + flagKey.toLowerCase().replace(/[^a-z0-9_]/g, "_");
}

async function upsert(ctx, s, inputs) {
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/crm/v3/objects/contacts/batch/upsert`,
    headers: { authorization: `Bearer ${s.accessToken}`, "content-type": "application/json" },
    body: JSON.stringify({ inputs }),
  });
  if (response.status < 200 || response.status > 299) {
    const message = `HubSpot contacts batch upsert answered ${response.status}: ${response.body.slice(0, 300)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
  // 207: some inputs failed (an id that is no valid email, a property not created yet), the rest
  // went through; retrying would not help, so this is a warning, not a failed hook.
  if (response.status === 207) ctx.log("warn", `HubSpot upserted part of ${inputs.length} contacts: ${response.body.slice(0, 300)}`);
}
