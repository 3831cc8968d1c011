/**
 * Plugins through the compiled binary (issue 22): the lifecycle and restart re-activation, an
 * air-gapped package dropped into DATA_DIR/marketplace/ while it runs (and a malformed one
 * skipped), the hostile-plugin suite (each bomb, loop and escape attempt ends in its documented
 * status while the others and the server go on), onEvent at least once across a kill -9, and
 * packages holding symbolic links (refused by `plugins add`, skipped by the running server).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { callServer, leakTargets, linkedPackage, until } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";
import { binaryPath, cleanup, runBinary, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"plugins".repeat(6)}`;
const RATES = { SVC_RATE_LIMITS: "admin:100000,eval:100000" };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

/** A package version folder in DATA_DIR/marketplace/. */
function drop(dataDir: string, name: string, source: string, opts: { version?: string; hooks?: string[]; schema?: Record<string, unknown> } = {}) {
  const version = opts.version ?? "1.0.0";
  const folder = join(dataDir, "marketplace", `${name}-${version}`);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "index.js"), source);
  writeFileSync(
    join(folder, "plugin.json"),
    JSON.stringify({
      packageName: `@hostile/${name}`,
      name,
      description: `test package ${name}`,
      category: "monitoring",
      version,
      author: "tests",
      entry: "index.js",
      hooks: opts.hooks ?? ["activate", "onEvent"],
      configSchema: opts.schema ?? { type: "object", properties: {}, additionalProperties: true },
      publishedAt: "2026-11-01T00:00:00.000Z",
    }),
  );
}

const api = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });
const install = async (srv: RunningBinary, name: string, config: Record<string, unknown> = {}) => {
  const res = await api(srv, "POST", "/v1/projects/default/plugins", { packageName: `@hostile/${name}`, config });
  expect(res.status).toBe(201);
  return res.body.id as string;
};
const statusOf = async (srv: RunningBinary, id: string) => (await api(srv, "GET", `/v1/projects/default/plugins/${id}/status`)).body;

const settled = (srv: RunningBinary, id: string, timeoutMs = 20_000) =>
  until(`plugin ${id} settled`, async () => ((s) => (s.status === "installing" ? undefined : s))(await statusOf(srv, id)), timeoutMs);

const GOOD = `export function activate(ctx) { ctx.log("info", "good plugin up"); }
export function onEvent(event, ctx) { ctx.log("info", "event " + event.event + " " + event.data.flagKey + " " + event.environment); }`;

const HOSTILE: Record<string, { source: string; error: RegExp }> = {
  "array-bomb": { source: "export function activate() { const a = []; for (;;) a.push(new Array(100000).fill(1)); }", error: /memory|CPU slice/i },
  "string-bomb": { source: 'export function activate() { let s = "x"; for (;;) s += s; }', error: /memory|string too long|CPU slice/i },
  "loop": { source: "export function activate() { for (;;) {} }", error: /CPU slice/ },
  "loop-after-await": { source: "export async function activate() { await null; for (;;) {} }", error: /CPU slice|did not settle/ },
  "loop-in-module": { source: "for (;;) {}\nexport function activate() {}", error: /CPU slice/ },
  "loop-in-getter": { source: "export function activate() { return { get x() { for (;;) {} } }; }", error: /CPU slice/ },
  "stack-overflow": { source: "const f = (n) => f(n + 1) + 1; export function activate() { f(0); }", error: /stack overflow|InternalError/i },
  "throws": { source: 'export function activate() { throw new Error("no thanks"); }', error: /activate failed: .*no thanks/ },
};

