/**
 * The plugin host over a real SQLite file: plugins in worker threads, their status settled in
 * the `plugins` rows (inserted with SQL here; the plugins API creates them), their events fed
 * from `change_events`, their evaluation records batched, their deaths contained.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, type Store } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { systemClock } from "../../src/lib/clock";
import { createLogger } from "../../src/lib/log";
import { EvaluationRecords } from "../../src/modules/evaluation/records";
import { PluginHost, type PluginRun } from "../../src/plugins/host";
import { SqliteRuntimeStore } from "../../src/plugins/runtime-store";
import { LeaseKeeper, newNodeId } from "../../src/modules/leases/keeper";
import { SqliteLeaseStore } from "../../src/modules/leases/store";
import type { SandboxLimits } from "../../src/plugins/sandbox";
import type { EvaluationResult } from "../../src/evaluation/types";
import { tempDir, until } from "../helpers";

const LIMITS: SandboxLimits = { memoryMb: 32, cpuMs: 300, wallMs: 1000 };
const NOW = "2026-11-22T10:00:00.000Z";

interface Harness {
  dir: string;
  store: Store;
  runtime: SqliteRuntimeStore;
  records: EvaluationRecords;
  host: PluginHost;
  serverLog(): Record<string, unknown>[];
  newHost(): PluginHost;
}

const open: Harness[] = [];

function harness(outboundAllowedHosts: readonly string[] = ["external"], dir = tempDir()): Harness {
  const store = openDatabase(join(dir, "flagsvc.db"));
  migrate(store.sqlite);
  for (const id of ["p1", "p2"]) store.sqlite.run("INSERT OR IGNORE INTO projects (id, slug, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)", [id, id, id, NOW, NOW]);
  let written = "";
  const log = createLogger({ level: "info", format: "json", write: (chunk) => (written += chunk) });
  const runtime = new SqliteRuntimeStore(store.sqlite);
  const records = new EvaluationRecords();
  const leases = new SqliteLeaseStore(store.sqlite);
  const newHost = () => new PluginHost({ store: runtime, records, log, clock: systemClock, limits: LIMITS, outboundAllowedHosts, leases: new LeaseKeeper({ store: leases, node: newNodeId(), log }) });
  const h: Harness = {
    dir,
    store,
    runtime,
    records,
    host: newHost(),
    newHost,
    serverLog() {
      log.flush();
      return written.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    },
  };
  open.push(h);
  return h;
}

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.host.stopAll();
    h.records.stop();
    h.store.sqlite.close();
    rmSync(h.dir, { recursive: true, force: true });
  }
});

/** A local HTTP receiver keeping what it got (any body, JSON or not). */
const got: { method: string; path: string; headers: Headers; body: string }[] = [];
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const path = new URL(request.url).pathname;
    got.push({ method: request.method, path, headers: request.headers, body: await request.text() });
    return path === "/big" ? new Response("x".repeat(2 << 20)) : Response.json({ ok: true });
  },
});
const receiverUrl = `http://127.0.0.1:${receiver.port}`;
afterAll(() => receiver.stop(true));

let nextId = 0;
/** A `plugins` row (enabled, installing) and the run the API would start for it. */
function install(h: Harness, source: string, opts: { projectId?: string; config?: Record<string, unknown>; secrets?: string[]; position?: number } = {}): PluginRun {
  const id = `plg_${++nextId}`;
  const projectId = opts.projectId ?? "p1";
  h.store.sqlite.run(
    `INSERT INTO plugins (id, project_id, package_name, version, enabled, status, config, event_position, installed_at, updated_at)
     VALUES (?, ?, 'test-plugin', '1.0.0', 1, 'installing', ?, ?, ?, ?)`,
    [id, projectId, JSON.stringify(opts.config ?? {}), opts.position ?? 0, NOW, NOW],
  );
  return { id, projectId, projectSlug: projectId, packageName: "test-plugin", version: "1.0.0", source, config: opts.config ?? {}, secrets: opts.secrets ?? [] };
}

