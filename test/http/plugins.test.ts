/**
 * The Plugins API (decisions §11) through HTTP, with real plugins running in the host's workers:
 * a package dropped into DATA_DIR/marketplace/ that reports every hook call to a local receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SECRET } from "../../src/changes/entry";
import { bearer, entriesAfter, json, lastPosition, seedAdminKey, seedApiKey, testApp, until, userToken, type TestApp, rawRows, countRows } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

const NAME = "@test/recorder";

/** Every hook posts `{ hook, ... }` to config.url; `failActivate` makes activate throw. */
const SOURCE = (version: string) => `
const send = (ctx, body) => ctx.http({ method: "POST", url: ctx.config.url, headers: { "content-type": "application/json", authorization: "Bearer " + ctx.config.token }, body: JSON.stringify({ version: ${JSON.stringify(version)}, ...body }) });
export async function activate(ctx) {
  if (ctx.config.failActivate) throw new Error("cannot reach the vendor with token " + ctx.config.token);
  ctx.log("info", "activated with token " + ctx.config.token);
  await send(ctx, { hook: "activate" });
}
export async function onEvent(event, ctx) { await send(ctx, { hook: "onEvent", event }); }
export async function onEvaluations(batch, ctx) { await send(ctx, { hook: "onEvaluations", batch }); }
export async function deactivate(ctx) { await send(ctx, { hook: "deactivate" }); }
`;

/** `tokenSecret: false`: a version whose schema no longer marks `token` secret. */
function dropPackage(dataDir: string, version: string, extraProperties: Record<string, unknown> = {}, { packageName = NAME, tokenSecret = true } = {}) {
  const folder = join(dataDir, "marketplace", `${packageName.replace(/\W+/g, "-")}-${version}`);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "index.js"), SOURCE(version));
  writeFileSync(join(folder, "README.md"), "# Recorder\nReports every hook call.\n");
  writeFileSync(
    join(folder, "plugin.json"),
    JSON.stringify({
      packageName,
      name: "Recorder",
      description: "Reports every hook call to a URL",
      category: "monitoring",
      version,
      author: "tests",
      entry: "index.js",
      hooks: ["activate", "onEvent", "onEvaluations", "deactivate"],
      configSchema: {
        type: "object",
        properties: {
          url: { type: "string" },
          token: { type: "string", ...(tokenSecret ? { secret: true } : {}) },
          failActivate: { type: "boolean" },
          ...extraProperties,
        },
        required: ["url", "token"],
        additionalProperties: false,
      },
      publishedAt: `2026-11-0${version[0]}T00:00:00.000Z`,
    }),
  );
}

let h: TestApp;
let admin: Record<string, string>;
let receiver: Receiver;
const hooks = (name: string) => receiver.received.filter((r) => r.json.hook === name);

const base = (path = "") => `/v1/projects/default/plugins${path}`;
const install = (body: unknown) => h.request("POST", base(), { body, headers: admin });
const status = async (id: string) => json(await h.request("GET", base(`/${id}/status`), { headers: admin }), 200);
const settled = (id: string) => until(`plugin ${id} to settle`, async () => ((s) => (s.status === "installing" ? undefined : s))(await status(id)));

beforeAll(async () => {
  receiver = startReceiver();
  h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
  admin = bearer(await seedAdminKey(h.ctx));
  dropPackage(h.dir, "1.0.0");
  dropPackage(h.dir, "2.0.0", { label: { type: "string" } });
  await until("the dropped packages", () => h.ctx.catalog.get(NAME, "2.0.0"));
});

afterAll(async () => {
  await h.ctx.plugins.stopAll();
  h.close();
  receiver.stop();
});

