/**
 * Flags and evaluation through the compiled binary: create, enable, evaluate, roll out,
 * delete, evaluate again; then a restart serves the same results from the rebuilt snapshot.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const T = 60_000;
const ADMIN_KEY = `svc_admin_${"e2e".repeat(12)}`;
const BASE = "/v1/projects/default/flags";

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = (srv: RunningBinary, method: string, path: string, key: string, body?: unknown) => callServer(srv.url, method, path, { key, body });

const USERS = Array.from({ length: 200 }, (_, i) => `user-${i}`);

/** The decisions for every test user, without the timestamps. */
async function decisions(srv: RunningBinary, key: string) {
  const out: unknown[] = [];
  for (const userId of USERS) {
    const res = await call(srv, "POST", "/v1/evaluate/batch", key, { flags: ["checkout", "button", "gone"], context: { userId, plan: userId.endsWith("7") ? "beta" : "free" } });
    expect(res.status).toBe(200);
    for (const r of Object.values(res.body.results as Record<string, { evaluatedAt?: string }>)) delete r.evaluatedAt;
    out.push(res.body.results);
  }
  return out;
}

test("create, enable, evaluate, roll out, delete, evaluate again; a restart gives the same results", async () => {
  const cwd = tempDir();
  const env = { SVC_ADMIN_KEY: ADMIN_KEY };
  let srv = await startBinary({ cwd, env });
  let evalKey: string;
  let before: unknown[];
  try {
    const created = await call(srv, "POST", "/v1/projects/default/api-keys", ADMIN_KEY, { name: "sdk", scope: "eval", environment: "production" });
    expect(created.status).toBe(201);
    evalKey = created.body.key;
    const evaluate = async (flagKey: string, context: Record<string, unknown> = { userId: "user-1" }) => {
      const res = await call(srv, "POST", "/v1/evaluate", evalKey, { flagKey, context });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
      expect(res.headers.get("x-request-id")).toBeTruthy();
      return res.body;
    };

    expect((await call(srv, "POST", BASE, ADMIN_KEY, { key: "checkout", name: "Checkout", rules: [{ name: "beta", conditions: [{ attribute: "plan", operator: "equals", value: "beta" }] }] })).status).toBe(201);
    expect(await evaluate("checkout")).toMatchObject({ flagKey: "checkout", enabled: false, variant: null, reason: "FLAG_DISABLED", ruleId: null });

    expect((await call(srv, "PUT", `${BASE}/checkout/states/production`, ADMIN_KEY, { enabled: true })).status).toBe(200);
    expect(await evaluate("checkout")).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
    const matched = await evaluate("checkout", { userId: "user-1", plan: "beta" });
    expect(matched).toMatchObject({ enabled: true, reason: "TARGETING_RULE_MATCH", ruleId: expect.stringMatching(/^rule_/) });

    expect((await call(srv, "PUT", `${BASE}/checkout/states/production`, ADMIN_KEY, { enabled: true, rolloutPercentage: 50 })).status).toBe(200);
    const reasons = new Set<string>();
    for (const userId of USERS) reasons.add((await evaluate("checkout", { userId })).reason);
    expect([...reasons].sort()).toEqual(["PERCENTAGE_ROLLOUT", "PERCENTAGE_ROLLOUT_EXCLUDED"]);

    const button = await call(srv, "POST", BASE, ADMIN_KEY, { key: "button", name: "Button", variants: [{ key: "blue", weight: 30 }, { key: "green", weight: 70 }] });
    expect(button.status).toBe(201);
    expect((await call(srv, "PUT", `${BASE}/button/states/production`, ADMIN_KEY, { enabled: true })).status).toBe(200);
    expect(["blue", "green"]).toContain((await evaluate("button")).variant);

    expect((await call(srv, "POST", BASE, ADMIN_KEY, { key: "gone", name: "Gone" })).status).toBe(201);
    expect((await call(srv, "PUT", `${BASE}/gone/states/production`, ADMIN_KEY, { enabled: true })).status).toBe(200);
    expect((await evaluate("gone")).reason).toBe("FLAG_ENABLED");
    expect((await call(srv, "DELETE", `${BASE}/gone`, ADMIN_KEY)).status).toBe(204);
    expect(await evaluate("gone")).toMatchObject({ enabled: false, reason: "FLAG_NOT_FOUND", variant: null, ruleId: null });

    before = await decisions(srv, evalKey);
  } finally {
    expect(await srv.stop()).toBe(0);
  }

  srv = await startBinary({ cwd, env });
  try {
    expect(await decisions(srv, evalKey)).toEqual(before);
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);

test("query values are checked as in development: out of range is a 400 naming the query field; Elysia reads the hooks", async () => {
  // A minifier that renames classes once let `perPage=101` through as a string (Elysia knows
  // TypeBox's decode error by its class name), caught only by the response schema.
  const srv = await startBinary({ cwd: tempDir(), env: { SVC_ADMIN_KEY: ADMIN_KEY } });
  try {
    const cases: [string, string, string][] = [
      ["perPage=101", "query.perPage", "Must be an integer from 1 to 100"],
      ["page=0", "query.page", "Must be an integer from 1 to 999999999"],
      ["environment=production&enabled=1", "query.enabled", "Must be true or false"],
    ];
    for (const [query, path, message] of cases) {
      const res = await call(srv, "GET", `${BASE}?${query}`, ADMIN_KEY);
      expect({ query, status: res.status, body: res.body }).toEqual({ query, status: 400, body: { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path, message }] } });
    }
    const listed = await call(srv, "GET", `${BASE}?page=2&perPage=5`, ADMIN_KEY);
    expect(listed.body).toEqual({ flags: [], total: 0, page: 2, perPage: 5 });
    // Elysia reads the guard's source; a form it misreads makes it warn (and prepare everything).
    expect(srv.output()).not.toContain("[Sucrose]");
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);