type Row = { status: string; error_message: string | null; event_position: number; events_handled: number; errors: number; last_event_at: string | null; evaluations_dropped: number };
const row = (h: Harness, id: string) => h.store.sqlite.query<Row, [string]>("SELECT * FROM plugins WHERE id = ?").get(id)!;

const settled = (h: Harness, id: string, timeoutMs?: number) =>
  until(`${id} to settle`, () => (row(h, id).status !== "installing" ? row(h, id) : undefined), timeoutMs);

const messages = (h: Harness, id: string) => h.host.live(id)?.logs.map((l) => l.message) ?? [];

/** Adds webhook-like events to the project's queue and tells the host, as a committed write does. */
function commitEvents(h: Harness, projectId: string, ids: string[]): void {
  for (const id of ids) {
    const payload = { id, event: "flag.updated", projectSlug: projectId, environment: "production", timestamp: NOW, data: { flagKey: id, previousState: null, currentState: null } };
    h.store.sqlite.run("INSERT INTO change_events (project_id, payload) VALUES (?, ?)", [projectId, JSON.stringify(payload)]);
  }
  h.host.eventsCommitted(projectId);
}

const result = (flagKey: string): EvaluationResult => ({ flagKey, enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: NOW });

describe("activation", () => {
  test("activate ok: active, with a server log line; a throwing activate: error with the plugin's message", async () => {
    const h = harness();
    const ok = install(h, `export function activate(ctx) { ctx.log("info", "hello " + ctx.config.name); }`, { config: { name: "world" } });
    const bad = install(h, `export function activate() { throw new Error("no api key"); }`);
    const none = install(h, `export function onEvent() {}`);
    h.host.start(ok);
    h.host.start(bad);
    h.host.start(none);
    expect(await settled(h, ok.id)).toMatchObject({ status: "active", error_message: null });
    expect(await settled(h, bad.id)).toMatchObject({ status: "error", error_message: "activate failed: Error: no api key" });
    expect((await settled(h, none.id)).status).toBe("active");
    expect(messages(h, ok.id)).toEqual(["hello world"]);
    const lines = h.serverLog();
    expect(lines.find((l) => l.msg === "plugin active" && l.pluginId === ok.id)).toBeDefined();
    expect(lines.find((l) => l.msg === "plugin error" && l.pluginId === bad.id)?.error).toBe("activate failed: Error: no api key");
    // Plugin lines stay off the server log.
    expect(lines.some((l) => String(l.msg).includes("hello world"))).toBe(false);
  });

  test("a loop in the module body or in activate, and a syntax error: activate failed, with the reason", async () => {
    const h = harness();
    const body = install(h, `while (true) {} export function activate() {}`);
    const hook = install(h, `export async function activate() { await null; for (;;) {} }`);
    const syntax = install(h, `export function activate( {`);
    for (const run of [body, hook, syntax]) h.host.start(run);
    expect((await settled(h, body.id)).error_message).toMatch(/^activate failed: over its CPU slice of 300 ms in loading the module$/);
    expect((await settled(h, hook.id)).error_message).toMatch(/^activate failed: over its CPU slice of 300 ms/);
    expect((await settled(h, syntax.id)).error_message).toMatch(/^activate failed: SyntaxError/);
  });

  test("a status is written only while the row is enabled, and only by the current run", async () => {
    const h = harness();
    const run = install(h, `export async function activate() { for (let i = 0; i < 2e6; i++); }`);
    h.host.start(run);
    // Disabled once its worker started (a disable on another node racing with it; a row disabled before is not started: runnable).
    await until("the worker", () => h.host.workers === 1);
    h.store.sqlite.run("UPDATE plugins SET enabled = 0, status = 'disabled' WHERE id = ?", [run.id]);
    await until("the plugin to run", () => h.serverLog().some((l) => l.msg === "plugin active"));
    expect(row(h, run.id).status).toBe("disabled");
    // A run stopped before its activation settled writes nothing.
    const slow = install(h, `export async function activate() { for (let i = 0; i < 2e6; i++); }`);
    h.host.start(slow);
    await h.host.stop(slow.id);
    await Bun.sleep(300);
    expect(row(h, slow.id).status).toBe("installing");
    expect(h.host.live(slow.id)).toBeUndefined();
  });
});

