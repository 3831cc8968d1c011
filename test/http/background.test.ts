/**
 * The background thread (src/background/) as the server runs it: a real worker with its own
 * SQLite connection sends the webhooks, checkpoints the WAL, forwards its log lines, and is
 * started again when it dies; a state change's delivery arrives through it.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { BackgroundThread } from "../../src/background/thread";
import { loadConfig } from "../../src/config";
import { createLogger, forwardingLogger, type LogRecord } from "../../src/lib/log";
import { startServer, type RunningServer } from "../../src/server";
import { callServer, seedAdminKey, tempDir, sqliteOf, sqliteOnly } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

let dir: string;
let server: RunningServer;
let rx: Receiver;
let lines: string[];
let key: string;

beforeAll(async () => {
  dir = tempDir();
  rx = startReceiver();
  lines = [];
  const config = loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_LOG_LEVEL: "info" });
  // No injected clock: the server sends from its background thread.
  server = await startServer(config, { log: createLogger({ level: "info", format: "json", write: (chunk) => lines.push(chunk) }) });
  key = await seedAdminKey(server.ctx);
});
afterEach(() => {
  rx.received.length = 0;
});
afterAll(async () => {
  await server.stop();
  rx.stop();
  rmSync(dir, { recursive: true, force: true });
});

const call = (method: string, path: string, body?: unknown) => callServer(server.url, method, path, { key, body });
const thread = () => server.ctx.deliveries as BackgroundThread;
const worker = () => (thread() as unknown as { thread: { worker: Worker | undefined } }).thread.worker;
const autoCheckpoint = () => sqliteOf(server.ctx).sqlite.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint;
const until = async (what: () => boolean, timeoutMs = 5_000) => {
  for (const started = Date.now(); !what(); await Bun.sleep(20)) if (Date.now() - started > timeoutMs) throw new Error("timed out");
};

sqliteOnly("the server sends from the background thread, and the main connection leaves checkpoints to it", async () => {
  expect(thread()).toBeInstanceOf(BackgroundThread);
  await until(() => autoCheckpoint() === 0);
  const hook = await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled"], secret: "background-thread-secret" });
  expect(hook.status).toBe(201);
  expect((await call("POST", "/v1/projects/default/flags", { key: "threaded", name: "Threaded" })).status).toBe(201);
  expect((await call("PUT", "/v1/projects/default/flags/threaded/states/production", { enabled: true })).status).toBe(200);

  // Flow control: a write's kick waits for the worker to take it; a kick of everything does not.
  const taken = thread().kick([hook.body!.id]);
  expect(taken).toBeInstanceOf(Promise);
  let answered = false;
  void taken!.then(() => (answered = true));
  await Promise.resolve();
  expect(answered).toBe(false); // not before the worker answers
  await taken;
  expect(answered).toBe(true);
  expect(thread().kick()).toBeUndefined();

  const [got] = await rx.waitFor(1);
  expect(got!.json).toMatchObject({ event: "flag.enabled", environment: "production", data: { flagKey: "threaded" } });
  await thread().drain();
  const { body } = await call("GET", `/v1/webhooks/${hook.body!.id}/deliveries`);
  expect(body!.deliveries).toEqual([expect.objectContaining({ status: "succeeded", attempts: 1, responseStatus: 200 })]);

  // The WAL is checkpointed by the worker: its size stops growing at what the writes need.
  const frames = () => sqliteOf(server.ctx).sqlite.query<{ log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(PASSIVE)").get()!;
  await until(() => frames().checkpointed === frames().log);
});

// SQLite-only: the background thread is SQLite's (a PostgreSQL node sends from its main thread), and this file's server runs on a SQLite data dir whatever the backend.
sqliteOnly("a worker that dies is started again; meanwhile the main connection checkpoints, and nothing is lost", async () => {
  const hook = await call("POST", "/v1/projects/default/webhooks", { url: `${rx.url}/again`, events: ["flag.disabled"], secret: "background-thread-secret" });
  const first = worker()!;
  first.terminate();
  await until(() => worker() === undefined);
  expect(autoCheckpoint()).toBe(1000);
  expect(thread().kick([hook.body!.id])).toBeUndefined(); // no worker: nothing to wait for
  await thread().drain(); // nor to drain
  expect(lines.join("")).toContain("background thread ended unexpectedly");

  // Written while no worker runs: queued in the database, sent by the next worker.
  expect((await call("PUT", "/v1/projects/default/flags/threaded/states/production", { enabled: false })).status).toBe(200);
  await until(() => worker() !== undefined && worker() !== first);
  const arrived = await rx.waitFor(1);
  expect(arrived.map((r) => r.path)).toEqual(["/hook/again"]);
  await until(() => autoCheckpoint() === 0);
  await thread().drain();
  const { body } = await call("GET", `/v1/webhooks/${hook.body!.id}/deliveries`);
  expect(body!.deliveries).toEqual([expect.objectContaining({ status: "succeeded", attempts: 1 })]);
});

// SQLite-only: the background thread is SQLite's (a PostgreSQL node sends from its main thread), and this file's server runs on a SQLite data dir whatever the backend.
sqliteOnly("the worker's log lines are written by the main thread's logger", async () => {
  const hook = await call("POST", "/v1/projects/default/webhooks", { url: "http://127.0.0.1:9/refused", events: ["flag.enabled"], secret: "background-thread-secret" });
  expect((await call("PUT", "/v1/projects/default/flags/threaded/states/production", { enabled: true })).status).toBe(200);
  await until(() => lines.join("").includes("webhook attempt failed; will retry"));
  const line = lines.join("").split("\n").find((l) => l.includes("webhook attempt failed; will retry"))!;
  expect(JSON.parse(line)).toMatchObject({ level: "info", webhook: hook.body!.id, error: "connection refused" });
});

sqliteOnly("retention runs on the background thread, in chunks: 2,500 deliveries older than 30 days go, newer ones stay", async () => {
  const hook = await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.deleted"], secret: "background-thread-secret" });
  const { sqlite } = sqliteOf(server.ctx);
  const old = new Date(Date.now() - 40 * 86_400_000).toISOString();
  const projectId = sqlite.query<{ id: string }, []>("SELECT id FROM projects WHERE slug = 'default'").get()!.id;
  const fresh = sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_deliveries").get()!.n;
  sqlite.transaction(() => {
    sqlite.run("INSERT INTO webhook_events (id, project_id, event, environment, payload, created_at) VALUES ('evt_old', ?, 'flag.deleted', 'production', '{}', ?)", [projectId, old]);
    const insert = sqlite.query("INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?, ?, 'evt_old', 'succeeded', 1, NULL, ?)");
    for (let i = 0; i < 2500; i++) insert.run(`del_old${i}`, hook.body!.id, old);
  })();
  thread().prune();
  const count = (table: string) => sqlite.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${table}`).get()!.n;
  await until(() => count("webhook_deliveries") === fresh && count("webhook_events WHERE id = 'evt_old'") === 0);
  await until(() => lines.join("").includes("old webhook deliveries removed"));
  const line = lines.join("").split("\n").find((l) => l.includes("old webhook deliveries removed"))!;
  expect(JSON.parse(line)).toMatchObject({ deliveries: 2500, events: 1 });
});

test("forwardingLogger: records at or above its level, with their fields", () => {
  const sent: LogRecord[] = [];
  const log = forwardingLogger("info", (r) => sent.push(r));
  log.debug("hidden");
  log.info("shown", { n: 1 });
  log.error("bad");
  expect(log.enabled("debug")).toBe(false);
  expect(log.enabled("warn")).toBe(true);
  expect(sent).toEqual([
    { level: "info", msg: "shown", fields: { n: 1 } },
    { level: "error", msg: "bad" },
  ]);
});