/** Reports, by log lines, what plugin code can reach. */
const PROBE = `export async function activate(ctx) {
  const seen = {};
  for (const name of ["fetch", "process", "Bun", "require", "setTimeout", "setInterval", "console", "WebAssembly", "XMLHttpRequest", "Deno"]) seen[name] = typeof globalThis[name];
  ctx.log("info", "globals " + JSON.stringify(seen));
  try { await import("fs"); ctx.log("error", "import fs worked"); } catch (e) { ctx.log("info", "import fs failed: " + e.message); }
  try { await import("bun"); ctx.log("error", "import bun worked"); } catch (e) { ctx.log("info", "import bun failed: " + e.message); }
  const g = globalThis.constructor.constructor("return this")();
  ctx.log("info", "escape " + JSON.stringify({ bun: typeof g.Bun, process: typeof g.process, fetch: typeof g.fetch }));
  ctx.log("info", "ctx.log.constructor " + ctx.log.constructor("return typeof Bun + typeof process")());
  for (const url of ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:1/", "http://localhost:1/"]) {
    try { await ctx.http({ method: "GET", url }); ctx.log("error", "http reached " + url); } catch (e) { ctx.log("info", "http refused " + url + ": " + e.message); }
  }
}`;

const FLOOD = `export function activate(ctx) { for (let i = 0; i < 10000; i++) ctx.log("info", "flood " + i); }`;
const NEVER = `export function activate() {}
export function onEvent() { return new Promise(() => {}); }`;

describe("the hostile suite, through the binary", () => {
  let srv: RunningBinary;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    const dataDir = join(tempDir(), "data");
    drop(dataDir, "good", GOOD);
    for (const [name, { source }] of Object.entries(HOSTILE)) drop(dataDir, name, source);
    drop(dataDir, "probe", PROBE);
    drop(dataDir, "flood", FLOOD);
    drop(dataDir, "never", NEVER);
    srv = await startBinary({ dataDir, env: { SVC_ADMIN_KEY: ADMIN_KEY, ...RATES } });
    ids.good = await install(srv, "good");
    expect((await settled(srv, ids.good!)).status).toBe("active");
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
  });

  test("each bomb, loop, overflow and throw ends in error with a clear message; the others and the server go on", async () => {
    for (const name of Object.keys(HOSTILE)) ids[name] = await install(srv, name);
    for (const [name, { error }] of Object.entries(HOSTILE)) {
      const s = await settled(srv, ids[name]!, 30_000);
      expect({ name, status: s.status }).toEqual({ name, status: "error" });
      expect(s.errorMessage).toMatch(error);
      const health = await callServer(srv.url, "GET", "/v1/health");
      expect(health.status).toBe(200);
    }
    expect((await statusOf(srv, ids.good!)).status).toBe("active");
    expect(srv.proc.exitCode).toBeNull();
  }, 120_000);

  test("no ambient capability: globals, imports, the Function constructor, ctx.http to metadata and loopback", async () => {
    const id = await install(srv, "probe");
    const s = await settled(srv, id);
    expect(s.status).toBe("active");
    const lines: string[] = s.logs.map((l: { message: string }) => l.message);
    const globals = JSON.parse(lines.find((l) => l.startsWith("globals "))!.slice(8));
    for (const v of Object.values(globals)) expect(v).toBe("undefined");
    expect(lines.some((l) => l.startsWith("import fs failed"))).toBe(true);
    expect(lines.some((l) => l.startsWith("import bun failed"))).toBe(true);
    expect(lines).toContain('escape {"bun":"undefined","process":"undefined","fetch":"undefined"}');
    expect(lines).toContain("ctx.log.constructor undefinedundefined");
    expect(lines.filter((l) => l.startsWith("http refused"))).toHaveLength(3);
    expect(s.logs.some((l: { level: string }) => l.level === "error")).toBe(false);
  }, 30_000);

  test("a log flood is rate-limited: the plugin stays active, the status keeps 100 lines and says how many were dropped", async () => {
    const id = await install(srv, "flood");
    const s = await settled(srv, id);
    expect(s.status).toBe("active");
    expect(s.logs.length).toBeLessThanOrEqual(100);
    const all = await until("the dropped count", async () => ((st) => st.logs.find((l: { message: string }) => /dropped/.test(l.message)))(await statusOf(srv, id)), 10_000);
    expect(all.level).toBe("warn");
  }, 30_000);

  test("a hook that never settles is a failure each time; three in a row: error; the good plugin got the events", async () => {
    const id = await install(srv, "never");
    expect((await settled(srv, id)).status).toBe("active");
    const flag = await api(srv, "POST", "/v1/projects/default/flags", { key: "hostile-never", name: "Never" });
    expect(flag.status).toBe(201);
    const s = await until("error", async () => ((st) => (st.status === "error" ? st : undefined))(await statusOf(srv, id)), 30_000);
    expect(s.errorMessage).toMatch(/3 hook calls failed in a row/);
    expect(s.stats.errors).toBeGreaterThanOrEqual(3);
    const good = await statusOf(srv, ids.good!);
    expect(good.status).toBe("active");
    expect(good.logs.map((l: { message: string }) => l.message)).toEqual(expect.arrayContaining(["event flag.created hostile-never development", "event flag.created hostile-never production"]));
    expect((await callServer(srv.url, "GET", "/v1/health")).status).toBe(200);
  }, 60_000);
});