describe("leases", () => {
  test("a plugin whose row is in error or disabled is not started (a node taking it over leaves it stopped); a runnable one is", async () => {
    const h = harness();
    const failed = install(h, `export function activate() {}`);
    const off = install(h, `export function activate() {}`);
    const fine = install(h, `export function activate() {}`);
    h.store.sqlite.run("UPDATE plugins SET status = 'error', error_message = 'boom' WHERE id = ?", [failed.id]);
    h.store.sqlite.run("UPDATE plugins SET enabled = 0, status = 'disabled' WHERE id = ?", [off.id]);
    for (const run of [failed, off, fine]) h.host.start(run);
    expect((await settled(h, fine.id)).status).toBe("active");
    await Bun.sleep(200);
    expect(h.host.workers).toBe(1);
    expect(row(h, failed.id)).toMatchObject({ status: "error", error_message: "boom" });
    expect(row(h, off.id).status).toBe("disabled");
  });
});

describe("deaths and failures: that plugin ends in error, the others run on", () => {
  test("memory bomb, infinite loop, stack overflow, a crash after await", async () => {
    const h = harness();
    const good = install(h, `export function onEvent(e, ctx) { ctx.log("info", "got " + e.id); }`);
    const bomb = install(h, `export function onEvent() { const a = []; for (;;) a.push(new Array(1e5).fill(1)); }`);
    const loop = install(h, `export function onEvent() { while (true) {} }`);
    const stack = install(h, `function f(n) { return f(n + 1) + 1; } export function onEvent() { return f(0); }`);
    const late = install(h, `export async function onEvent() { await null; const a = []; for (;;) a.push("x".repeat(1 << 16) + a.length); }`);
    const runs = [good, bomb, loop, stack, late];
    for (const run of runs) h.host.start(run);
    for (const run of runs) expect((await settled(h, run.id)).status).toBe("active");
    commitEvents(h, "p1", ["e1"]);
    const error = async (id: string) => (await until(`${id} in error`, () => (row(h, id).status === "error" ? row(h, id) : undefined))).error_message;
    expect(await error(bomb.id)).toMatch(/out of memory|CPU slice/);
    expect(await error(loop.id)).toBe("over its CPU slice of 300 ms in onEvent");
    expect(await error(stack.id)).toMatch(/stack overflow/);
    expect(await error(late.id)).toMatch(/out of memory|string too long|CPU slice/);
    await until("the good plugin's event", () => messages(h, good.id).includes("got e1"));
    commitEvents(h, "p1", ["e2"]);
    await until("the good plugin's next event", () => messages(h, good.id).includes("got e2"));
    expect(row(h, good.id).status).toBe("active");
    // The error's reason is also the last line of the plugin's own log, readable until it is started again.
    expect(h.host.live(loop.id)!.logs.at(-1)).toMatchObject({ level: "error", message: "over its CPU slice of 300 ms in onEvent" });
  });

  test("three failing hooks in a row (a hook that never settles fails at the wall limit): error; a success resets the count", async () => {
    const h = harness();
    const flaky = install(h, `export function onEvent(e) { if (e.id.startsWith("bad")) throw new Error("nope " + e.id); }`);
    const hang = install(h, `export function onEvent() { return new Promise(() => {}); }`);
    h.host.start(flaky);
    h.host.start(hang);
    await settled(h, flaky.id);
    await settled(h, hang.id);
    commitEvents(h, "p1", ["bad1", "bad2", "ok", "bad3", "bad4"]);
    const hung = await until("the hanging plugin in error", () => (row(h, hang.id).status === "error" ? row(h, hang.id) : undefined), 15_000);
    expect(hung.error_message).toBe("3 hook calls failed in a row; last: onEvent: onEvent did not settle within 1000 ms");
    await until("the flaky plugin's batch", () => row(h, flaky.id).event_position === 5);
    expect(row(h, flaky.id)).toMatchObject({ status: "active", events_handled: 1, errors: 4 });
    commitEvents(h, "p1", ["bad5"]);
    const failed = await until("the flaky plugin in error", () => (row(h, flaky.id).status === "error" ? row(h, flaky.id) : undefined));
    expect(failed.error_message).toBe("3 hook calls failed in a row; last: onEvent: Error: nope bad5");
  }, 20_000);

  test("error messages and log lines are secret-masked", async () => {
    const h = harness();
    const run = install(h, `export function activate(ctx) { ctx.log("info", "key=" + ctx.config.apiKey); ctx.log("info", ctx.config.apiKey.repeat(300)); throw new Error("bad key " + ctx.config.apiKey); }`, {
      config: { apiKey: "sk-very-secret" },
      secrets: ["sk-very-secret"],
    });
    h.host.start(run);
    expect((await settled(h, run.id)).error_message).toBe("activate failed: Error: bad key ********");
    // Masked, then cut at 2,000 characters (never the other way round: a cut could split a secret).
    expect(messages(h, run.id)).toEqual(["key=********", "*".repeat(2000), "activate failed: Error: bad key ********"]);
    expect(JSON.stringify(h.serverLog())).not.toContain("sk-very-secret");
  });
});

