/**
 * OFREP v0.3.0 over HTTP (docs/openfeature.md): single and bulk evaluation, OFREP's error shapes,
 * credentials (Bearer, X-API-Key), session overrides, the ETag, and CORS for web pages. Flags are
 * written through the flags API over a real database.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bucketOf, variantBucketOf } from "../../src/evaluation/engine";
import { REASON_MAPPING } from "../../src/evaluation/openfeature";
import { REASONS } from "../../src/evaluation/types";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let evalKey: string;

beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = (await seedApiKey(h.ctx, "eval")).secret;
});
afterEach(() => h.close());

async function json(res: Response, status: number) {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, any>;
}

async function flag(body: Record<string, unknown>, state?: { enabled: boolean; rolloutPercentage?: number | null }) {
  await json(await h.request("POST", "/v1/projects/default/flags", { body: { name: String(body.key), ...body }, headers: admin }), 201);
  if (state) await json(await h.request("PUT", `/v1/projects/default/flags/${body.key}/states/development`, { body: state, headers: admin }), 200);
}

const one = (key: string, body: unknown, headers: Record<string, string> = bearer(evalKey)) =>
  h.request("POST", `/ofrep/v1/evaluate/flags/${encodeURIComponent(key)}`, { body, headers });
const bulk = (body: unknown, headers: Record<string, string> = bearer(evalKey), query = "") => h.request("POST", `/ofrep/v1/evaluate/flags${query}`, { body, headers });

/** A user whose rollout bucket for `key` is (or is not) under `percent`. */
function userFor(key: string, percent: number, included: boolean): string {
  for (let i = 0; ; i++) if (bucketOf(key, `u${i}`) < percent * 1000 === included) return `u${i}`;
}

