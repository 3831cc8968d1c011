/**
 * GET /v1/projects/{slug}/insights: the daily production totals of a page of flags in one
 * request (the console's sparklines): flushed and pending counts, every environment or one,
 * days back on the test clock, TEST_OVERRIDE left out, unknown keys left out, validation, access.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp } from "../helpers";

const FLAGS = "/v1/projects/default/flags";
const DAY = 86_400_000;

let h: TestApp;
let admin: Record<string, string>;
let prod: Record<string, string>;
let dev: Record<string, string>;

beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  prod = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
  dev = bearer((await seedApiKey(h.ctx, "eval", "default", "development")).secret);
  for (const key of ["a", "b", "c"]) await json(await h.request("POST", FLAGS, { headers: admin, body: { key, name: key } }), 201);
});
afterEach(() => h.close());

const evaluate = async (flagKey: string, headers: Record<string, string>, n = 1, extra: Record<string, string> = {}) => {
  for (let i = 0; i < n; i++) await json(await h.request("POST", "/v1/evaluate", { headers: { ...headers, ...extra }, body: { flagKey, context: { userId: `u${i}` } } }), 200);
};
const daily = async (query: string, status = 200, headers = admin) => json(await h.request("GET", `/v1/projects/default/insights?${query}`, { headers }), status);

describe("daily totals of a page of flags", () => {
  test("per day over every environment or one, flushed and pending, oldest first; test overrides and unknown keys left out", async () => {
    await evaluate("a", prod, 3);
    await evaluate("a", dev, 2);
    h.ctx.insightsFlusher.flush();
    h.clock.advance(2 * DAY);
    await evaluate("a", prod, 1); // pending, today
    await evaluate("b", dev, 4);
    h.ctx.insightsFlusher.flush();
    await evaluate("b", dev, 1); // pending
    // A test session's override: TEST_OVERRIDE, not production traffic.
    const test = bearer((await seedApiKey(h.ctx, "test", "default", "production")).secret);
    const s = await json(await h.request("POST", "/v1/testing/sessions", { headers: test, body: { projectId: "default" } }), 201);
    await json(await h.request("PUT", `/v1/testing/sessions/${s.id}/overrides/c`, { headers: test, body: { value: true } }), 200);
    await evaluate("c", prod, 5, { "X-Service-Session": s.token });

    const today = h.clock.now() - (h.clock.now() % DAY);
    const all = await daily("flags=b,a,c,gone,a");
    expect(all).toEqual({
      environment: null,
      from: new Date(today - 6 * DAY).toISOString(),
      days: 7,
      flags: [
        { flagKey: "b", total: 5, days: [0, 0, 0, 0, 0, 0, 5] },
        { flagKey: "a", total: 6, days: [0, 0, 0, 0, 5, 0, 1] },
        { flagKey: "c", total: 0, days: [0, 0, 0, 0, 0, 0, 0] },
      ],
    });
    expect(await daily("flags=a,b&environment=production&days=3")).toEqual({
      environment: "production",
      from: new Date(today - 2 * DAY).toISOString(),
      days: 3,
      flags: [
        { flagKey: "a", total: 4, days: [3, 0, 1] },
        { flagKey: "b", total: 0, days: [0, 0, 0] },
      ],
    });
    // The same figures as the per-flag insights, summed.
    const perFlag = await json(await h.request("GET", `${FLAGS}/a/insights?environment=production&interval=day&from=${new Date(today - 2 * DAY).toISOString()}`, { headers: admin }), 200);
    expect(perFlag.points.map((p: { total: number }) => p.total)).toEqual([3, 0, 1]);
  });

  test("validation (400, the field named), unknown project or environment 404, access as reading flags", async () => {
    const bad = async (query: string, path: string) => expect((await daily(query, 400)).details.map((d: { path: string }) => d.path)).toEqual([path]);
    await bad("flags=Not_a_key", "query.flags");
    await bad(`flags=${Array.from({ length: 101 }, (_, i) => `f${i}`).join(",")}`, "query.flags");
    await bad("flags=a&days=0", "query.days");
    await bad("flags=a&days=91", "query.days");
    await bad("days=7", "query.flags");
    expect((await daily("flags=a&environment=nope", 404)).error).toBe("NOT_FOUND");
    expect((await json(await h.request("GET", "/v1/projects/nope/insights?flags=a", { headers: admin }), 404)).error).toBe("NOT_FOUND");
    expect((await daily("flags=a", 200, await userToken(h.ctx, "viewer"))).flags).toHaveLength(1);
    expect((await daily("flags=a", 200, bearer((await seedApiKey(h.ctx, "mgmt")).secret))).flags).toHaveLength(1);
    expect((await daily("flags=a", 403, prod)).error).toBe("FORBIDDEN");
  });
});