describe("ctx.log", () => {
  test("a flood is rate-limited (burst 100, then 20/s) and the drops reported in one line; the host keeps 100 lines", async () => {
    const h = harness();
    const run = install(
      h,
      `export function activate(ctx) { for (let i = 0; i < 1000; i++) ctx.log("debug", "line " + i); }
       export function onEvent(e, ctx) { ctx.log("warn", "after " + e.id); }`,
    );
    const started = Date.now();
    h.host.start(run);
    await settled(h, run.id);
    const tookMs = Date.now() - started;
    const first = messages(h, run.id);
    expect(first).toHaveLength(100);
    // The burst: lines 0 to 99, the first drop only after line 99.
    const firstDrop = first.findIndex((m) => m.endsWith("log lines dropped"));
    if (firstDrop >= 0) expect(first[firstDrop - 1]).toBe("line 99");
    else expect(first.at(-1)).toBe("line 99");
    // Then what refilled while the loop ran (20 a second: none, or a few lines when the worker
    // was kept off the CPU), each after a line telling how many were dropped before it.
    const lineNo = (m: string) => Number(/^line (\d+)$/.exec(m)?.[1] ?? -1);
    const refilled = first.filter((m) => lineNo(m) >= 100);
    expect(refilled.length).toBeLessThanOrEqual(Math.ceil((tookMs * 20) / 1000));
    await Bun.sleep(100);
    commitEvents(h, "p1", ["e1"]);
    await until("the line after the flood", () => messages(h, run.id).includes("after e1"));
    const logs = h.host.live(run.id)!.logs;
    expect(logs).toHaveLength(100);
    const [drop, after] = logs.slice(-2);
    expect(after).toMatchObject({ level: "warn", message: "after e1" });
    expect(drop!.level).toBe("warn");
    expect(drop!.message).toMatch(/^\d+ log lines dropped$/);
    // Every line of the flood is either kept or counted as dropped, once.
    const dropped = logs.map((l) => Number(/^(\d+) log lines dropped$/.exec(l.message)?.[1] ?? 0)).reduce((a, b) => a + b, 0);
    expect(100 + refilled.length + dropped).toBe(1000);
  });
});