describe("single evaluation", () => {
  test("a boolean flag: value is enabled; reasons map onto OpenFeature's, ours kept in metadata", async () => {
    await flag({ key: "off" });
    await flag({ key: "on" }, { enabled: true });
    await flag({ key: "ruled", rules: [{ name: "pro", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] }, { enabled: true });
    await flag({ key: "half" }, { enabled: true, rolloutPercentage: 50 });
    const ruleId = (await json(await h.request("GET", "/v1/projects/default/flags/ruled", { headers: admin }), 200)).rules[0].id;

    expect(await json(await one("off", { context: { targetingKey: "u1" } }), 200)).toEqual({
      key: "off",
      value: false,
      reason: "DISABLED",
      metadata: { reason: "FLAG_DISABLED", environment: "development" },
    });
    expect(await json(await one("on", { context: {} }), 200)).toEqual({ key: "on", value: true, reason: "STATIC", metadata: { reason: "FLAG_ENABLED", environment: "development" } });
    expect(await json(await one("ruled", { context: { targetingKey: "u1", plan: "pro" } }), 200)).toEqual({
      key: "ruled",
      value: true,
      reason: "TARGETING_MATCH",
      metadata: { reason: "TARGETING_RULE_MATCH", ruleId, environment: "development" },
    });
    // Past a rule that did not match: the default.
    expect((await json(await one("ruled", { context: { plan: "free" } }), 200)).reason).toBe("DEFAULT");
    const inside = await json(await one("half", { context: { targetingKey: userFor("half", 50, true) } }), 200);
    expect(inside).toMatchObject({ value: true, reason: "SPLIT", metadata: { reason: "PERCENTAGE_ROLLOUT" } });
    const outside = await json(await one("half", { context: { targetingKey: userFor("half", 50, false) } }), 200);
    expect(outside).toMatchObject({ value: false, reason: "SPLIT", metadata: { reason: "PERCENTAGE_ROLLOUT_EXCLUDED" } });
  });

  test("a multi-variant flag: value and variant are the served variant's key; none served: no value (the code default)", async () => {
    await flag({ key: "color", variants: [{ key: "red", weight: 25 }, { key: "blue", weight: 75 }] }, { enabled: true });
    await flag({ key: "plain", variants: [{ key: "a" }, { key: "b" }] });
    const user = "u7";
    const expected = variantBucketOf("color", user) < 25_000 ? "red" : "blue";
    expect(await json(await one("color", { context: { targetingKey: user } }), 200)).toEqual({
      key: "color",
      value: expected,
      variant: expected,
      reason: "SPLIT",
      metadata: { reason: "FLAG_ENABLED", environment: "development" },
    });
    expect(await json(await one("plain", { context: { targetingKey: user } }), 200)).toEqual({
      key: "plain",
      reason: "DISABLED",
      metadata: { reason: "FLAG_DISABLED", environment: "development" },
    });
  });

  test("the result equals /v1/evaluate's for the same flag and context (targetingKey is userId)", async () => {
    await flag({ key: "mix", variants: [{ key: "x", weight: 33.333 }, { key: "y", weight: 66.667 }] }, { enabled: true, rolloutPercentage: 40 });
    for (let i = 0; i < 50; i++) {
      const ours = await json(await h.request("POST", "/v1/evaluate", { body: { flagKey: "mix", context: { userId: `user-${i}` } }, headers: bearer(evalKey) }), 200);
      const theirs = await json(await one("mix", { context: { targetingKey: `user-${i}` } }), 200);
      expect(theirs.metadata.reason).toBe(ours.reason);
      expect(theirs.variant ?? null).toBe(ours.variant);
      expect(theirs.value ?? null).toBe(ours.variant);
    }
  });

  test("errors: FLAG_NOT_FOUND 404, TARGETING_KEY_MISSING, INVALID_CONTEXT, PARSE_ERROR, GENERAL as 400", async () => {
    await flag({ key: "half" }, { enabled: true, rolloutPercentage: 50 });
    await flag({ key: "all" }, { enabled: true, rolloutPercentage: 100 });
    expect(await json(await one("nope", { context: {} }), 404)).toEqual({ key: "nope", errorCode: "FLAG_NOT_FOUND", errorDetails: "Flag 'nope' was not found" });
    const missing = await json(await one("half", { context: { user_id: "u1" } }), 400);
    expect(missing).toMatchObject({ key: "half", errorCode: "TARGETING_KEY_MISSING" });
    // A rollout of 100 % needs nobody identified.
    expect((await json(await one("all", { context: {} }), 200)).value).toBe(true);
    expect(await json(await one("half", { context: { targetingKey: "u1", nested: { a: 1 } } }), 400)).toMatchObject({ key: "half", errorCode: "INVALID_CONTEXT" });
    expect(await json(await one("half", { context: { targetingKey: 5 } }), 400)).toMatchObject({ key: "half", errorCode: "INVALID_CONTEXT" });
    expect(await json(await one("half", { context: "x" }), 400)).toMatchObject({ key: "half", errorCode: "INVALID_CONTEXT" });
    const parse = await h.app.handle(
      new Request("http://localhost/ofrep/v1/evaluate/flags/half", { method: "POST", headers: { ...bearer(evalKey), "content-type": "application/json" }, body: '{"context": ' }),
    );
    expect(await json(parse, 400)).toMatchObject({ key: "half", errorCode: "PARSE_ERROR" });
    expect(await json(await one("half", []), 400)).toMatchObject({ key: "half", errorCode: "PARSE_ERROR" });
  });

  test("credentials: Bearer or X-API-Key; eval, test and full keys; 401/403 as { errorDetails }", async () => {
    await flag({ key: "on" }, { enabled: true });
    for (const scope of ["eval", "test", "full", "client"] as const) {
      const key = (await seedApiKey(h.ctx, scope)).secret;
      expect((await json(await one("on", { context: {} }, { "x-api-key": key }), 200)).value).toBe(true);
      expect((await json(await one("on", { context: {} }, bearer(key)), 200)).value).toBe(true);
    }
    const none = await json(await one("on", { context: {} }, {}), 401);
    expect(Object.keys(none)).toEqual(["errorDetails"]);
    expect(none.errorDetails).toContain("Invalid or expired API key");
    expect(await json(await one("on", { context: {} }, { "x-api-key": "svc_sk_eval_nope" }), 401)).toEqual({ errorDetails: "Invalid or expired API key" });
    const mgmt = (await seedApiKey(h.ctx, "mgmt")).secret;
    expect((await json(await one("on", { context: {} }, { "x-api-key": mgmt }), 403)).errorDetails).toContain("This key scope does not have access to this endpoint");
    expect((await json(await one("on", { context: {} }, admin), 403)).errorDetails).toContain("Evaluation takes a project API key");
  });

  test("a test session's override applies (STATIC, metadata TEST_OVERRIDE)", async () => {
    await flag({ key: "on" }, { enabled: true });
    await flag({ key: "pick", variants: [{ key: "a" }, { key: "b" }] });
    const testKey = bearer((await seedApiKey(h.ctx, "test")).secret);
    const session = await json(await h.request("POST", "/v1/testing/sessions", { body: { projectId: "default" }, headers: testKey }), 201);
    for (const [key, value] of [["on", false], ["pick", "b"]] as const) {
      await json(await h.request("PUT", `/v1/testing/sessions/${session.id}/overrides/${key}`, { body: { value }, headers: testKey }), 200);
    }
    const headers = { ...bearer(evalKey), "x-service-session": session.token };
    expect(await json(await one("on", { context: {} }, headers), 200)).toEqual({ key: "on", value: false, reason: "STATIC", metadata: { reason: "TEST_OVERRIDE", environment: "development" } });
    expect(await json(await one("pick", { context: {} }, headers), 200)).toMatchObject({ value: "b", variant: "b", reason: "STATIC" });
  });

  test("429 with Retry-After, in OFREP's shape", async () => {
    const p = await testApp({ SVC_RATE_LIMITS: "eval:1" });
    try {
      const key = bearer((await seedApiKey(p.ctx, "eval")).secret);
      await p.request("POST", "/ofrep/v1/evaluate/flags/a", { body: { context: {} }, headers: key });
      const res = await p.request("POST", "/ofrep/v1/evaluate/flags/a", { body: { context: {} }, headers: key });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await res.json()).errorDetails).toContain("Rate limit exceeded");
    } finally {
      p.close();
    }
  });

  test("a context attribute named errorCode is an attribute like any other", async () => {
    await flag({ key: "coded", rules: [{ name: "c", conditions: [{ attribute: "errorCode", operator: "equals", value: "x" }] }] }, { enabled: true });
    expect(await json(await one("coded", { context: { targetingKey: "u1", errorCode: "x" } }), 200)).toMatchObject({ value: true, reason: "TARGETING_MATCH" });
    expect((await json(await bulk({ context: { targetingKey: "u1", errorCode: "x", errorDetails: "y" } }), 200)).flags[0]).toMatchObject({ key: "coded", reason: "TARGETING_MATCH" });
  });

  test("every reason of ours has a row in the mapping, and the docs' table names them all", async () => {
    expect(Object.keys(REASON_MAPPING).sort()).toEqual([...REASONS].sort());
    const doc = await Bun.file(new URL("../../docs/openfeature.md", import.meta.url)).text();
    for (const reason of REASONS) expect(doc).toMatch(new RegExp(`\\| \`${reason}\` \\|`));
  });
});