describe("install", () => {
  test("201 installing, then active; secrets masked everywhere; activate ran in the sandbox", async () => {
    const before = await lastPosition(h.ctx);
    const res = await install({ packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "tok-secret-1" } });
    const body = await json(res, 201);
    expect(body).toMatchObject({ packageName: NAME, version: "1.0.0", status: "installing", errorMessage: null, config: { url: receiver.url, token: SECRET } });
    expect(body.id).toMatch(/^plugin_[A-Za-z0-9_-]{22,}$/);
    const s = await settled(body.id);
    expect(s).toMatchObject({ id: body.id, status: "active", errorMessage: null, stats: { eventsHandled: 0, errors: 0, lastEventAt: null, evaluationsDropped: 0 } });
    await receiver.waitFor(1);
    expect(hooks("activate")[0]!.headers.get("authorization")).toBe("Bearer tok-secret-1");
    // The log line holds the token: masked before it leaves the worker.
    expect(s.logs.map((l: { message: string }) => l.message)).toContain(`activated with token ${SECRET}`);
    const list = await json(await h.request("GET", base(), { headers: admin }), 200);
    expect(list.plugins.find((p: { id: string }) => p.id === body.id).config.token).toBe(SECRET);
    const [entry] = await entriesAfter(h.ctx, before);
    expect(entry).toMatchObject({ resource_type: "plugin", resource_id: body.id, resource_key: NAME, action: "created" });
    expect(JSON.stringify(entry)).not.toContain("tok-secret-1");
    expect(await json(await h.request("GET", base(`/${body.id}`), { headers: admin }), 200)).toMatchObject({ status: "active" });
    const downloads = (await rawRows(h.ctx, "SELECT installs FROM plugin_downloads WHERE package_name = ?", [NAME]))[0] as { installs: number };
    expect(downloads.installs).toBeGreaterThanOrEqual(1);
    expect((await h.request("DELETE", base(`/${body.id}`), { headers: admin })).status).toBe(204);
  });

  test("`latest` (and an omitted version) resolves to the highest version, stored as such", async () => {
    for (const version of ["latest", undefined]) {
      const body = await json(await install({ packageName: NAME, ...(version ? { version } : {}), config: { url: receiver.url, token: "t" } }), 201);
      expect(body.version).toBe("2.0.0");
      await settled(body.id);
      expect((await h.request("DELETE", base(`/${body.id}`), { headers: admin })).status).toBe(204);
    }
  });

  test("unknown package or version 404; config against configSchema 400 with details per property; unknown fields 400", async () => {
    const unknownPackage = await json(await install({ packageName: "@test/nope", config: {} }), 404);
    expect(unknownPackage).toMatchObject({ error: "NOT_FOUND" });
    const unknownVersion = await json(await install({ packageName: NAME, version: "9.9.9", config: {} }), 404);
    expect(unknownVersion.message).toContain("9.9.9");
    const bad = await json(await install({ packageName: NAME, version: "1.0.0", config: { url: 5, extra: true } }), 400);
    expect(bad.error).toBe("VALIDATION_ERROR");
    const paths = bad.details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(["body.config.url", "body.config.token", "body.config.extra"]));
    await json(await install({ packageName: NAME, config: {}, color: "red" }), 400);
    const none = await json(await h.request("GET", base(), { headers: admin }), 200);
    expect(none.plugins.every((p: { config: { url?: unknown } }) => p.config.url !== 5)).toBe(true);
  });

  test("the install example of docs/plugins.md is taken as it stands; a property the package does not take is told the known ones", async () => {
    const docs = readFileSync(join(import.meta.dir, "../../docs/plugins.md"), "utf8");
    const section = docs.slice(docs.indexOf("## Installing one"), docs.indexOf("## Writing one"));
    const example = /-d '(\{"packageName":[^']*\})'/.exec(section);
    expect(example).not.toBeNull();
    const body = JSON.parse(example![1]!);
    expect(body.packageName).toBe("@flagsvc/posthog");
    const installed = await json(await install(body), 201);
    await settled(installed.id);
    expect((await h.request("DELETE", base(`/${installed.id}`), { headers: admin })).status).toBe(204);
    // PostHog's docs call it the host: the 400 names the property the package takes instead.
    const host = await json(await install({ packageName: "@flagsvc/posthog", config: { apiKey: "phc_x", host: "https://eu.i.posthog.com" } }), 400);
    expect(host).toEqual({
      error: "VALIDATION_ERROR",
      message: expect.any(String),
      details: [{ path: "body.config.host", message: "Unknown field; known: apiKey, baseUrl, personProperties, changesDistinctId" }],
    });
    const patched = await json(await install({ packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "t", tokn: "t" } }), 400);
    expect(patched.details).toEqual([{ path: "body.config.tokn", message: "Unknown field; known: url, token, failActivate" }]);
  });

  test("a failing activate ends in error with its message (secrets masked); enabled: true tries again", async () => {
    const body = await json(await install({ packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "tok-fail", failActivate: true } }), 201);
    const s = await settled(body.id);
    expect(s.status).toBe("error");
    expect(s.errorMessage).toContain("cannot reach the vendor");
    expect(s.errorMessage).not.toContain("tok-fail");
    const record = await json(await h.request("GET", base(`/${body.id}`), { headers: admin }), 200);
    expect(record).toMatchObject({ status: "error", errorMessage: s.errorMessage });
    const fixed = await json(await h.request("PATCH", base(`/${body.id}`), { body: { config: { failActivate: false } }, headers: admin }), 200);
    expect(fixed.status).toBe("installing");
    expect((await settled(body.id)).status).toBe("active");
    await h.request("DELETE", base(`/${body.id}`), { headers: admin });
  });
});