describe("ctx.http", () => {
  test("to a host SVC_OUTBOUND_ALLOWED_HOSTS allows: performed, with flagsvc's User-Agent unless the plugin sets one; a response over 1 MiB is refused", async () => {
    const h = harness(["127.0.0.1"]);
    const run = install(
      h,
      `export async function activate(ctx) {
         const r = await ctx.http({ method: "POST", url: ctx.config.url + "/capture", headers: { "content-type": "application/json", authorization: "Bearer k" }, body: JSON.stringify({ a: 1 }) });
         ctx.log("info", r.status + " " + r.body + " " + r.headers["content-type"]);
         await ctx.http({ method: "get", url: ctx.config.url + "/ua", headers: { "user-agent": "mine/1" } });
         try { await ctx.http({ method: "GET", url: ctx.config.url + "/big" }); } catch (e) { ctx.log("warn", e.message); }
         try { await ctx.http({ method: "TRACE", url: ctx.config.url }); } catch (e) { ctx.log("warn", e.message); }
         try { await ctx.http({ method: "GET", url: ctx.config.url, body: "x" }); } catch (e) { ctx.log("warn", e.message); }
       }`,
      { config: { url: receiverUrl } },
    );
    h.host.start(run);
    expect((await settled(h, run.id)).status).toBe("active");
    expect(messages(h, run.id)).toEqual([
      `200 {"ok":true} application/json;charset=utf-8`,
      "response over 1 MiB",
      "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD",
      "a GET request has no body",
    ]);
    const [capture, ua, big] = got.slice(-3);
    expect(capture).toMatchObject({ method: "POST", path: "/capture", body: `{"a":1}` });
    expect(ua).toMatchObject({ method: "GET", path: "/ua", body: "" });
    expect(big!.path).toBe("/big");
    expect(capture!.headers.get("authorization")).toBe("Bearer k");
    expect(capture!.headers.get("user-agent")).toMatch(/^flagsvc-plugins\/\d+\.\d+\.\d+/);
    expect(ua!.headers.get("user-agent")).toBe("mine/1");
  });

  test("under the default setting, the cloud metadata address and loopback are refused inside the plugin", async () => {
    const h = harness();
    const run = install(
      h,
      `export async function activate(ctx) {
         for (const url of ["http://169.254.169.254/latest/meta-data/", ctx.config.url, "http://localhost:" + ctx.config.port + "/"]) {
           try { await ctx.http({ method: "GET", url }); ctx.log("error", "reached " + url); } catch (e) { ctx.log("info", e.message); }
         }
       }`,
      { config: { url: receiverUrl, port: receiver.port } },
    );
    const before = got.length;
    h.host.start(run);
    await settled(h, run.id);
    expect(messages(h, run.id)).toEqual([
      "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 169.254.169.254 is link-local",
      "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback",
      expect.stringMatching(/^blocked by SVC_OUTBOUND_ALLOWED_HOSTS: localhost \((127\.0\.0\.1|::1)\) is loopback$/),
    ]);
    expect(got.length).toBe(before);
  });

  test("stop() calls deactivate, then the worker is gone", async () => {
    const h = harness(["127.0.0.1"]);
    const run = install(h, `export async function deactivate(ctx) { await ctx.http({ method: "POST", url: ctx.config.url + "/bye", body: "{}" }); }`, { config: { url: receiverUrl } });
    h.host.start(run);
    await settled(h, run.id);
    await h.host.stop(run.id);
    expect(got.at(-1)!.path).toBe("/bye");
    expect(h.host.live(run.id)).toBeUndefined();
    expect(row(h, run.id).status).toBe("active");
  });
});