describe("bulk evaluation", () => {
  test("every flag of the environment by key, a flag's own failure inside flags[], eventStreams and metadata", async () => {
    await flag({ key: "b-on" }, { enabled: true });
    await flag({ key: "a-half" }, { enabled: true, rolloutPercentage: 50 });
    await flag({ key: "c-var", variants: [{ key: "x" }, { key: "y" }] }, { enabled: true });
    const res = await bulk({ context: {} });
    const body = await json(res, 200);
    expect(body.flags).toEqual([
      { key: "a-half", errorCode: "TARGETING_KEY_MISSING", errorDetails: expect.any(String) },
      { key: "b-on", value: true, reason: "STATIC", metadata: { reason: "FLAG_ENABLED", environment: "development" } },
      { key: "c-var", value: "x", variant: "x", reason: "STATIC", metadata: { reason: "FLAG_ENABLED", environment: "development" } },
    ]);
    expect(body.eventStreams).toEqual([{ type: "sse", endpoint: { requestUri: expect.stringMatching(/^\/ofrep\/v1\/events\?token=[A-Za-z0-9_.-]+$/) }, inactivityDelaySec: 120 }]);
    expect(body.eventStreams[0].endpoint.requestUri).not.toContain(evalKey);
    expect(body.metadata).toEqual({ version: expect.stringMatching(/^\d+$/), environment: "development" });
    expect(res.headers.get("etag")).toMatch(/^"[0-9a-z]+"$/);
    expect(res.headers.get("x-flagsvc-environment")).toBe("development");
  });

  test("ETag: If-None-Match answers 304 until a change this context sees", async () => {
    await flag({ key: "on" }, { enabled: true });
    const first = await bulk({ context: { targetingKey: "u1" } });
    const etag = first.headers.get("etag")!;
    const again = await bulk({ context: { targetingKey: "u1" } }, { ...bearer(evalKey), "if-none-match": etag });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
    expect(again.headers.get("etag")).toBe(etag);
    // Another context reads other values: its own tag.
    await flag({ key: "ruled", rules: [{ name: "r", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] }, { enabled: true });
    const changed = await bulk({ context: { targetingKey: "u1" } }, { ...bearer(evalKey), "if-none-match": etag });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(etag);
  });

  test("a refetch announced by a change (flagConfigEtag, flagConfigLastModified) is answered; values it cannot read are hints, ignored", async () => {
    await flag({ key: "on" }, { enabled: true });
    const { metadata } = await json(await bulk({ context: {} }), 200);
    for (const query of [`?flagConfigEtag=%22${metadata.version}%22`, "?flagConfigLastModified=1771622898", "?flagConfigEtag=junk", "?flagConfigLastModified=2026-02-20T21:28:18Z"]) {
      expect((await json(await bulk({ context: {} }, bearer(evalKey), query), 200)).flags).toHaveLength(1);
    }
  });

  test("errors of the whole request: INVALID_CONTEXT, PARSE_ERROR without a key", async () => {
    expect(await json(await bulk({ context: { a: { b: 1 } } }), 400)).toEqual({ errorCode: "INVALID_CONTEXT", errorDetails: expect.stringContaining("'a'") });
    expect(await json(await bulk([]), 400)).toMatchObject({ errorCode: "PARSE_ERROR" });
  });
});

describe("CORS (SVC_CORS_ORIGINS)", () => {
  const PAGE = "https://app.example.com";

  test("listed origins may call evaluation and OFREP: preflight, headers on answers and errors, Vary: Origin; never management", async () => {
    const c = await testApp({ SVC_CORS_ORIGINS: `${PAGE}, http://localhost:5173` });
    try {
      const key = (await seedApiKey(c.ctx, "eval")).secret;
      for (const path of ["/v1/evaluate", "/v1/evaluate/batch", "/ofrep/v1/evaluate/flags", "/ofrep/v1/evaluate/flags/some-flag"]) {
        const pre = await c.app.handle(
          new Request(`http://localhost${path}`, { method: "OPTIONS", headers: { origin: PAGE, "access-control-request-method": "POST", "access-control-request-headers": "x-api-key, content-type" } }),
        );
        expect(pre.status).toBe(204);
        expect(pre.headers.get("access-control-allow-origin")).toBe(PAGE);
        expect(pre.headers.get("access-control-allow-methods")).toContain("POST");
        expect(pre.headers.get("access-control-allow-headers")).toContain("x-api-key");
        expect(pre.headers.get("vary")).toBe("Origin");
        const other = await c.app.handle(new Request(`http://localhost${path}`, { method: "OPTIONS", headers: { origin: "https://evil.example" } }));
        expect(other.status).toBe(403);
        expect(other.headers.get("access-control-allow-origin")).toBeNull();
      }
      const ok = await c.request("POST", "/ofrep/v1/evaluate/flags", { body: { context: {} }, headers: { "x-api-key": key, origin: PAGE } });
      expect(ok.status).toBe(200);
      expect(ok.headers.get("access-control-allow-origin")).toBe(PAGE);
      expect(ok.headers.get("access-control-expose-headers")).toContain("etag");
      expect(ok.headers.get("vary")).toBe("Origin");
      const refused = await c.request("POST", "/v1/evaluate", { body: { flagKey: "x" }, headers: { origin: PAGE } });
      expect(refused.status).toBe(401);
      expect(refused.headers.get("access-control-allow-origin")).toBe(PAGE);
      const stranger = await c.request("POST", "/v1/evaluate", { body: { flagKey: "x" }, headers: { ...bearer(key), origin: "https://evil.example" } });
      expect(stranger.status).toBe(200);
      expect(stranger.headers.get("access-control-allow-origin")).toBeNull();
      // The change stream: its answer and its refusal.
      const { eventStreams } = await ok.json();
      const stream = await c.request("GET", eventStreams[0].endpoint.requestUri, { headers: { origin: PAGE } });
      expect(stream.status).toBe(200);
      expect(stream.headers.get("access-control-allow-origin")).toBe(PAGE);
      expect(stream.headers.get("vary")).toBe("Origin");
      await stream.body?.cancel();
      const badToken = await c.request("GET", "/ofrep/v1/events?token=nope", { headers: { origin: PAGE } });
      expect(badToken.status).toBe(401);
      expect(badToken.headers.get("access-control-allow-origin")).toBe(PAGE);
      // Management routes never answer a browser of another origin.
      const flags = await c.request("GET", "/v1/projects/default/flags", { headers: { ...bearer(await seedAdminKey(c.ctx, "a2")), origin: PAGE } });
      expect(flags.headers.get("access-control-allow-origin")).toBeNull();
      const preflight = await c.app.handle(new Request("http://localhost/v1/projects", { method: "OPTIONS", headers: { origin: PAGE } }));
      expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      c.close();
    }
  });

  test("by default no origin is allowed: no CORS header, not even Vary", async () => {
    const res = await one("x", { context: {} }, { ...bearer(evalKey), origin: PAGE });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    expect(res.headers.get("vary")).toBeNull();
    const pre = await h.app.handle(new Request("http://localhost/ofrep/v1/evaluate/flags", { method: "OPTIONS", headers: { origin: PAGE } }));
    expect(pre.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("API document", () => {
  test("both OFREP routes are documented with their access group and shapes", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    const single = doc.paths["/ofrep/v1/evaluate/flags/{key}"].post;
    expect(single["x-flagsvc-access"]).toBe("evaluate");
    expect(Object.keys(single.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "403", "404", "429"]));
    const many = doc.paths["/ofrep/v1/evaluate/flags"].post;
    expect(many.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(["flagConfigEtag", "flagConfigLastModified", "If-None-Match", "X-Service-Session"]));
    expect(many.description).toContain("ETag");
  });
});
