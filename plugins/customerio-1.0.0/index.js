/**
 * Customer.io for flagsvc: the flag values your users are served become attributes of their
 * Customer.io person (`flagsvc_<flag>`), through the Track API v2 batch endpoint
 * (`POST {baseUrl}/api/v2/batch`, Basic auth with site id and Track API key), so segments and
 * campaigns can target people by what they see.
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULT_BASE_URL = "https://track.customer.io";
const DEFAULT_IDENTIFIER = "id";
const DEFAULT_PREFIX = "flagsvc_";
/** The Track API's limit on a batch request's body (500 KB); kept a little under. */
const BATCH_BYTES = 500_000;
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function settings(config) {
  const c = config ?? {};
  if (typeof c.siteId !== "string" || c.siteId === "") throw new Error("config.siteId is required: the Customer.io workspace's site id");
  if (typeof c.apiKey !== "string" || c.apiKey === "") throw new Error("config.apiKey is required: a Customer.io Track API key");
  const baseUrl = c.baseUrl ?? DEFAULT_BASE_URL;
  if (typeof baseUrl !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(baseUrl)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  const identifier = c.identifier ?? DEFAULT_IDENTIFIER;
  if (identifier !== "id" && identifier !== "email") throw new Error(`config.identifier must be "id" or "email", got ${JSON.stringify(identifier)}`);
  const attributePrefix = c.attributePrefix ?? DEFAULT_PREFIX;
  if (typeof attributePrefix !== "string") throw new Error("config.attributePrefix must be a string");
  if (c.environments !== undefined && (!Array.isArray(c.environments) || !c.environments.every((e) => typeof e === "string"))) throw new Error("config.environments must be an array of environment keys");
  return { authorization: `Basic ${base64(`${c.siteId}:${c.apiKey}`)}`, baseUrl: baseUrl.replace(/\/+$/, ""), identifier, attributePrefix, environments: c.environments };
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `identifying people by ${s.identifier} with ${s.attributePrefix}<flag> attributes at ${s.baseUrl}/api/v2/batch`);
}

/**
 * One identify per person holding the latest value of each flag they were served, in as few
 * requests as the 500 KB limit allows. Skipped: records without a user, and evaluations of
 * flags that do not exist.
 */
export async function onEvaluations(batch, ctx) {
  const s = settings(ctx.config);
  const people = new Map();
  for (const r of batch) {
    if (r.userId === null || r.userId === undefined || r.reason === "FLAG_NOT_FOUND") continue;
    if (s.environments && !s.environments.includes(r.environment)) continue;
    const id = String(r.userId);
    const flags = people.get(id) ?? new Map();
    people.set(id, flags);
    const previous = flags.get(r.flagKey);
    if (!previous || previous.evaluatedAt <= r.evaluatedAt) flags.set(r.flagKey, r);
  }
  let chunk = [];
  let bytes = 0;
  for (const [id, flags] of people) {
    const entry = JSON.stringify({
      type: "person",
      identifiers: { [s.identifier]: id },
      action: "identify",
      attributes: Object.fromEntries([...flags.values()].map((r) => [s.attributePrefix + r.flagKey, r.variant ?? r.enabled])),
    });
    const size = utf8Length(entry) + 1;
    if (chunk.length > 0 && bytes + size > BATCH_BYTES) {
      await send(ctx, s, chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(entry);
    bytes += size;
  }
  if (chunk.length > 0) await send(ctx, s, chunk);
}

async function send(ctx, s, entries) {
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/api/v2/batch`,
    headers: { authorization: s.authorization, "content-type": "application/json" },
    body: `{"batch":[${entries.join(",")}]}`,
  });
  if (response.status < 200 || response.status > 299) {
    const message = `Customer.io /api/v2/batch answered ${response.status}: ${response.body.slice(0, 300)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
}

/** The string's UTF-8 bytes (the sandbox has no TextEncoder). */
function utf8(text) {
  const encoded = encodeURIComponent(text);
  const bytes = [];
  for (let i = 0; i < encoded.length; i++) {
    if (encoded[i] === "%") {
      bytes.push(parseInt(encoded.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(encoded.charCodeAt(i));
  }
  return bytes;
}

function utf8Length(text) {
  return encodeURIComponent(text).replace(/%[0-9A-F]{2}/g, "x").length;
}

/** Base64 of the string's UTF-8 bytes (the sandbox has no btoa). */
function base64(text) {
  const bytes = utf8(text);
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += BASE64[(n >> 18) & 63] + BASE64[(n >> 12) & 63] + (i + 1 < bytes.length ? BASE64[(n >> 6) & 63] : "=") + (i + 2 < bytes.length ? BASE64[n & 63] : "=");
  }
  return out;
}