describe("onEvent", () => {
  test("events in order, once each; positions and stats stored; a new host over the same database resumes from the stored position", async () => {
    const h = harness();
    // One log line per run of events (ctx.log is rate-limited): the ids seen, in order.
    const source = `let seen = []; export function onEvent(e, ctx) { seen.push(e.id); if (e.id.startsWith("last")) { ctx.log("info", seen.join(",")); seen = []; } }`;
    const run = install(h, source);
    const other = install(h, `export function onEvent(e, ctx) { ctx.log("info", e.id); }`, { projectId: "p2" });
    commitEvents(h, "p1", ["a", "b"]); // committed before the plugin runs: handed at activation
    h.host.start(run);
    h.host.start(other);
    await settled(h, run.id);
    const ids = [...Array.from({ length: 249 }, (_, i) => `e${i}`), "last"];
    commitEvents(h, "p1", ids.slice(0, 120));
    commitEvents(h, "p2", ["x"]);
    commitEvents(h, "p1", ids.slice(120));
    // Positions 1-122 and 124-253 (the other project's event took 123).
    await until("every event", () => row(h, run.id).event_position === 253);
    expect(messages(h, run.id)).toEqual([["a", "b", ...ids].join(",")]);
    expect(row(h, run.id)).toMatchObject({ events_handled: 252, errors: 0 });
    expect(row(h, run.id).last_event_at).toMatch(/^\d{4}-/);
    await until("the other project's event", () => messages(h, other.id).includes("x"));
    expect(messages(h, other.id)).toEqual(["x"]);

    // Down: events committed meanwhile reach the plugin when it runs again, and no earlier one.
    await h.host.stopAll();
    commitEvents(h, "p1", ["later1", "last2"]);
    h.host = h.newHost();
    h.store.sqlite.run("UPDATE plugins SET status = 'installing' WHERE id = ?", [run.id]);
    h.host.start(run);
    await settled(h, run.id);
    await until("the later events", () => row(h, run.id).event_position === 255);
    expect(messages(h, run.id)).toEqual(["later1,last2"]);
  });

  test("a plugin without onEvent follows the queue; pruneEvents removes what every enabled plugin of a project is past", async () => {
    const h = harness();
    const slow = install(h, `export function onEvent(e) { if (e.id === "stuck") throw new Error("x"); }`, { position: 0 });
    const none = install(h, `export function activate() {}`);
    commitEvents(h, "p1", ["1", "2"]);
    commitEvents(h, "p2", ["orphan"]);
    h.host.start(none);
    await settled(h, none.id);
    expect(row(h, none.id).event_position).toBe(2);
    // `slow` has not run: its position holds the queue.
    await h.runtime.pruneEvents();
    expect(h.store.sqlite.query("SELECT count(*) AS n FROM change_events").get()).toEqual({ n: 2 });
    h.store.sqlite.run("UPDATE plugins SET event_position = 1 WHERE id = ?", [slow.id]);
    await h.runtime.pruneEvents();
    expect(h.store.sqlite.query("SELECT position FROM change_events").all()).toEqual([{ position: 2 }]);
    // Disabled plugins do not hold it.
    h.store.sqlite.run("UPDATE plugins SET enabled = 0 WHERE id = ?", [slow.id]);
    await h.runtime.pruneEvents();
    expect(h.store.sqlite.query("SELECT count(*) AS n FROM change_events").get()).toEqual({ n: 0 });
  });
});

describe("onEvaluations", () => {
  test("records arrive in batches of at most 500, the rest within about a second", async () => {
    const h = harness();
    const run = install(h, `export function onEvaluations(batch, ctx) { ctx.log("info", batch.length + " " + batch[0].flagKey + " " + batch[0].environment + " " + batch[0].userId); }`);
    h.host.start(run);
    await settled(h, run.id);
    expect(h.records.wants("p1")).toBe(true);
    expect(h.records.wants("p2")).toBe(false);
    const started = performance.now();
    for (let i = 0; i < 1100; i++) h.records.add("p1", "production", result(`f${i}`), "u1");
    await until("three batches", () => messages(h, run.id).length === 3, 3000);
    expect(messages(h, run.id)).toEqual(["500 f0 production u1", "500 f500 production u1", "100 f1000 production u1"]);
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThan(900);
    expect(ms).toBeLessThan(2000);
  });

  test("a slow plugin: one batch in flight and one waiting, the rest dropped and counted; the count is stored", async () => {
    const h = harness();
    const slow = install(h, `export function onEvaluations(batch) { const until = Date.now() + 200; while (Date.now() < until); }`);
    const fast = install(h, `let n = 0; export function onEvaluations(batch, ctx) { n += batch.length; ctx.log("info", String(n)); }`);
    h.host.start(slow);
    h.host.start(fast);
    await settled(h, slow.id);
    await settled(h, fast.id);
    // A batch of 500 as soon as the fast plugin took the last one: it keeps up (whatever the
    // machine's load), the slow one (200 ms a batch) cannot.
    for (let n = 1; n <= 20; n++) {
      for (let i = 0; i < 500; i++) h.records.add("p1", "production", result("f"), null);
      await until("the fast plugin's batch", () => messages(h, fast.id).includes(String(n * 500)));
    }
    expect(h.host.live(fast.id)!.evaluationsDropped).toBe(0);
    const dropped = h.host.live(slow.id)!.evaluationsDropped;
    expect(dropped).toBeGreaterThanOrEqual(2000);
    expect(dropped % 500).toBe(0);
    await h.host.stop(slow.id);
    expect(row(h, slow.id).evaluations_dropped).toBe(dropped);
    expect(row(h, slow.id).status).toBe("active");
  });
});