describe("lifecycle through the binary", () => {
  test("install, errors, masking, disable, air-gapped drop while running, malformed skipped, restart re-activates", async () => {
    const dataDir = join(tempDir(), "data");
    const schema = { type: "object", properties: { token: { type: "string", secret: true }, level: { type: "integer", minimum: 1 } }, required: ["token"], additionalProperties: false };
    drop(dataDir, "keeper", 'export function activate(ctx) { ctx.log("info", "keeper up with " + ctx.config.token); }', { schema });
    let srv = await startBinary({ dataDir, env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_EDITION: "pro", ...RATES } });
    try {
      const bad = await api(srv, "POST", "/v1/projects/default/plugins", { packageName: "@hostile/keeper", config: { level: 0 } });
      expect(bad.status).toBe(400);
      expect(bad.body.details.map((d: { path: string }) => d.path).sort()).toEqual(["body.config.level", "body.config.token"]);
      expect((await api(srv, "POST", "/v1/projects/default/plugins", { packageName: "@hostile/none" })).status).toBe(404);
      const id = await install(srv, "keeper", { token: "sekret-value" });
      const s = await settled(srv, id);
      expect(s.status).toBe("active");
      expect(s.logs[0].message).toBe("keeper up with ********");
      const list = await api(srv, "GET", "/v1/projects/default/plugins");
      expect(list.body.plugins[0].config).toEqual({ token: "********" });
      expect(JSON.stringify((await api(srv, "GET", "/v1/audit-log")).body)).not.toContain("sekret-value");

      // Dropped while running: found by the watch, unverified, installable; a malformed one is skipped with a log line.
      drop(dataDir, "late", "export function activate() {}");
      mkdirSync(join(dataDir, "marketplace", "broken"), { recursive: true });
      writeFileSync(join(dataDir, "marketplace", "broken", "plugin.json"), '{"packageName": "@hostile/broken"');
      const late = await until("the dropped package", async () => ((r) => (r.status === 200 ? r.body : undefined))(await api(srv, "GET", `/v1/marketplace/plugins/${encodeURIComponent("@hostile/late")}`)));
      expect(late.verified).toBe(false);
      await srv.waitFor(/broken/, 5_000);
      const lateId = await install(srv, "late");
      expect((await settled(srv, lateId)).status).toBe("active");
      const off = await api(srv, "PATCH", `/v1/projects/default/plugins/${lateId}`, { enabled: false });
      expect(off.body.status).toBe("disabled");
      expect(await srv.stop()).toBe(0);

      srv = await startBinary({ dataDir, env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_EDITION: "pro", ...RATES } });
      const again = await settled(srv, id);
      expect(again.status).toBe("active");
      expect(again.logs.map((l: { message: string }) => l.message)).toContain("keeper up with ********");
      expect((await statusOf(srv, lateId)).status).toBe("disabled");
    } finally {
      await srv.stop();
    }
  }, 90_000);
});

