/**
 * Evaluation over HTTP (api-spec: Evaluation; decisions §7), through the server's dispatch:
 * `h.request` reaches the native handlers (src/http/native.ts) exactly as Bun's router does in
 * the binary, and a parity test holds them to their Elysia twins. Flags are written through
 * the flags API over a real database; the snapshot those writes update is what is evaluated.
 */
import { afterAll, afterEach, beforeEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { loadConfig } from "../../src/config";
import { bucketOf, variantBucketOf } from "../../src/evaluation/engine";
import type { Override } from "../../src/evaluation/types";
import { MESSAGES } from "../../src/http/access";
import { MAX_BODY_BYTES } from "../../src/http/errors";
import { createLogger } from "../../src/lib/log";
import type { OverrideSource } from "../../src/evaluation/types";
import { startServer, type App, type Services } from "../../src/server";
import { Elysia } from "elysia";
import { accessGuard } from "../../src/http/auth";
import { BatchRequest, EvaluateRequest } from "../../src/modules/evaluation/model";
import { bearer, seedAdminKey, seedApiKey, tempDir, tick, testApp, type TestApp, userToken, endlessBody } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;
/** The Elysia app behind the dispatch: `base.handle` takes the twin routes. */
let base: App;

/**
 * The evaluation routes declared the ordinary way, through the pipeline and the access guard, at
 * `/twin/...`: what the native handlers must answer like (the hot routes' own twins are never run).
 */
function withTwins(app: App, services: () => Services): App {
  const env = <T,>(result: T, principal: { kind: string; environmentSlug?: string }, set: { headers: Record<string, unknown> }): T => {
    if (principal.kind === "apiKey") set.headers["x-flagsvc-environment"] = principal.environmentSlug;
    return result;
  };
  app.use(
    new Elysia()
      .use(accessGuard())
      .post("/twin/v1/evaluate", ({ principal, body, request, set }) => env(services().evaluation.evaluateOne(principal, body, request.headers.get("x-service-session")), principal, set), {
        access: "evaluate",
        body: EvaluateRequest,
      })
      .post("/twin/v1/evaluate/batch", ({ principal, body, request, set }) => env(services().evaluation.evaluateBatch(principal, body, request.headers.get("x-service-session")), principal, set), {
        access: "evaluate",
        body: BatchRequest,
      }),
  );
  return app;
}

beforeEach(async () => {
  h = await testApp({}, (app) => (base = withTwins(app, () => h.services)));
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
});
afterEach(() => h.close());

const NOW = "2026-11-22T10:00:00.000Z";
/** The `details` entry of the 401 for a request without an Authorization header. */
const MISSING_HEADER = { path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" };
const MGMT_SCOPE = { path: "headers.authorization", message: "This key has scope mgmt; this endpoint takes a key of scope eval, test, full or client" };
const NO_BEARER = { path: "headers.authorization", message: 'Expected "Authorization: Bearer <key>"; the header holds a key without the Bearer prefix' };
const RESULT_FIELDS = ["enabled", "evaluatedAt", "flagKey", "reason", "ruleId", "variant"];

async function json(res: Response, status: number) {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  expect(res.headers.get("content-type")).toBe("application/json;charset=utf-8");
  return JSON.parse(text) as Record<string, any>;
}

async function createFlag(body: Record<string, unknown>, slug = "default") {
  return json(await h.request("POST", `/v1/projects/${slug}/flags`, { body: { name: String(body.key), ...body }, headers: admin }), 201);
}

async function setState(key: string, state: { enabled: boolean; rolloutPercentage?: number | null }, environment = "development", slug = "default") {
  return json(await h.request("PUT", `/v1/projects/${slug}/flags/${key}/states/${environment}`, { body: state, headers: admin }), 200);
}

const evaluate = (body: unknown, headers: Record<string, string> = evalKey) => h.request("POST", "/v1/evaluate", { body, headers });
const batch = (body: unknown, headers: Record<string, string> = evalKey) => h.request("POST", "/v1/evaluate/batch", { body, headers });
const result = async (flagKey: string, context?: Record<string, unknown>, headers?: Record<string, string>) =>
  json(await evaluate(context === undefined ? { flagKey } : { flagKey, context }, headers), 200);

/** A user id whose rollout bucket for `flagKey` is under (or not under) `percent`. */
function userFor(flagKey: string, percent: number, included: boolean): string {
  for (let i = 0; ; i++) {
    const id = `user-${i}`;
    if (bucketOf(flagKey, id) < percent * 1000 === included) return id;
  }
}


function plugOverrides(source: OverrideSource) {
  h.services.evaluation.overrides = source;
}

/**
 * Every response header with its value, sorted; X-RateLimit-Remaining by name only (the native
 * and the twin request are counted one after the other by the same limiter).
 */
function headerNames(res: Response): string[] {
  const entries: string[] = [];
  res.headers.forEach((value, name) => entries.push(name === "x-ratelimit-remaining" ? name : `${name}: ${value}`));
  return entries.sort();
}

const projectId = async () => (await h.ctx.stores.projects.bySlug("default"))!.id;

describe("single evaluation", () => {
  test("concurrent answers each carry their own request id and remaining count (one Headers reused)", async () => {
    await createFlag({ key: "concurrent" });
    const ids = Array.from({ length: 8 }, (_, i) => `eval-${i}`);
    const answers = await Promise.all(ids.map((id, i) => evaluate(i % 3 === 2 ? { flagKey: 7 } : { flagKey: "concurrent" }, { ...evalKey, "x-request-id": id })));
    expect(answers.map((r) => r.headers.get("x-request-id"))).toEqual(ids);
    expect(answers.map((r) => r.status)).toEqual(ids.map((_, i) => (i % 3 === 2 ? 400 : 200)));
    expect(new Set(answers.map((r) => r.headers.get("x-ratelimit-remaining"))).size).toBe(ids.length);
    for (const r of answers) expect(r.headers.get("content-type")).toBe("application/json;charset=utf-8");
  });

  test("an enabled boolean flag: 200 with exactly the result fields; FLAG_ENABLED", async () => {
    await createFlag({ key: "new-checkout" });
    await setState("new-checkout", { enabled: true });
    const res = await evaluate({ flagKey: "new-checkout", context: { userId: "u1" } });
    const body = await json(res, 200);
    expect(Object.keys(body).sort()).toEqual(RESULT_FIELDS);
    expect(body).toEqual({ flagKey: "new-checkout", enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: NOW });
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  test("evaluatedAt is the clock's time, ISO 8601 UTC with milliseconds, and follows it", async () => {
    expect((await result("anything")).evaluatedAt).toBe(NOW);
    h.clock.advance(1234);
    expect((await result("anything")).evaluatedAt).toBe("2026-11-22T10:00:01.234Z");
    h.clock.advance(1);
    expect((await result("anything")).evaluatedAt).toBe("2026-11-22T10:00:01.235Z");
  });

  test("an unknown flag key is not an error: 200, FLAG_NOT_FOUND", async () => {
    expect(await result("no-such-flag")).toEqual({ flagKey: "no-such-flag", enabled: false, variant: null, reason: "FLAG_NOT_FOUND", ruleId: null, evaluatedAt: NOW });
    // Not even a valid flag key: still only not found.
    expect((await result("Not A Key!")).reason).toBe("FLAG_NOT_FOUND");
  });

  test("FLAG_DISABLED: no state row in the environment, or a state with enabled false; rules are not consulted", async () => {
    await createFlag({ key: "dark", rules: [{ conditions: [] }] });
    expect(await result("dark")).toMatchObject({ enabled: false, variant: null, reason: "FLAG_DISABLED", ruleId: null });
    await setState("dark", { enabled: false, rolloutPercentage: 100 });
    expect(await result("dark", { userId: "u" })).toMatchObject({ enabled: false, reason: "FLAG_DISABLED", ruleId: null });
  });

  test("TARGETING_RULE_MATCH with the matching rule's id; the first match wins; no match falls through", async () => {
    const flag = await createFlag({
      key: "beta",
      rules: [
        { name: "fr", conditions: [{ attribute: "country", operator: "equals", value: "FR" }] },
        { name: "staff", conditions: [{ attribute: "email", operator: "contains", value: "@example.com" }, { attribute: "age", operator: "greater_than", value: 17 }] },
        { name: "off", enabled: false, conditions: [] },
      ],
    });
    await setState("beta", { enabled: true, rolloutPercentage: 0 });
    const [fr, staff] = flag.rules;
    expect(fr.id).toMatch(/^rule_/);
    expect(await result("beta", { country: "FR" })).toMatchObject({ enabled: true, reason: "TARGETING_RULE_MATCH", ruleId: fr.id, variant: null });
    expect(await result("beta", { country: "FR", email: "a@example.com", age: 30 })).toMatchObject({ ruleId: fr.id });
    expect(await result("beta", { email: "a@example.com", age: 30 })).toMatchObject({ reason: "TARGETING_RULE_MATCH", ruleId: staff.id });
    // AND: one condition false; no coercion: "30" is not a number.
    expect(await result("beta", { email: "a@example.com", age: 10 })).toMatchObject({ reason: "PERCENTAGE_ROLLOUT_EXCLUDED", ruleId: null });
    expect(await result("beta", { email: "a@example.com", age: "30" })).toMatchObject({ reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
    // The disabled rule (matches everyone) is skipped.
    expect(await result("beta", {})).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
  });

  test("PERCENTAGE_ROLLOUT and PERCENTAGE_ROLLOUT_EXCLUDED by the userId's bucket; without userId only 100 % includes", async () => {
    await createFlag({ key: "gradual" });
    await setState("gradual", { enabled: true, rolloutPercentage: 30 });
    const inside = userFor("gradual", 30, true);
    const outside = userFor("gradual", 30, false);
    expect(await result("gradual", { userId: inside })).toMatchObject({ enabled: true, reason: "PERCENTAGE_ROLLOUT", variant: null, ruleId: null });
    expect(await result("gradual", { userId: outside })).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED", variant: null });
    for (const context of [undefined, {}, { userId: null }, { userId: "" }]) {
      expect(await result("gradual", context)).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
    }
    await setState("gradual", { enabled: true, rolloutPercentage: 100 });
    expect(await result("gradual")).toMatchObject({ enabled: true, reason: "PERCENTAGE_ROLLOUT" });
    // A numeric userId buckets as its decimal string.
    await setState("gradual", { enabled: true, rolloutPercentage: 50 });
    const numeric = [...Array(200).keys()].find((n) => bucketOf("gradual", String(n)) < 50_000)!;
    expect(await result("gradual", { userId: numeric })).toMatchObject({ reason: "PERCENTAGE_ROLLOUT" });
  });

  test("variants: a rule's variant, a weighted pick otherwise, the first without weights, null when off", async () => {
    await createFlag({
      key: "theme",
      variants: [
        { key: "light", weight: 50 },
        { key: "dark", weight: 50 },
      ],
      rules: [{ conditions: [{ attribute: "plan", operator: "in", value: ["pro", "team"] }], variant: "dark" }],
    });
    await setState("theme", { enabled: true });
    expect(await result("theme", { plan: "team", userId: "x" })).toMatchObject({ enabled: true, variant: "dark", reason: "TARGETING_RULE_MATCH" });
    for (const userId of ["u-1", "u-2", "u-3", "u-4"]) {
      const expected = variantBucketOf("theme", userId) < 50_000 ? "light" : "dark";
      expect(await result("theme", { userId })).toMatchObject({ enabled: true, variant: expected, reason: "FLAG_ENABLED" });
    }
    expect(await result("theme")).toMatchObject({ variant: "light" });

    await createFlag({ key: "plain", variants: [{ key: "one" }, { key: "two" }] });
    await setState("plain", { enabled: true });
    expect(await result("plain", { userId: "anyone" })).toMatchObject({ variant: "one", reason: "FLAG_ENABLED" });
    await setState("plain", { enabled: false });
    expect(await result("plain", { userId: "anyone" })).toMatchObject({ variant: null, reason: "FLAG_DISABLED" });
  });

  test("context values: strings, numbers, booleans, null and arrays of those are accepted", async () => {
    await createFlag({ key: "ctx", rules: [{ conditions: [{ attribute: "tags", operator: "contains", value: "vip" }] }] });
    await setState("ctx", { enabled: true, rolloutPercentage: 0 });
    const context = { userId: "u", age: 3.5, beta: false, nothing: null, tags: ["a", "vip"], mixed: [1, "x", true, null], empty: [] };
    expect(await result("ctx", context)).toMatchObject({ reason: "TARGETING_RULE_MATCH" });
  });
});

describe("test-session overrides (resolution step 1)", () => {
  const overrides = new Map<string, Override>([
    ["kill-switch", false],
    ["theme", "neon"],
    ["ghost", true],
  ]);
  let calls: { token: string; projectId: string; now: number }[];
  beforeEach(async () => {
    calls = [];
    const live = await projectId();
    plugOverrides({
      overridesFor(token, project, now) {
        calls.push({ token, projectId: project, now });
        return token === "sess_live" && project === live ? overrides : undefined;
      },
    });
  });

  test("a live session's override wins over everything, with TEST_OVERRIDE; even for a key that does not exist", async () => {
    await createFlag({ key: "kill-switch", rules: [{ conditions: [] }] });
    await setState("kill-switch", { enabled: true });
    await createFlag({ key: "theme", variants: [{ key: "light" }, { key: "dark" }] });
    const session = { ...evalKey, "x-service-session": "sess_live" };
    expect(await result("kill-switch", {}, session)).toEqual({ flagKey: "kill-switch", enabled: false, variant: null, reason: "TEST_OVERRIDE", ruleId: null, evaluatedAt: NOW });
    // A string override serves that variant, enabled, though the flag is disabled here.
    expect(await result("theme", {}, session)).toMatchObject({ enabled: true, variant: "neon", reason: "TEST_OVERRIDE" });
    expect(await result("ghost", {}, session)).toMatchObject({ enabled: true, variant: null, reason: "TEST_OVERRIDE" });
    // A flag the session does not override resolves normally.
    expect(await result("other", {}, session)).toMatchObject({ reason: "FLAG_NOT_FOUND" });
    expect(calls.at(-1)).toEqual({ token: "sess_live", projectId: (await projectId()), now: h.clock.now() });
  });

  test("without the header, with an empty one, or with a token the source does not know: no override", async () => {
    await createFlag({ key: "kill-switch" });
    await setState("kill-switch", { enabled: true });
    expect((await result("kill-switch")).reason).toBe("FLAG_ENABLED");
    expect((await result("kill-switch", {}, { ...evalKey, "x-service-session": "" })).reason).toBe("FLAG_ENABLED");
    expect(calls).toEqual([]);
    expect((await result("kill-switch", {}, { ...evalKey, "x-service-session": "sess_unknown" })).reason).toBe("FLAG_ENABLED");
    expect(calls).toHaveLength(1);
  });

  test("batch: overrides apply per key", async () => {
    await createFlag({ key: "kill-switch" });
    await setState("kill-switch", { enabled: true });
    const body = await json(await batch({ flags: ["kill-switch", "ghost", "nope"] }, { ...evalKey, "x-service-session": "sess_live" }), 200);
    expect(body.results["kill-switch"]).toMatchObject({ enabled: false, reason: "TEST_OVERRIDE" });
    expect(body.results.ghost).toMatchObject({ enabled: true, reason: "TEST_OVERRIDE" });
    expect(body.results.nope).toMatchObject({ reason: "FLAG_NOT_FOUND" });
    expect(calls).toHaveLength(1);
  });
});

describe("batch", () => {
  test("one result per distinct key, all with the batch's evaluatedAt; duplicates collapse", async () => {
    await createFlag({ key: "a" });
    await setState("a", { enabled: true });
    await createFlag({ key: "b" });
    const res = await batch({ flags: ["a", "b", "a", "missing", "b"], context: { userId: "u1" } });
    const body = await json(res, 200);
    expect(Object.keys(body).sort()).toEqual(["evaluatedAt", "results"]);
    expect(body.evaluatedAt).toBe(NOW);
    expect(Object.keys(body.results).sort()).toEqual(["a", "b", "missing"]);
    expect(body.results.a).toEqual({ flagKey: "a", enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: NOW });
    expect(body.results.b).toMatchObject({ flagKey: "b", enabled: false, reason: "FLAG_DISABLED" });
    expect(body.results.missing).toMatchObject({ flagKey: "missing", reason: "FLAG_NOT_FOUND" });
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
  });

  test("the context applies to every flag", async () => {
    await createFlag({ key: "r1", rules: [{ conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] });
    await createFlag({ key: "r2", rules: [{ conditions: [{ attribute: "plan", operator: "not_equals", value: "pro" }] }] });
    await setState("r1", { enabled: true, rolloutPercentage: 0 });
    await setState("r2", { enabled: true, rolloutPercentage: 0 });
    const { results } = await json(await batch({ flags: ["r1", "r2"], context: { plan: "pro" } }), 200);
    expect(results.r1.reason).toBe("TARGETING_RULE_MATCH");
    expect(results.r2.reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
  });

  test("keys that are Object.prototype names are ordinary entries", async () => {
    const { results } = await json(await batch({ flags: ["__proto__", "constructor", "toString"] }), 200);
    expect(Object.keys(results).sort()).toEqual(["__proto__", "constructor", "toString"]);
    expect(results["__proto__"]).toMatchObject({ flagKey: "__proto__", reason: "FLAG_NOT_FOUND" });
  });

  test("50 keys are fine; 51 are a 400 even when they repeat; none is a 400", async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => `flag-${i}`);
    expect(Object.keys((await json(await batch({ flags: fifty }), 200)).results)).toHaveLength(50);
    for (const flags of [[...fifty, "flag-51"], Array.from({ length: 51 }, () => "same")]) {
      const body = await json(await batch({ flags }), 400);
      expect(body).toEqual({ error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path: "body.flags", message: "Must be an array of 1 to 50 flag keys" }] });
    }
    expect((await json(await batch({ flags: [] }), 400)).details).toEqual([{ path: "body.flags", message: "Must be an array of 1 to 50 flag keys" }]);
  });

  test("bad flags: not an array, a non-string or empty entry, missing", async () => {
    const cases: [unknown, { path: string; message: string }[]][] = [
      [{ flags: "a" }, [{ path: "body.flags", message: "Must be an array of 1 to 50 flag keys" }]],
      [{ flags: ["a", 7] }, [{ path: "body.flags[1]", message: "Must be a non-empty string" }]],
      [{ flags: ["a", ""] }, [{ path: "body.flags[1]", message: "Must be a non-empty string" }]],
      [{ flags: ["a", null, {}] }, [{ path: "body.flags[1]", message: "Must be a non-empty string" }, { path: "body.flags[2]", message: "Must be a non-empty string" }]],
      [{}, [{ path: "body.flags", message: "Must be an array of 1 to 50 flag keys" }]],
      [{ flags: ["a"], flag: ["b"] }, [{ path: "body.flag", message: "Unknown field" }]],
    ];
    for (const [input, details] of cases) {
      expect({ input, body: await json(await batch(input), 400) }).toEqual({ input, body: { error: "VALIDATION_ERROR", message: "Invalid request", details } });
    }
  });
});

describe("validation", () => {
  const CONTEXT_VALUE = "Must be a string, number, boolean, null, or an array of those";
  const cases: [string, unknown, { path: string; message: string }[]][] = [
    ["unknown field", { flagKey: "a", contxt: {} }, [{ path: "body.contxt", message: "Unknown field" }]],
    ["missing flagKey", { context: {} }, [{ path: "body.flagKey", message: "Must be a non-empty string" }]],
    ["empty flagKey", { flagKey: "" }, [{ path: "body.flagKey", message: "Must be a non-empty string" }]],
    ["flagKey not a string", { flagKey: 12 }, [{ path: "body.flagKey", message: "Must be a non-empty string" }]],
    ["context value an object", { flagKey: "a", context: { plan: { tier: 1 } } }, [{ path: "body.context.plan", message: CONTEXT_VALUE }]],
    ["context value an array of objects", { flagKey: "a", context: { tags: [{}] } }, [{ path: "body.context.tags", message: CONTEXT_VALUE }]],
    ["context value a nested array", { flagKey: "a", context: { tags: [["x"]] } }, [{ path: "body.context.tags", message: CONTEXT_VALUE }]],
    ["context key holding a newline", { flagKey: "a", context: { "a\nb": { x: 1 } } }, [{ path: "body.context.a\nb", message: CONTEXT_VALUE }]],
    ["context an array", { flagKey: "a", context: ["x"] }, [{ path: "body.context", message: "Must be an object whose values are strings, numbers, booleans, null, or arrays of those" }]],
    ["context null", { flagKey: "a", context: null }, [{ path: "body.context", message: "Must be an object whose values are strings, numbers, booleans, null, or arrays of those" }]],
    ["body an array", [{ flagKey: "a" }], [{ path: "body", message: "Expected object" }]],
    ["body a string", '"a"', [{ path: "body", message: "Expected object" }]],
  ];
  for (const [name, input, details] of cases) {
    test(`${name}: 400 with details`, async () => {
      expect(await json(await evaluate(input), 400)).toEqual({ error: "VALIDATION_ERROR", message: "Invalid request", details });
    });
  }

  test('"environment" in the body: 400 that says the API key chooses the environment, on both routes and on the Elysia twin', async () => {
    const detail = { path: "body.environment", message: "Unknown field: the API key chooses the environment (each key belongs to one environment)" };
    const expected = { error: "VALIDATION_ERROR", message: "Invalid request", details: [detail] };
    expect(await json(await evaluate({ flagKey: "a", environment: "production" }), 400)).toEqual(expected);
    expect(await json(await batch({ flags: ["a"], environment: "production" }), 400)).toEqual(expected);
    // The app's own route (the API document's twin) says the same; other unknown fields stay plain.
    const twin = await base.handle(new Request("http://localhost/v1/evaluate", { method: "POST", headers: { "content-type": "application/json", ...evalKey }, body: JSON.stringify({ flagKey: "a", environment: "production", env: 1 }) }));
    expect((await json(twin, 400)).details).toEqual([detail, { path: "body.env", message: "Unknown field" }]);
  });

  test("several problems are all reported", async () => {
    const body = await json(await evaluate({ flagKey: "", context: { a: {} }, extra: 1 }), 400);
    expect(body.details.map((d: { path: string }) => d.path).sort()).toEqual(["body.context.a", "body.extra", "body.flagKey"]);
  });

  test("malformed JSON, a non-JSON content type, an empty body", async () => {
    expect(await json(await evaluate('{"flagKey": "a",'), 400)).toEqual({ error: "VALIDATION_ERROR", message: "Request body is not valid JSON", details: [{ path: "body", message: "Not valid JSON" }] });
    const form = await evaluate("flagKey=a", { ...evalKey, "content-type": "application/x-www-form-urlencoded" });
    expect(await json(form, 400)).toEqual({ error: "VALIDATION_ERROR", message: "Content-Type must be application/json", details: [{ path: "headers.content-type", message: "Must be application/json" }] });
    const none = await h.request("POST", "/v1/evaluate", { headers: evalKey });
    expect(await json(none, 400)).toMatchObject({ error: "VALIDATION_ERROR", details: [{ path: "body" }] });
    // JSON with parameters or a +json type is JSON.
    for (const type of ["application/json; charset=utf-8", "application/vnd.flagsvc+json"]) {
      expect((await json(await evaluate({ flagKey: "a" }, { ...evalKey, "content-type": type }), 200)).reason).toBe("FLAG_NOT_FOUND");
    }
  });

  test("a body that is not JSON is judged after the caller: 401 without a key, 403 for a key of another scope", async () => {
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    for (const send of [evaluate, batch]) {
      expect(await json(await send('{"flagKey": "a",', {}), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired API key", details: [MISSING_HEADER] });
      expect(await json(await send("[1]", mgmt), 403)).toEqual({ error: "FORBIDDEN", message: "This key scope does not have access to this endpoint", details: [MGMT_SCOPE] });
      expect((await json(await send("{not json", evalKey), 400)).message).toBe("Request body is not valid JSON");
    }
  });

  test("over 1 MiB: 413 by Content-Length, and while reading a chunked body", async () => {
    const big = JSON.stringify({ flagKey: "a", context: { pad: "x".repeat(MAX_BODY_BYTES) } });
    const res = await evaluate(big);
    expect(await json(res, 413)).toEqual({ error: "PAYLOAD_TOO_LARGE", message: `Request body exceeds ${MAX_BODY_BYTES} bytes` });
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");

    const { stream, pulled } = endlessBody();
    const req = new Request("http://localhost/v1/evaluate", {
      method: "POST",
      headers: { "content-type": "application/json", ...evalKey },
      body: stream,
      // @ts-expect-error Bun supports duplex for streamed request bodies
      duplex: "half",
    });
    expect(req.headers.get("content-length")).toBeNull();
    expect((await json(await h.app.handle(req), 413)).error).toBe("PAYLOAD_TOO_LARGE");
    expect(pulled()).toBeLessThan(2 * MAX_BODY_BYTES);
  });

  test("a chunked body under the limit is read whole", async () => {
    const text = JSON.stringify({ flagKey: "chunked" });
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(text.slice(0, 5)));
        c.enqueue(new TextEncoder().encode(text.slice(5)));
        c.close();
      },
    });
    // @ts-expect-error Bun supports duplex for streamed request bodies
    const req = new Request("http://localhost/v1/evaluate", { method: "POST", headers: { "content-type": "application/json", ...evalKey }, body: stream, duplex: "half" });
    expect((await json(await h.app.handle(req), 200)).flagKey).toBe("chunked");
  });
});

describe("access", () => {
  test("eval, test and full keys evaluate", async () => {
    for (const scope of ["eval", "test", "full"] as const) {
      const headers = bearer((await seedApiKey(h.ctx, scope)).secret);
      expect((await json(await evaluate({ flagKey: "a" }, headers), 200)).reason).toBe("FLAG_NOT_FOUND");
      expect((await json(await batch({ flags: ["a"] }, headers), 200)).results.a.reason).toBe("FLAG_NOT_FOUND");
    }
  });

  test("mgmt key, admin key and login tokens: 403 with the exact messages; no or a bad key: 401", async () => {
    const takes = "Evaluation takes a project API key of scope eval, test, full or client";
    const cases: [Record<string, string>, number, string][] = [
      [admin, 403, takes],
      [await userToken(h.ctx, "admin"), 403, takes],
      [await userToken(h.ctx, "viewer"), 403, takes],
      [bearer("svc_sk_eval_unknownunknownunknownunknown12"), 401, "Invalid or expired API key"],
      [{ authorization: "Basic abc" }, 401, "Invalid or expired API key"],
      [bearer("a.b.c"), 401, "Invalid or expired token"],
    ];
    for (const [headers, status, message] of cases) {
      for (const res of [await evaluate({ flagKey: "a" }, headers), await batch({ flags: ["a"] }, headers)]) {
        expect(await json(res, status)).toEqual({ error: status === 401 ? "UNAUTHORIZED" : "FORBIDDEN", message });
        expect(res.headers.get("x-ratelimit-limit")).toBeTruthy();
      }
    }
    // No Authorization header at all: the spec's body, and what is missing.
    for (const res of [await evaluate({ flagKey: "a" }, {}), await batch({ flags: ["a"] }, {})]) {
      expect(await json(res, 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired API key", details: [MISSING_HEADER] });
      expect(res.headers.get("x-ratelimit-limit")).toBeTruthy();
    }
    // A key of another scope: the spec's message, and in details its scope and the scopes evaluation takes.
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    for (const res of [await evaluate({ flagKey: "a" }, mgmt), await batch({ flags: ["a"] }, mgmt)]) {
      expect(await json(res, 403)).toEqual({ error: "FORBIDDEN", message: MESSAGES.scope, details: [MGMT_SCOPE] });
    }
    // A valid eval key without `Bearer `: the spec's body, and what was expected.
    const bare = { authorization: (await seedApiKey(h.ctx, "eval")).secret };
    for (const res of [await evaluate({ flagKey: "a" }, bare), await batch({ flags: ["a"] }, bare)]) {
      expect(await json(res, 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired API key", details: [NO_BEARER] });
    }
    expect(MESSAGES.scope).toBe("This key scope does not have access to this endpoint");
  });

  test("401/403 come before body validation", async () => {
    expect((await evaluate({ flagKey: "", extra: 1 }, {})).status).toBe(401);
    expect((await evaluate({ flagKey: "" }, admin)).status).toBe(403);
    expect((await batch({ flags: [] }, bearer((await seedApiKey(h.ctx, "mgmt")).secret))).status).toBe(403);
  });

  test("a revoked key is refused at once", async () => {
    const key = await seedApiKey(h.ctx, "eval");
    expect((await evaluate({ flagKey: "a" }, bearer(key.secret))).status).toBe(200);
    expect((await h.request("DELETE", `/v1/api-keys/${key.id}`, { headers: admin })).status).toBe(204);
    expect((await evaluate({ flagKey: "a" }, bearer(key.secret))).status).toBe(401);
  });
});

describe("environments and projects come from the key", () => {
  test("a key of another environment sees that environment's state", async () => {
    await createFlag({ key: "launch" });
    await setState("launch", { enabled: true }, "development");
    await setState("launch", { enabled: true, rolloutPercentage: 0 }, "staging");
    const staging = bearer((await seedApiKey(h.ctx, "eval", "default", "staging")).secret);
    const production = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
    expect((await result("launch", { userId: "u" })).reason).toBe("FLAG_ENABLED");
    expect((await result("launch", { userId: "u" }, staging)).reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
    expect((await result("launch", { userId: "u" }, production)).reason).toBe("FLAG_DISABLED");
  });

  test("another project's flags are not visible: FLAG_NOT_FOUND", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    await createFlag({ key: "theirs" }, "other");
    await setState("theirs", { enabled: true }, "development", "other");
    expect((await result("theirs")).reason).toBe("FLAG_NOT_FOUND");
    const theirKey = bearer((await seedApiKey(h.ctx, "eval", "other")).secret);
    expect((await result("theirs", {}, theirKey)).reason).toBe("FLAG_ENABLED");
  });
});

describe("read-your-writes", () => {
  test("each write is visible to the very next evaluation", async () => {
    expect((await result("flip")).reason).toBe("FLAG_NOT_FOUND");
    await createFlag({ key: "flip" });
    expect((await result("flip")).reason).toBe("FLAG_DISABLED");
    await setState("flip", { enabled: true });
    expect((await result("flip")).reason).toBe("FLAG_ENABLED");
    await setState("flip", { enabled: true, rolloutPercentage: 0 });
    expect((await result("flip", { userId: "u" })).reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
    const patched = await json(
      await h.request("PATCH", "/v1/projects/default/flags/flip", { body: { rules: [{ conditions: [{ attribute: "userId", operator: "equals", value: "u" }] }] }, headers: admin }),
      200,
    );
    expect(await result("flip", { userId: "u" })).toMatchObject({ reason: "TARGETING_RULE_MATCH", ruleId: patched.rules[0].id });
    await setState("flip", { enabled: false });
    expect((await result("flip", { userId: "u" })).reason).toBe("FLAG_DISABLED");
    expect((await h.request("DELETE", "/v1/projects/default/flags/flip", { headers: admin })).status).toBe(204);
    expect((await result("flip")).reason).toBe("FLAG_NOT_FOUND");
  });
});

describe("rate limits", () => {
  test("X-RateLimit-* on 200s and on errors; the eval limit; 429 with Retry-After and retryAfter", async () => {
    const r = await testApp({ SVC_RATE_LIMITS: "eval:3" });
    try {
      const key = bearer((await seedApiKey(r.ctx, "eval")).secret);
      r.clock.ms = Date.parse("2026-11-22T10:00:30.000Z");
      const ok = await r.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: key });
      expect(ok.status).toBe(200);
      expect([ok.headers.get("x-ratelimit-limit"), ok.headers.get("x-ratelimit-remaining"), ok.headers.get("x-ratelimit-reset")]).toEqual([
        "3",
        "2",
        String(Date.parse("2026-11-22T10:01:00.000Z") / 1000),
      ]);
      const bad = await r.request("POST", "/v1/evaluate/batch", { body: { flags: [] }, headers: key });
      expect(bad.status).toBe(400);
      expect(bad.headers.get("x-ratelimit-remaining")).toBe("1");
      expect((await r.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: key })).status).toBe(200);
      const limited = await r.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: key });
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toBe("30");
      expect(limited.headers.get("x-ratelimit-remaining")).toBe("0");
      expect(limited.headers.get("x-request-id")).toBeTruthy();
      expect(await json(limited, 429)).toEqual({ error: "RATE_LIMITED", message: "Rate limit exceeded: 3 requests a minute; retry after 30 s", retryAfter: 30 });
      // The next window starts afresh.
      r.clock.ms = Date.parse("2026-11-22T10:01:00.000Z");
      expect((await r.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: key })).status).toBe(200);
    } finally {
      r.close();
    }
  });

  test("anonymous callers are limited per address, with headers", async () => {
    const res = await evaluate({ flagKey: "a" }, {});
    expect(res.status).toBe(401);
    expect(res.headers.get("x-ratelimit-limit")).toBe("300");
  });
});