describe("lifecycle", () => {
  let id: string;
  beforeAll(async () => {
    id = (await json(await install({ packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "tok-life" } }), 201)).id;
    await settled(id);
  });

  test("disable calls deactivate and frees the instance; enable activates again", async () => {
    const n = hooks("deactivate").length;
    const off = await json(await h.request("PATCH", base(`/${id}`), { body: { enabled: false }, headers: admin }), 200);
    expect(off.status).toBe("disabled");
    await until("deactivate", () => hooks("deactivate").length > n);
    expect((await status(id)).status).toBe("disabled");
    const again = await json(await h.request("PATCH", base(`/${id}`), { body: { enabled: false }, headers: admin }), 200);
    expect(again.updatedAt).toBe(off.updatedAt);
    const on = await json(await h.request("PATCH", base(`/${id}`), { body: { enabled: true }, headers: admin }), 200);
    expect(on.status).toBe("installing");
    expect((await settled(id)).status).toBe("active");
  });

  test('a PATCH with "********" keeps the secret; a new secret restarts it and is recorded as changed', async () => {
    const before = await lastPosition(h.ctx);
    const kept = await json(await h.request("PATCH", base(`/${id}`), { body: { config: { token: SECRET } }, headers: admin }), 200);
    expect(kept.status).toBe("active");
    expect(await entriesAfter(h.ctx, before)).toHaveLength(0);
    const n = hooks("activate").length;
    await json(await h.request("PATCH", base(`/${id}`), { body: { config: { token: "tok-new" } }, headers: admin }), 200);
    await until("the restart", () => hooks("activate").length > n);
    expect(hooks("activate").at(-1)!.headers.get("authorization")).toBe("Bearer tok-new");
    const [entry] = await entriesAfter(h.ctx, before);
    expect(JSON.parse(entry!.changes)).toMatchObject({ config: { before: { token: SECRET }, after: { token: SECRET }, changed: true } });
    expect(JSON.stringify(entry)).not.toContain("tok-new");
  });

  test("PATCH version upgrades and downgrades; an unknown version 404 changes nothing", async () => {
    const up = await json(await h.request("PATCH", base(`/${id}`), { body: { version: "2.0.0", config: { label: "x" } }, headers: admin }), 200);
    expect(up).toMatchObject({ version: "2.0.0", status: "installing" });
    await settled(id);
    await until("2.0.0 activated", () => hooks("activate").some((r) => r.json.version === "2.0.0"));
    // 1.0.0's schema has no `label`: the downgrade must drop it.
    const refused = await json(await h.request("PATCH", base(`/${id}`), { body: { version: "1.0.0" }, headers: admin }), 400);
    expect(refused.details[0].path).toBe("body.config.label");
    const down = await json(await h.request("PATCH", base(`/${id}`), { body: { version: "1.0.0", config: { label: null } }, headers: admin }), 200);
    expect(down.version).toBe("1.0.0");
    await json(await h.request("PATCH", base(`/${id}`), { body: { version: "3.0.0" }, headers: admin }), 404);
    expect((await settled(id)).status).toBe("active");
  });

  test("onEvent gets the webhook payload of each change of its project", async () => {
    const n = hooks("onEvent").length;
    await json(await h.request("POST", "/v1/projects/default/flags", { body: { key: "plugin-seen", name: "Seen" }, headers: admin }), 201);
    const events = await until("onEvent", () => (hooks("onEvent").length >= n + 3 ? hooks("onEvent").slice(n) : undefined));
    expect(events.map((e) => e.json.event.event)).toEqual(["flag.created", "flag.created", "flag.created"]);
    expect(events[0]!.json.event).toMatchObject({ projectSlug: "default", data: { flagKey: "plugin-seen", previousState: { enabled: false }, currentState: { enabled: false } } });
    expect(events[0]!.json.event.id).toMatch(/^evt_/);
    const s = await until("stats", async () => ((s) => (s.stats.eventsHandled >= 3 ? s : undefined))(await status(id)));
    expect(s.stats.lastEventAt).not.toBeNull();
  });

  test("onEvaluations gets evaluation records in batches, off the request path", async () => {
    const key = await seedApiKey(h.ctx, "eval");
    for (let i = 0; i < 3; i++) {
      const res = await h.request("POST", "/v1/evaluate", { body: { flagKey: "plugin-seen", context: { userId: `u${i}` } }, headers: bearer(key.secret) });
      expect(res.status).toBe(200);
    }
    const batches = await until("onEvaluations", () => (hooks("onEvaluations").length > 0 ? hooks("onEvaluations") : undefined), 5_000);
    const records = batches.flatMap((b) => b.json.batch);
    expect(records.length).toBe(3);
    expect(records[0]).toEqual({ flagKey: "plugin-seen", environment: "development", enabled: false, variant: null, reason: expect.any(String), ruleId: null, userId: "u0", evaluatedAt: expect.any(String) });
  });

  test("uninstall: 204, deactivate called, gone; every write in the change log", async () => {
    const n = hooks("deactivate").length;
    expect((await h.request("DELETE", base(`/${id}`), { headers: admin })).status).toBe(204);
    await until("deactivate", () => hooks("deactivate").length > n);
    await json(await h.request("GET", base(`/${id}`), { headers: admin }), 404);
    await json(await h.request("GET", base(`/${id}/status`), { headers: admin }), 404);
    const actions = ((await rawRows(h.ctx, "SELECT action FROM change_log WHERE resource_id = ? ORDER BY position", [id])) as { action: string }[]).map((r) => r.action);
    expect(actions[0]).toBe("created");
    expect(actions.at(-1)).toBe("deleted");
    expect(actions.filter((a) => a === "updated").length).toBeGreaterThanOrEqual(4);
  });
});