describe("onEvent at least once", () => {
  let receiver: Receiver;
  beforeAll(() => {
    // Each event takes 300 ms to be taken: events are still queued when the process is killed.
    receiver = startReceiver({ answer: async () => (await Bun.sleep(300), new Response("ok")) });
  });
  afterAll(() => receiver.stop());

  test("kill -9 with events committed and not yet handed over: after the restart the plugin receives them", async () => {
    const dataDir = join(tempDir(), "data");
    drop(
      dataDir,
      "forwarder",
      `export async function onEvent(event, ctx) { const r = await ctx.http({ method: "POST", url: ctx.config.url, body: JSON.stringify(event) }); if (r.status !== 200) throw new Error("status " + r.status); }
export function activate() {}`,
    );
    const env = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", ...RATES };
    let srv = await startBinary({ dataDir, env });
    const id = await install(srv, "forwarder", { url: receiver.url });
    expect((await settled(srv, id)).status).toBe("active");
    const keys = ["alo-1", "alo-2", "alo-3", "alo-4"];
    for (const key of keys) expect((await api(srv, "POST", "/v1/projects/default/flags", { key, name: key })).status).toBe(201);
    await receiver.waitFor(1, 10_000);
    srv.proc.kill("SIGKILL");
    await srv.proc.exited;
    const beforeRestart = receiver.received.length;
    expect(beforeRestart).toBeLessThan(keys.length * 3);

    srv = await startBinary({ dataDir, env });
    try {
      const seen = () => new Set(receiver.received.map((r) => `${r.json.data.flagKey}/${r.json.environment}`));
      await until("every event", async () => seen().size === keys.length * 3, 30_000);
      for (const key of keys) for (const env of ["development", "staging", "production"]) expect(seen().has(`${key}/${env}`)).toBe(true);
      // At least once: an event in flight at the kill may come twice, with the same id.
      const ids = receiver.received.map((r) => r.json.id);
      expect(new Set(ids).size).toBe(keys.length * 3);
      // The event in flight at the kill came again: the plugin can dedupe it on event.id.
      expect(ids.length).toBeGreaterThan(keys.length * 3);
    } finally {
      await srv.stop();
    }
  }, 90_000);
});

describe("a package never reaches outside its folder, through the binary", () => {
  // Secrets of the process, in its environment: what README.md -> /proc/self/environ showed.
  const SECRETS = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_JWT_SECRET: "jwt-secret-never-served-0123456789abcdef", SVC_ADMIN_PASSWORD: "admin-password-never-served" };
  const env = { ...SECRETS, SVC_EDITION: "pro", ...RATES };

  test("plugins add of a folder holding a link: exit 1 naming it, nothing copied", async () => {
    const dataDir = join(tempDir(), "data");
    for (const { name, link } of leakTargets(dataDir, SECRETS.SVC_JWT_SECRET)) {
      const folder = linkedPackage(join(dataDir, "incoming", name), { packageName: `@leak/${name}` }, { "README.md": link });
      const out = await runBinary(["plugins", "add", folder, "--data-dir", dataDir], { env });
      expect(out).toEqual({ exitCode: 1, stdout: "", stderr: `flagsvc: ${folder}: README.md is a symbolic link; a package may hold none: it could reach outside its folder\n` });
    }
    expect(existsSync(join(dataDir, "marketplace")) ? readdirSync(join(dataDir, "marketplace")) : []).toEqual([]);
  }, 60_000);

  test("packages with README.md -> the environment, the TLS key, the database dropped into marketplace/: skipped with a warning, none served", async () => {
    const dataDir = join(tempDir(), "data");
    const srv = await startBinary({ dataDir, env });
    try {
      // Dropped while it runs (the TLS key and the database are the server's own by now).
      const targets = leakTargets(dataDir, SECRETS.SVC_ADMIN_KEY);
      for (const { name, link } of targets) linkedPackage(join(dataDir, "marketplace", name), { packageName: `@leak/${name}` }, { "README.md": link });
      drop(dataDir, "after", "export function activate() {}");
      await until("the package dropped after them", async () => (await api(srv, "GET", `/v1/marketplace/plugins/${encodeURIComponent("@hostile/after")}`)).status === 200);
      for (const { name } of targets) await srv.waitFor(new RegExp(`plugin package skipped: [^"]*/marketplace/${name}: README.md is a symbolic link`), 5_000);
      const answers = [await api(srv, "GET", "/v1/marketplace/plugins")];
      for (const { name } of targets) {
        const res = await api(srv, "GET", `/v1/marketplace/plugins/${encodeURIComponent(`@leak/${name}`)}`);
        expect({ name, status: res.status }).toEqual({ name, status: 404 });
        answers.push(res);
      }
      expect(answers[0]!.body.plugins.map((p: { packageName: string }) => p.packageName)).not.toContain("@leak/environ");
      const text = JSON.stringify(answers.map((a) => a.body));
      for (const secret of [...Object.values(SECRETS), ...targets.map((t) => t.secret)]) expect(text).not.toContain(secret);
    } finally {
      await srv.stop();
    }
  }, 60_000);
});

