/**
 * Rate limits (decisions §13) through app.handle, with the clock injected: per credential,
 * fixed 60-second windows, headers on every response, 429 RATE_LIMITED with Retry-After.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { App } from "../../src/server";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

const withGuardedProbe = (app: App) => app.get("/v1/probe-guarded", () => ({ ok: true }), { access: "flags" });

let h: TestApp;
afterEach(() => h.close());

/** 10:00:30.000 UTC: the window started at 10:00:00 and ends at 10:01:00. */
const MID_WINDOW = Date.parse("2026-11-22T10:00:30.000Z");
const WINDOW_END_S = Date.parse("2026-11-22T10:01:00.000Z") / 1000;

function limits(res: Response) {
  return {
    limit: res.headers.get("x-ratelimit-limit"),
    remaining: res.headers.get("x-ratelimit-remaining"),
    reset: res.headers.get("x-ratelimit-reset"),
  };
}

describe("headers on every response", () => {
  test("200, 401, 403, 404 and 405 all carry X-RateLimit-*; Reset is the window's end in Unix seconds", async () => {
    h = await testApp({}, withGuardedProbe);
    h.clock.ms = MID_WINDOW;
    const evalKey = (await seedApiKey(h.ctx, "eval")).secret;
    const cases: [string, string, Record<string, string>, number][] = [
      ["GET", "/v1/health", {}, 200],
      ["GET", "/v1/probe-guarded", {}, 401],
      ["GET", "/v1/probe-guarded", bearer("svc_sk_eval_nope"), 401],
      ["GET", "/v1/probe-guarded", bearer(evalKey), 403],
      ["GET", "/v1/nowhere", {}, 404],
      ["DELETE", "/v1/health", {}, 405],
    ];
    for (const [method, path, headers, status] of cases) {
      const res = await h.request(method, path, { headers });
      expect(res.status).toBe(status);
      const l = limits(res);
      expect(Number(l.limit)).toBeGreaterThan(0);
      expect(Number(l.remaining)).toBeGreaterThanOrEqual(0);
      expect(Number(l.reset)).toBe(WINDOW_END_S);
    }
  });

  test("the limit shown is the caller's kind: eval 10000, mgmt 500, admin 1000, anonymous 300", async () => {
    h = await testApp();
    const expectations: [Record<string, string>, string][] = [
      [bearer((await seedApiKey(h.ctx, "eval")).secret), "10000"],
      [bearer((await seedApiKey(h.ctx, "test")).secret), "1000"],
      [bearer((await seedApiKey(h.ctx, "mgmt")).secret), "500"],
      [bearer((await seedApiKey(h.ctx, "full")).secret), "500"],
      [bearer(await seedAdminKey(h.ctx)), "1000"],
      [{}, "300"],
      [bearer("svc_sk_mgmt_unknown"), "300"],
    ];
    for (const [headers, limit] of expectations) {
      const res = await h.request("GET", "/v1/health", { headers });
      expect(res.headers.get("x-ratelimit-limit")).toBe(limit);
    }
  });
});

describe("limits", () => {
  test("a mgmt key past 500 in one window gets 429 RATE_LIMITED with Retry-After; the next window starts fresh", async () => {
    h = await testApp();
    h.clock.ms = MID_WINDOW;
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    for (let i = 1; i <= 500; i++) {
      const res = await h.request("GET", "/v1/health", { headers: mgmt });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(500 - i));
    }
    const over = await h.request("GET", "/v1/health", { headers: mgmt });
    expect(over.status).toBe(429);
    expect(over.headers.get("retry-after")).toBe("30");
    expect(over.headers.get("x-ratelimit-remaining")).toBe("0");
    const body = await over.json();
    expect(body).toMatchObject({ error: "RATE_LIMITED", retryAfter: 30 });
    expect(typeof body.message).toBe("string");

    // Another key of the same kind has its own counter.
    const other = await h.request("GET", "/v1/health", { headers: bearer((await seedApiKey(h.ctx, "mgmt")).secret) });
    expect(other.status).toBe(200);

    h.clock.ms = MID_WINDOW + 30_000; // 10:01:00, a new window
    const fresh = await h.request("GET", "/v1/health", { headers: mgmt });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get("x-ratelimit-remaining")).toBe("499");
    expect(Number(fresh.headers.get("x-ratelimit-reset"))).toBe(WINDOW_END_S + 60);
  });

  test("requests without a valid credential share the per-address anonymous limit", async () => {
    h = await testApp({ SVC_RATE_LIMITS: "anonymous:3" });
    const statuses = [];
    for (const headers of [{}, bearer("svc_sk_eval_guess1"), bearer("not-a-key"), bearer("svc_sk_eval_guess2")]) {
      statuses.push((await h.request("GET", "/v1/health", { headers })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  test("SVC_RATE_LIMITS overrides a kind and the limiter still runs", async () => {
    h = await testApp({ SVC_RATE_LIMITS: "eval:2" });
    const key = bearer((await seedApiKey(h.ctx, "eval")).secret);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await h.request("GET", "/v1/health", { headers: key })).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  test("behind a proxy, callers without a credential are counted by the last X-Forwarded-For entry (the proxy's own)", async () => {
    h = await testApp({ SVC_BEHIND_PROXY: "true", SVC_RATE_LIMITS: "anonymous:2" });
    h.clock.ms = MID_WINDOW;
    const via = (forwarded: string) => h.request("GET", "/v1/health", { headers: { "x-forwarded-proto": "https", "x-forwarded-for": forwarded } });
    // A client that makes up a new first entry each time is still the proxy's 203.0.113.7.
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await via(`10.9.${i}.${i}, 203.0.113.7`)).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await via("203.0.113.8")).status).toBe(200);
    expect((await via("10.9.0.0, 203.0.113.8 ")).status).toBe(200);
    expect((await via("203.0.113.8")).status).toBe(429);
  });

  test("old windows are dropped: memory holds only the current window's callers", async () => {
    h = await testApp({ SVC_BEHIND_PROXY: "true" });
    h.clock.ms = MID_WINDOW;
    const from = (i: number) => ({ "x-forwarded-proto": "https", "x-forwarded-for": `10.0.0.${i}` });
    for (let i = 0; i < 50; i++) await h.request("GET", "/v1/health", { headers: from(i) });
    expect(h.ctx.limiter.size()).toBe(50);
    h.clock.advance(60_000);
    await h.request("GET", "/v1/health", { headers: from(1) });
    expect(h.ctx.limiter.size()).toBe(1);
  });

  test("a key's count lives on its record: it survives a reload and restarts with the window", async () => {
    h = await testApp({ SVC_RATE_LIMITS: "eval:3" });
    h.clock.ms = MID_WINDOW;
    const key = bearer((await seedApiKey(h.ctx, "eval")).secret);
    const remaining = async () => (await h.request("GET", "/v1/health", { headers: key })).headers.get("x-ratelimit-remaining");
    expect(await remaining()).toBe("2");
    await h.ctx.credentials.reload(); // any credential write
    expect(await remaining()).toBe("1");
    expect(h.ctx.limiter.size()).toBe(0);
    h.clock.advance(60_000);
    expect(await remaining()).toBe("2");
  });
});