describe("a secret stays secret", () => {
  const DEMOTED = "@test/demoted";
  const TOKEN = "tok-demoted-7f3a";

  test("a version whose schema no longer marks the key secret shows it nowhere: PATCH answer, GET, list, audit entry (a viewer too)", async () => {
    dropPackage(h.dir, "1.0.0", {}, { packageName: DEMOTED });
    dropPackage(h.dir, "1.1.0", {}, { packageName: DEMOTED, tokenSecret: false });
    await until("the demoted packages", () => h.ctx.catalog.get(DEMOTED, "1.1.0"));
    const id = (await json(await install({ packageName: DEMOTED, version: "1.0.0", config: { url: receiver.url, token: TOKEN } }), 201)).id;
    await settled(id);
    const viewer = await userToken(h.ctx, "viewer");
    const shown: unknown[] = [];
    const up = await json(await h.request("PATCH", base(`/${id}`), { body: { version: "1.1.0" }, headers: admin }), 200);
    expect(up).toMatchObject({ version: "1.1.0", config: { url: receiver.url, token: SECRET } });
    shown.push(up);
    // The plugin itself still gets the real value.
    await until("1.1.0 activated", () => hooks("activate").some((r) => r.json.version === "1.1.0" && r.headers.get("authorization") === `Bearer ${TOKEN}`));
    // A client sending back what it read keeps the stored value.
    const label = await json(await h.request("PATCH", base(`/${id}`), { body: { config: { url: receiver.url, token: SECRET } }, headers: admin }), 200);
    shown.push(label);
    expect(JSON.stringify((await rawRows(h.ctx, "SELECT config FROM plugins WHERE id = ?", [id]))[0]!.config)).toContain(TOKEN); // text on SQLite, jsonb on PostgreSQL
    shown.push(await json(await h.request("GET", base(`/${id}`), { headers: admin }), 200));
    shown.push(await json(await h.request("GET", base(), { headers: admin }), 200));
    shown.push(await status(id));
    for (const headers of [admin, viewer]) {
      const log = await json(await h.request("GET", `/v1/projects/default/audit-log?resourceType=plugin&resourceKey=${encodeURIComponent(DEMOTED)}`, { headers }), 200);
      expect(log.entries.length).toBeGreaterThanOrEqual(2);
      expect(log.entries.some((e: { changes: { version?: { after: string } } }) => e.changes.version?.after === "1.1.0")).toBe(true);
      shown.push(log);
    }
    for (const answer of shown) expect(JSON.stringify(answer)).not.toContain(TOKEN);
    expect(up.config.token).toBe(SECRET);
    // Back down and up again: still masked; a new value under the demoted version stays masked too.
    await json(await h.request("PATCH", base(`/${id}`), { body: { version: "1.0.0" }, headers: admin }), 200);
    const again = await json(await h.request("PATCH", base(`/${id}`), { body: { version: "1.1.0", config: { token: "tok-fresh-9c1d" } }, headers: admin }), 200);
    expect(again.config.token).toBe(SECRET);
    const all = await json(await h.request("GET", `/v1/projects/default/audit-log?resourceType=plugin&resourceKey=${encodeURIComponent(DEMOTED)}`, { headers: viewer }), 200);
    expect(JSON.stringify(all)).not.toContain(TOKEN);
    expect(JSON.stringify(all)).not.toContain("tok-fresh-9c1d");
    expect((await h.request("DELETE", base(`/${id}`), { headers: admin })).status).toBe(204);
  });
});