describe("onEvaluations through the binary", () => {
  let receiver: Receiver;
  beforeAll(() => {
    receiver = startReceiver();
  });
  afterAll(() => receiver.stop());

  test("batches reach the plugin as records (a plugin that replaces JSON.parse still gets them); three failing calls in a row end in error", async () => {
    const dataDir = join(tempDir(), "data");
    const hooks = ["onEvaluations"];
    // The host parses each batch inside the VM with the JSON.parse it had before the plugin ran.
    drop(
      dataDir,
      "records",
      `JSON.parse = () => { throw new Error("replaced"); };
export async function onEvaluations(batch, ctx) { await ctx.http({ method: "POST", url: ctx.config.url, body: JSON.stringify(batch) }); }`,
      { hooks },
    );
    drop(dataDir, "failing", `export function onEvaluations(batch) { throw new Error("cannot take " + batch.length); }`, { hooks });
    const srv = await startBinary({ dataDir, env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", ...RATES } });
    try {
      const records = await install(srv, "records", { url: receiver.url });
      const failing = await install(srv, "failing");
      for (const id of [records, failing]) expect((await settled(srv, id)).status).toBe("active");
      const { key } = (await api(srv, "POST", "/v1/projects/default/api-keys", { name: "e2e", scope: "eval", environment: "production" })).body;
      const evaluate = (path: string, body: unknown) => callServer(srv.url, "POST", path, { key, body });
      expect((await evaluate("/v1/evaluate", { flagKey: "nope", context: { userId: "u-1" } })).status).toBe(200);
      expect((await evaluate("/v1/evaluate/batch", { flags: ["a", "b"], context: { userId: "u-2" } })).status).toBe(200);
      await receiver.waitFor(1, 10_000);
      const got = receiver.received.flatMap((r) => r.json as Record<string, unknown>[]);
      expect(got.map((r) => [r.flagKey, r.environment, r.userId, r.reason])).toEqual([
        ["nope", "production", "u-1", "FLAG_NOT_FOUND"],
        ["a", "production", "u-2", "FLAG_NOT_FOUND"],
        ["b", "production", "u-2", "FLAG_NOT_FOUND"],
      ]);
      expect(Object.keys(got[0]!).sort()).toEqual(["enabled", "environment", "evaluatedAt", "flagKey", "reason", "ruleId", "userId", "variant"]);
      // The failing plugin got that batch (one failure); two more batches, each after the last failed, end it.
      const failures = async () => ((await statusOf(srv, failing)).logs as { message: string }[]).filter((l) => l.message.startsWith("onEvaluations failed")).length;
      for (let n = 1; n < 3; n++) {
        await until(`failure ${n}`, async () => (await failures()) === n, 10_000);
        expect((await evaluate("/v1/evaluate", { flagKey: "nope", context: { userId: `u-${n}` } })).status).toBe(200);
      }
      const failed = await until("three failures", async () => ((s) => (s.status === "error" ? s : undefined))(await statusOf(srv, failing)), 10_000);
      expect(failed.errorMessage).toBe("3 hook calls failed in a row; last: onEvaluations: Error: cannot take 1");
      expect(failed.logs.filter((l: { message: string }) => l.message.startsWith("onEvaluations failed")).length).toBe(3);
      expect((await statusOf(srv, records)).status).toBe("active");
    } finally {
      await srv.stop();
    }
  }, 60_000);
});
