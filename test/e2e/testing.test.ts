/**
 * The Testing API through the compiled binary: on Pro a session with ttl 1 is gone after a real
 * wait (404, token ignored); sessions and overrides survive a restart (evaluated with the header
 * before and after), and the start-up sweep removes expired rows; on CE the token is the id and
 * the batch endpoint is refused.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const T = 60_000;
const ADMIN_KEY = `svc_admin_${"tst".repeat(12)}`;

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = (srv: RunningBinary, method: string, path: string, key: string, body?: unknown, session?: string) =>
  callServer(srv.url, method, path, { key, body, headers: session === undefined ? {} : { "x-service-session": session } }).then(
    // Status and body only: the tests compare whole answers.
    ({ status, body }) => ({ status, body }),
  );

/** A first start: a test key and an eval key of `default`/development, and an enabled flag `checkout`. */
async function prepare(srv: RunningBinary) {
  const key = async (scope: string) => {
    const res = await call(srv, "POST", "/v1/projects/default/api-keys", ADMIN_KEY, { name: scope, scope, environment: "development" });
    expect(res.status).toBe(201);
    return res.body.key as string;
  };
  expect((await call(srv, "POST", "/v1/projects/default/flags", ADMIN_KEY, { key: "checkout", name: "Checkout" })).status).toBe(201);
  expect((await call(srv, "PUT", "/v1/projects/default/flags/checkout/states/development", ADMIN_KEY, { enabled: true })).status).toBe(200);
  return { testKey: await key("test"), evalKey: await key("eval") };
}

test("Pro: a ttl-1 session is gone after a real wait; sessions and overrides survive a restart; the start-up sweep removes expired rows", async () => {
  const cwd = tempDir();
  const env = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_EDITION: "pro" };
  let srv = await startBinary({ cwd, env });
  let keys: { testKey: string; evalKey: string };
  let kept: Record<string, any>;
  let short: Record<string, any>;
  const reason = async (token?: string) => (await call(srv, "POST", "/v1/evaluate", keys.evalKey, { flagKey: "checkout" }, token)).body.reason;
  try {
    keys = await prepare(srv);
    const created = await call(srv, "POST", "/v1/testing/sessions", keys.testKey, { projectId: "default", ttl: 1, label: "short" });
    expect(created.status).toBe(201);
    short = created.body;
    expect(short.token).toMatch(/^svc_sess_/);
    expect(Date.parse(short.expiresAt) - Date.parse(short.createdAt)).toBe(1000);
    kept = (await call(srv, "POST", "/v1/testing/sessions", keys.testKey, { projectId: "default", label: "kept" })).body;
    expect((await call(srv, "PUT", `/v1/testing/sessions/${short.id}/overrides/checkout`, keys.testKey, { value: false })).status).toBe(200);
    const batch = await call(srv, "PUT", `/v1/testing/sessions/${kept.id}/overrides/batch`, keys.testKey, { overrides: { checkout: false, ghost: "neon" } });
    expect(batch).toEqual({ status: 200, body: { id: kept.id, overrides: { checkout: false, ghost: "neon" } } });
    expect(await reason(short.token)).toBe("TEST_OVERRIDE");
    expect(await reason()).toBe("FLAG_ENABLED");

    await Bun.sleep(Math.max(0, Date.parse(short.expiresAt) - Date.now()) + 1000);
    expect((await call(srv, "GET", `/v1/testing/sessions/${short.id}`, keys.testKey)).status).toBe(404);
    expect(await reason(short.token)).toBe("FLAG_ENABLED");
    expect(await reason(kept.token)).toBe("TEST_OVERRIDE");
  } finally {
    expect(await srv.stop()).toBe(0);
  }
  // Stopped: both rows are still on disk (the hourly sweep has not run).
  const rows = () => {
    const db = new Database(join(cwd, "data", "flagsvc.db"), { readonly: true });
    try {
      return (db.query("SELECT id FROM test_sessions ORDER BY id").all() as { id: string }[]).map((r) => r.id);
    } finally {
      db.close();
    }
  };
  expect(rows()).toEqual([kept.id, short.id].sort());

  srv = await startBinary({ cwd, env });
  try {
    expect((await call(srv, "GET", `/v1/testing/sessions/${kept.id}`, keys.testKey)).body).toEqual({ ...kept, overrides: { checkout: false, ghost: "neon" } });
    expect(await reason(kept.token)).toBe("TEST_OVERRIDE");
    const ghost = await call(srv, "POST", "/v1/evaluate/batch", keys.evalKey, { flags: ["checkout", "ghost"] }, kept.token);
    expect([ghost.body.results.checkout.reason, ghost.body.results.ghost.variant]).toEqual(["TEST_OVERRIDE", "neon"]);
    expect(await reason(short.token)).toBe("FLAG_ENABLED");
    expect(await reason()).toBe("FLAG_ENABLED");
    expect((await call(srv, "GET", `/v1/testing/sessions/${short.id}`, keys.testKey)).status).toBe(404);
  } finally {
    expect(await srv.stop()).toBe(0);
  }
  expect(rows()).toEqual([kept.id]);
}, T);

test("CE: the token is the id, batch is refused, and a restart keeps the session and its overrides", async () => {
  const cwd = tempDir();
  const env = { SVC_ADMIN_KEY: ADMIN_KEY };
  let srv = await startBinary({ cwd, env });
  let keys: { testKey: string; evalKey: string };
  let session: Record<string, any>;
  try {
    keys = await prepare(srv);
    session = (await call(srv, "POST", "/v1/testing/sessions", keys.testKey, { projectId: "default", ttl: 5 })).body;
    expect(session.token).toBe(session.id);
    expect(Date.parse(session.expiresAt) - Date.parse(session.createdAt)).toBe(3_600_000);
    expect(await call(srv, "PUT", `/v1/testing/sessions/${session.id}/overrides/batch`, keys.testKey, { overrides: { checkout: false } })).toEqual({
      status: 403,
      body: { error: "PRO_EDITION_REQUIRED", message: "This endpoint requires the Pro edition" },
    });
    expect((await call(srv, "PUT", `/v1/testing/sessions/${session.id}/overrides/checkout`, keys.testKey, { value: false })).status).toBe(200);
    expect((await call(srv, "POST", "/v1/evaluate", keys.evalKey, { flagKey: "checkout" }, session.token)).body.reason).toBe("TEST_OVERRIDE");
  } finally {
    expect(await srv.stop()).toBe(0);
  }
  srv = await startBinary({ cwd, env });
  try {
    expect((await call(srv, "GET", `/v1/testing/sessions/${session.id}`, keys.testKey)).body.overrides).toEqual({ checkout: false });
    expect((await call(srv, "POST", "/v1/evaluate", keys.evalKey, { flagKey: "checkout" }, session.token)).body).toMatchObject({ enabled: false, reason: "TEST_OVERRIDE", ruleId: null });
    expect((await call(srv, "DELETE", `/v1/testing/sessions/${session.id}`, keys.testKey)).status).toBe(204);
    expect((await call(srv, "POST", "/v1/evaluate", keys.evalKey, { flagKey: "checkout" }, session.token)).body.reason).toBe("FLAG_ENABLED");
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);