describe("a vendor that echoes the request", () => {
  // ctx.http sends the token as Basic (token as user), Bearer, in the query and in a JSON body;
  // the receiver answers 400 with all of it; the plugin logs the answer and throws it.
  const ECHOER = "@test/echoer";
  const SOURCE_ECHO = `
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function base64(s) {
  let out = "";
  for (let i = 0; i < s.length; i += 3) {
    const n = (s.charCodeAt(i) << 16) | ((s.charCodeAt(i + 1) || 0) << 8) | (s.charCodeAt(i + 2) || 0);
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < s.length ? B64[n & 63] : "=");
  }
  return out;
}
async function call(ctx) {
  const t = ctx.config.token;
  const res = await ctx.http({ method: "POST", url: ctx.config.url + "?key=" + encodeURIComponent(t), headers: { authorization: "Basic " + base64(t + ":"), "x-api-key": "Bearer " + t, "content-type": "application/json" }, body: JSON.stringify({ token: t }) });
  ctx.log("warn", "vendor answered " + res.status + ": " + res.body);
  throw new Error("vendor answered " + res.status + ": " + res.body);
}
export async function activate(ctx) { if (ctx.config.failActivate) await call(ctx); }
export async function onEvent(event, ctx) { await call(ctx); }
`;
  const TOKEN = 'ecT71 k"n/+&=z';
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  const forms = [TOKEN, encodeURIComponent(TOKEN), new URLSearchParams({ v: TOKEN }).toString().slice(2), JSON.stringify(TOKEN).slice(1, -1), b64(`${TOKEN}:`), b64(`${TOKEN}:`).slice(0, 12)];
  const pieces = [...forms.slice(0, 4).flatMap((f) => Array.from({ length: f.length - 5 }, (_, i) => f.slice(i, i + 6))), ...forms];
  let echo: Receiver;

  beforeAll(async () => {
    echo = startReceiver({
      answer: (request, n) => new Response(`echo authorization=${request.headers.get("authorization")} x-api-key=${request.headers.get("x-api-key")} url=${request.url} body=${echo.received[n - 1]!.text}`, { status: 400 }),
    });
    const folder = join(h.dir, "marketplace", "echoer");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "index.js"), SOURCE_ECHO);
    const configSchema = { type: "object", properties: { url: { type: "string" }, token: { type: "string", secret: true }, failActivate: { type: "boolean" } }, required: ["url", "token"], additionalProperties: false };
    writeFileSync(join(folder, "plugin.json"), JSON.stringify({ packageName: ECHOER, name: "Echoer", description: "d", category: "crm", version: "1.0.0", author: "t", entry: "index.js", hooks: ["activate", "onEvent"], configSchema, publishedAt: "2026-11-01T00:00:00.000Z" }));
    await until("the echoer", () => h.ctx.catalog.get(ECHOER, "1.0.0"));
  });
  afterAll(() => echo.stop());

  const expectNoToken = (texts: string[]) => {
    for (const text of texts) for (const piece of pieces) expect(text, piece).not.toContain(piece);
  };

  test("activate throws the answer: errorMessage and logs hold no form of the secret", async () => {
    const id = (await json(await install({ packageName: ECHOER, config: { url: echo.url, token: TOKEN, failActivate: true } }), 201)).id;
    const s = await settled(id);
    expect(s.status).toBe("error");
    expect(s.errorMessage).toContain("vendor answered 400: echo authorization=Basic ********");
    const logs = s.logs.map((l: { message: string }) => l.message);
    expect(logs.some((m: string) => m.startsWith("vendor answered 400: echo"))).toBe(true);
    expectNoToken([s.errorMessage, ...logs, JSON.stringify(s), JSON.stringify(await json(await h.request("GET", base(`/${id}`), { headers: admin }), 200))]);
    expect((await h.request("DELETE", base(`/${id}`), { headers: admin })).status).toBe(204);
  });

  test("onEvent throws the answer three times: errorMessage and logs hold no form of the secret", async () => {
    const id = (await json(await install({ packageName: ECHOER, config: { url: echo.url, token: TOKEN } }), 201)).id;
    expect((await settled(id)).status).toBe("active");
    await json(await h.request("POST", "/v1/projects/default/flags", { body: { key: "echoed", name: "Echoed" }, headers: admin }), 201);
    const s = await until("3 failures", async () => ((st) => (st.status === "error" ? st : undefined))(await status(id)));
    expect(s.errorMessage).toContain("3 hook calls failed in a row; last: onEvent: Error: vendor answered 400: echo");
    const logs = s.logs.map((l: { message: string }) => l.message);
    expect(logs.filter((m: string) => m.startsWith("onEvent failed: Error: vendor answered 400")).length).toBe(3);
    expectNoToken([s.errorMessage, ...logs, JSON.stringify(s)]);
    expect((await h.request("DELETE", base(`/${id}`), { headers: admin })).status).toBe(204);
  });
});