describe("the pipeline's behaviour on the native path", () => {
  test("a sane X-Request-Id is kept, an insane one replaced", async () => {
    const kept = await evaluate({ flagKey: "a" }, { ...evalKey, "x-request-id": "eval-1.A_b:c" });
    expect(kept.headers.get("x-request-id")).toBe("eval-1.A_b:c");
    const replaced = await evaluate({ flagKey: "a" }, { ...evalKey, "x-request-id": "no spaces <please>" });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("one access-log line per request, at info; no credential, no session token", async () => {
    const secret = evalKey.authorization!.slice(7);
    await evaluate({ flagKey: "a" }, { ...evalKey, "x-request-id": "log-ok", "x-service-session": "sess_SECRETsecret" });
    await evaluate({ flagKey: "" }, { ...evalKey, "x-request-id": "log-bad" });
    await batch({ flags: ["a"] }, { "x-request-id": "log-anon" });
    await tick();
    const lines = h.logs().filter((l) => l.msg === "request");
    expect(lines.find((l) => l.requestId === "log-ok")).toMatchObject({ level: "info", method: "POST", path: "/v1/evaluate", status: 200, durationMs: expect.any(Number) });
    expect(lines.find((l) => l.requestId === "log-bad")).toMatchObject({ path: "/v1/evaluate", status: 400 });
    expect(lines.find((l) => l.requestId === "log-anon")).toMatchObject({ path: "/v1/evaluate/batch", status: 401 });
    expect(lines.filter((l) => String(l.requestId).startsWith("log-"))).toHaveLength(3);
    const all = JSON.stringify(h.logs());
    expect(all).not.toContain(secret);
    expect(all).not.toContain("SECRETsecret");
  });

  test("an unexpected failure: 500 INTERNAL_ERROR naming the request id, logged with it, nothing leaked", async () => {
    plugOverrides({
      overridesFor() {
        throw new Error("boom at /srv/internal.ts:1");
      },
    });
    const res = await evaluate({ flagKey: "a" }, { ...evalKey, "x-request-id": "crash-9", "x-service-session": "sess_x" });
    const text = await res.text();
    expect(res.status).toBe(500);
    expect(JSON.parse(text)).toEqual({ error: "INTERNAL_ERROR", message: "Internal error; request id crash-9" });
    expect(text).not.toContain("boom");
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
    await tick();
    const logged = h.logs().find((l) => l.msg === "unhandled error");
    expect(logged).toMatchObject({ requestId: "crash-9", method: "POST", path: "/v1/evaluate" });
    expect(String(logged!.error)).toContain("boom");
  });

  test("other methods: 405 with Allow: POST; a trailing slash is the same route", async () => {
    for (const path of ["/v1/evaluate", "/v1/evaluate/batch"]) {
      for (const method of ["GET", "PUT", "DELETE"]) {
        const res = await h.request(method, path, { headers: evalKey });
        expect(res.status).toBe(405);
        expect(res.headers.get("allow")).toBe("POST");
        expect((await json(res, 405)).error).toBe("METHOD_NOT_ALLOWED");
      }
    }
    expect((await json(await h.request("POST", "/v1/evaluate/", { body: { flagKey: "a" }, headers: evalKey }), 200)).reason).toBe("FLAG_NOT_FOUND");
  });

  test("behind a proxy: 403 HTTPS_REQUIRED without X-Forwarded-Proto https (no HSTS); served with it (HSTS)", async () => {
    const p = await testApp({ SVC_BEHIND_PROXY: "true" });
    try {
      const key = bearer((await seedApiKey(p.ctx, "eval")).secret);
      for (const extra of [{}, { "x-forwarded-proto": "http" }] as Record<string, string>[]) {
        const res = await p.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: { ...key, ...extra } });
        expect(await json(res, 403)).toEqual({ error: "HTTPS_REQUIRED", message: "HTTPS is required: send requests through the TLS proxy" });
        expect(res.headers.get("strict-transport-security")).toBeNull();
        expect(res.headers.get("x-ratelimit-limit")).toBe("10000");
      }
      const ok = await p.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: { ...key, "x-forwarded-proto": "https" } });
      expect(ok.status).toBe(200);
      expect(ok.headers.get("strict-transport-security")).toBe("max-age=31536000");
    } finally {
      p.close();
    }
  });
});