describe("a deleted project", () => {
  test("its plugins are stopped (deactivate called) and gone", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "doomed", name: "Doomed" }, headers: admin }), 201);
    const body = { packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "t" } };
    const id = (await json(await h.request("POST", "/v1/projects/doomed/plugins", { body, headers: admin }), 201)).id;
    await until("active", async () => (await json(await h.request("GET", `/v1/projects/doomed/plugins/${id}/status`, { headers: admin }), 200)).status === "active");
    const n = hooks("deactivate").length;
    expect((await h.request("DELETE", "/v1/projects/doomed", { headers: admin })).status).toBe(204);
    await until("deactivate", () => hooks("deactivate").length > n);
    expect(h.ctx.plugins.live(id)).toBeUndefined();
    expect(await countRows(h.ctx, `plugins WHERE id = '${id}'`)).toBe(0);
  });
});

describe("SVC_PLUGIN_MEMORY_MB", () => {
  test("is the sandbox's cap: 40 MB of arrays are fine under the default 64, out of memory under 24", async () => {
    const source = "export function activate() { const a = []; for (let i = 0; i < 50; i++) a.push(new Array(50000).fill(i)); }";
    const drop = (dir: string) => {
      const folder = join(dir, "marketplace", "hungry");
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, "index.js"), source);
      const configSchema = { type: "object", properties: {}, additionalProperties: false };
      writeFileSync(join(folder, "plugin.json"), JSON.stringify({ packageName: "@test/hungry", name: "Hungry", description: "d", category: "crm", version: "1.0.0", author: "t", entry: "index.js", hooks: ["activate"], configSchema, publishedAt: "2026-11-01T00:00:00.000Z" }));
    };
    const small = await testApp({ SVC_PLUGIN_MEMORY_MB: "24" });
    try {
      const smallAdmin = bearer(await seedAdminKey(small.ctx));
      for (const [app, headers, expected] of [[h, admin, "active"], [small, smallAdmin, "error"]] as const) {
        drop(app.dir);
        await until("the package", () => app.ctx.catalog.get("@test/hungry", "1.0.0"));
        const id = (await json(await app.request("POST", base(), { body: { packageName: "@test/hungry" }, headers }), 201)).id;
        const s = await until("settled", async () => ((st) => (st.status === "installing" ? undefined : st))(await json(await app.request("GET", base(`/${id}/status`), { headers }), 200)));
        expect(s.status).toBe(expected);
        if (expected === "error") expect(s.errorMessage).toMatch(/out of memory/);
        await app.request("DELETE", base(`/${id}`), { headers });
      }
    } finally {
      await small.ctx.plugins.stopAll();
      small.close();
    }
  });
});

describe("access", () => {
  test("admin key and admin JWT only; none 401; unknown project or another project's plugin 404", async () => {
    const id = (await json(await install({ packageName: NAME, version: "1.0.0", config: { url: receiver.url, token: "t" } }), 201)).id;
    expect((await h.request("GET", base(), { headers: await userToken(h.ctx, "admin") })).status).toBe(200);
    for (const headers of [await userToken(h.ctx, "editor"), await userToken(h.ctx, "viewer"), bearer((await seedApiKey(h.ctx, "full")).secret)]) {
      expect((await json(await h.request("GET", base(), { headers }), 403)).error).toBe("FORBIDDEN");
    }
    expect((await h.request("GET", base())).status).toBe(401);
    await json(await h.request("GET", "/v1/projects/nope/plugins", { headers: admin }), 404);
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    await json(await h.request("GET", `/v1/projects/other/plugins/${id}`, { headers: admin }), 404);
    await json(await h.request("PATCH", `/v1/projects/other/plugins/${id}`, { body: { enabled: false }, headers: admin }), 404);
    expect((await settled(id)).status).toBe("active");
    await h.request("DELETE", base(`/${id}`), { headers: admin });
  });
});

describe("a package that left the catalog", () => {
  test("at start its plugin goes to error, every config value masked; it can still be disabled and removed", async () => {
    const folder = join(h.dir, "marketplace", "gone");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "index.js"), "export function activate() {}");
    const configSchema = { type: "object", properties: { region: { type: "string" } }, additionalProperties: false };
    const manifest = { packageName: "@test/gone", name: "Gone", description: "d", category: "crm", version: "1.0.0", author: "t", entry: "index.js", hooks: ["activate"], configSchema, publishedAt: "2026-11-01T00:00:00.000Z" };
    writeFileSync(join(folder, "plugin.json"), JSON.stringify(manifest));
    await until("the package", () => h.ctx.catalog.get("@test/gone", "1.0.0"));
    const id = (await json(await install({ packageName: "@test/gone", config: { region: "eu" } }), 201)).id;
    expect((await settled(id)).status).toBe("active");
    await h.ctx.plugins.stop(id);
    rmSync(folder, { recursive: true, force: true });
    await until("the package gone", () => h.ctx.catalog.get("@test/gone", "1.0.0") === undefined);
    await h.services.plugins.activateAll();
    const s = await status(id);
    expect(s).toMatchObject({ status: "error", errorMessage: "package @test/gone 1.0.0 is no longer in the catalog" });
    expect((await json(await h.request("GET", base(`/${id}`), { headers: admin }), 200)).config).toEqual({ region: SECRET });
    expect((await json(await h.request("PATCH", base(`/${id}`), { body: { enabled: false }, headers: admin }), 200)).status).toBe("disabled");
    await json(await h.request("PATCH", base(`/${id}`), { body: { enabled: true }, headers: admin }), 404);
    expect((await h.request("DELETE", base(`/${id}`), { headers: admin })).status).toBe(204);
  });
});