describe("native handlers answer as the pipeline does for the same routes declared in Elysia", () => {
  /** Which path served a request: the stack of the override lookup tells. */
  function tracePaths() {
    const seen: string[] = [];
    plugOverrides({
      overridesFor() {
        seen.push(new Error().stack!.includes("native.ts") ? "native" : "elysia");
        return undefined;
      },
    });
    return seen;
  }

  test("POST /v1/evaluate and /v1/evaluate/batch take the native handler, through the app too (its twin only documents them)", async () => {
    const seen = tracePaths();
    const session = { ...evalKey, "x-service-session": "sess_t" };
    await evaluate({ flagKey: "a" }, session);
    await batch({ flags: ["a"] }, session);
    await h.request("POST", "/v1/evaluate?debug=1", { body: { flagKey: "a" }, headers: session });
    await h.request("POST", "/v1/evaluate/", { body: { flagKey: "a" }, headers: session });
    await base.handle(new Request("http://localhost/v1/evaluate", { method: "POST", headers: { ...session, "content-type": "application/json" }, body: '{"flagKey":"a"}' }));
    expect(seen).toEqual(["native", "native", "native", "native", "native"]);
  });

  test("same status, body and headers for good and bad requests", async () => {
    await createFlag({ key: "p", variants: [{ key: "v1", weight: 30 }, { key: "v2", weight: 70 }], rules: [{ conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] });
    await setState("p", { enabled: true, rolloutPercentage: 40 });
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    const jwt = await userToken(h.ctx, "editor");
    type Case = { path?: string; body?: string | ReadableStream; type?: string | null; headers?: Record<string, string> };
    const one = (body: unknown) => JSON.stringify(body);
    const cases: Case[] = [
      { body: one({ flagKey: "p", context: { userId: "u1" } }) },
      { body: one({ flagKey: "p", context: { plan: "pro" } }) },
      { body: one({ flagKey: "p" }), headers: { "x-service-session": "sess_ok" } },
      { body: one({ flagKey: "p" }), headers: { "x-service-session": "sess_no" } },
      { body: one({ flagKey: "missing" }) },
      { path: "/v1/evaluate/batch", body: one({ flags: ["p", "p", "missing"], context: { userId: 5 } }) },
      { path: "/v1/evaluate/batch", body: one({ flags: Array(51).fill("p") }) },
      { path: "/v1/evaluate/batch", body: one({ flags: [] }) },
      { path: "/v1/evaluate/batch", body: one({ flags: [1, "", null] }) },
      { path: "/v1/evaluate/batch", body: one({ flags: "p" }) },
      { path: "/v1/evaluate/batch", body: one({}) },
      { body: one({ flagKey: "p", extra: true }) },
      { body: one({ flagKey: "p", environment: "production" }) },
      { path: "/v1/evaluate/batch", body: one({ flags: ["p"], environment: "production" }) },
      { body: one({ flagKey: "p", context: { a: { b: 1 } } }) },
      { body: one({ flagKey: "p", context: { a: [[1]] } }) },
      { body: one({ flagKey: "p", context: [] }) },
      { body: one({ flagKey: "p", context: { "x\ny": {} } }) },
      { body: one({ flagKey: "" }) },
      { body: one({ flagKey: 5 }) },
      { body: one({}) },
      { body: one([]) },
      { body: "null" },
      { body: '"x"' },
      { body: "12" },
      { body: '{"flagKey": ' },
      { body: "" },
      { body: "   " },
      { body: undefined, type: null },
      { body: one({ flagKey: "p" }), type: "text/plain" },
      { body: one({ flagKey: "p" }), type: null },
      { body: one({ flagKey: "p" }), type: "application/json; charset=utf-8" },
      { body: one({ flagKey: "p" }), type: "application/merge-patch+json" },
      { body: one({ flagKey: "p" }), type: "application/json, text/plain" },
      { body: one({ flagKey: "p" }), headers: { "content-length": String(MAX_BODY_BYTES + 1) } },
      { body: one({ flagKey: "p" }), headers: { authorization: "" } },
      { body: one({ flagKey: "" }), headers: { authorization: "Bearer svc_sk_eval_nope" } },
      { body: '{"flagKey": ', headers: { authorization: "Bearer svc_sk_eval_nope" } },
      { body: one({ flagKey: "p" }), headers: mgmt },
      { body: one({ flagKey: "p" }), headers: admin },
      { body: one({ flagKey: "p" }), headers: jwt },
      { body: one({ flagKey: "p" }), headers: { authorization: "Bearer x.y.z" } },
      { path: "/v1/evaluate/batch", body: one({ flags: ["p"] }), headers: admin },
      { body: one({ flagKey: "p" }), headers: { "x-service-session": "sess_boom" } },
    ];
    const build = (c: Case, i: number, prefix = "") => {
      const headers: Record<string, string> = { ...evalKey, "x-request-id": `parity-${i}`, ...c.headers };
      if (c.type !== null) headers["content-type"] = c.type ?? "application/json";
      return new Request(`http://localhost${prefix}${c.path ?? "/v1/evaluate"}`, { method: "POST", headers, body: c.body });
    };
    const crashing = (token: string) => {
      if (token === "sess_boom") throw new Error("boom");
      return token === "sess_ok" ? new Map<string, Override>([["p", "v9"]]) : undefined;
    };
    plugOverrides({ overridesFor: crashing });
    const seen = new Set<number>();
    for (const [i, c] of cases.entries()) {
      const native = await h.app.handle(build(c, i));
      const twin = await base.handle(build(c, i, "/twin"));
      const summary = async (res: Response) => {
        const text = await res.text();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        if (body && typeof body === "object" && "evaluatedAt" in body) delete (body as Record<string, unknown>).evaluatedAt;
        return { case: i, status: res.status, body, headers: headerNames(res), contentType: res.headers.get("content-type") };
      };
      const n = await summary(native);
      expect(n).toEqual(await summary(twin));
      seen.add(n.status);
    }
    // The list covers every status these routes can answer with (429 and 403 HTTPS_REQUIRED below).
    expect([...seen].sort()).toEqual([200, 400, 401, 403, 413, 500]);
  });

  test("429 and HTTPS_REQUIRED alike", async () => {
    for (const env of [{ SVC_RATE_LIMITS: "eval:1" }, { SVC_BEHIND_PROXY: "true" }] as Record<string, string>[]) {
      let twinApp!: App;
      const p: TestApp = await testApp(env, (app) => (twinApp = withTwins(app, () => p.services)));
      try {
        const key = bearer((await seedApiKey(p.ctx, "eval")).secret);
        const req = (prefix = "") =>
          new Request(`http://localhost${prefix}/v1/evaluate`, { method: "POST", headers: { ...key, "content-type": "application/json", "x-request-id": "same" }, body: '{"flagKey":"a"}' });
        if (env.SVC_RATE_LIMITS) await p.app.handle(req());
        const native = await p.app.handle(req());
        const twin = await twinApp.handle(req("/twin"));
        expect(native.status).toBe(env.SVC_RATE_LIMITS ? 429 : 403);
        expect([native.status, await native.json(), headerNames(native)]).toEqual([twin.status, await twin.json(), headerNames(twin)]);
      } finally {
        p.close();
      }
    }
  });
});

describe("API document", () => {
  test("both routes are documented with their body, results, access group and the session header", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    for (const [path, required] of [
      ["/v1/evaluate", ["flagKey"]],
      ["/v1/evaluate/batch", ["flags"]],
    ] as const) {
      const op = doc.paths[path].post;
      expect(op["x-flagsvc-access"]).toBe("evaluate");
      expect(op.requestBody.required).toBe(true);
      expect(op.requestBody.content["application/json"].schema).toMatchObject({ type: "object", additionalProperties: false, required });
      expect(op.parameters).toContainEqual(expect.objectContaining({ in: "header", name: "X-Service-Session" }));
      expect(op.responses["200"]).toBeDefined();
      expect(op.description).toContain("FLAG_NOT_FOUND");
      expect(op.description).toContain("from the API key");
    }
    expect(doc.paths["/v1/evaluate/batch"].post.requestBody.content["application/json"].schema.properties.flags).toMatchObject({ minItems: 1, maxItems: 50 });
    expect(doc.paths["/v1/evaluate/batch"].post.description).toContain("51 entries are a 400");
  });

  test("a context without userId on a rollout is excluded, not an error, and the document says only context.userId is bucketed", async () => {
    await createFlag({ key: "half" });
    await setState("half", { enabled: true, rolloutPercentage: 99.999 });
    // Look-alikes of userId are ordinary attributes: nothing to bucket by, so excluded.
    for (const context of [{ user_id: "u1" }, { id: "u1" }, { targetingKey: "u1" }, {}]) {
      expect((await json(await evaluate({ flagKey: "half", context }), 200)).reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
    }
    expect((await json(await evaluate({ flagKey: "half", context: { userId: "u1" } }), 200)).reason).toBe("PERCENTAGE_ROLLOUT");
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    for (const path of ["/v1/evaluate", "/v1/evaluate/batch"]) {
      expect(doc.paths[path].post.description).toContain(
        "Only `context.userId` is bucketed: `user_id`, `id` or `targetingKey` are ordinary attributes there (rules may match them), so a context without `userId` is excluded from a rollout under 100 %",
      );
    }
  });
});

describe("the listening server", () => {
  const dir = tempDir();
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("Bun's router serves the native handlers over HTTPS; other methods still reach the app (405)", async () => {
    const server = await startServer(loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1" }), {
      log: createLogger({ level: "error", format: "json", write: () => {} }),
    });
    try {
      const seen: string[] = [];
      server.services.evaluation.overrides = {
        overridesFor() {
          seen.push(new Error().stack!.includes("native.ts") ? "native" : "elysia");
          return undefined;
        },
      };
      const key = (await seedApiKey(server.ctx, "eval")).secret;
      const tls = { rejectUnauthorized: false };
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "x-service-session": "sess_t" };
      const one = await fetch(`${server.url}/v1/evaluate`, { method: "POST", headers, body: '{"flagKey":"a"}', tls });
      expect(one.status).toBe(200);
      expect((await one.json()).reason).toBe("FLAG_NOT_FOUND");
      expect(one.headers.get("strict-transport-security")).toBe("max-age=31536000");
      const many = await fetch(`${server.url}/v1/evaluate/batch`, { method: "POST", headers, body: '{"flags":["a","b"]}', tls });
      expect(Object.keys((await many.json()).results)).toEqual(["a", "b"]);
      expect(seen).toEqual(["native", "native"]);
      const get = await fetch(`${server.url}/v1/evaluate`, { headers, tls });
      expect(get.status).toBe(405);
      expect(get.headers.get("allow")).toBe("POST");
      expect((await fetch(`${server.url}/v1/health`, { tls })).status).toBe(200);
    } finally {
      await server.stop();
    }
  });
});
