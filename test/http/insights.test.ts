/**
 * Evaluation insights (issue 32 part 2, docs/insights.md): the counts equal the evaluations
 * made, by variant and reason, through /v1/evaluate, its batch and OFREP; test-session overrides
 * are listed under TEST_OVERRIDE only and never set lastEvaluatedAt; counts survive a restart
 * on the same database file; hourly buckets roll into daily ones and go after a year (on the
 * test clock); the query's validation; each state's lastEvaluatedAt.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { bootstrap } from "../../src/bootstrap";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/lib/log";
import { createApp, createContext, createServices, dispatcher } from "../../src/server";
import { bearer, json, seedAdminKey, seedApiKey, testApp, TestClock, type TestApp, rawRows, countRows, sqliteOnly } from "../helpers";

const FLAGS = "/v1/projects/default/flags";
const NOW = Date.parse("2026-11-22T10:00:00.000Z"); // the TestClock's start
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;

beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
  // theme: variants a and b; plan=beta gets b by a rule, everyone else a (no weights: the first).
  await call("POST", FLAGS, { key: "theme", name: "Theme", variants: [{ key: "a" }, { key: "b" }], rules: [{ conditions: [{ attribute: "plan", operator: "equals", value: "beta" }], variant: "b" }] }, 201);
  await call("PUT", `${FLAGS}/theme/states/production`, { enabled: true });
  await call("POST", FLAGS, { key: "dark", name: "Dark" }, 201); // a boolean flag, disabled everywhere
});
afterEach(() => h.close());

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin, app: { request: TestApp["request"] } = h) =>
  json(await app.request(method, path, { body, headers }), status);
const evaluate = (flagKey: string, context: Record<string, unknown> = { userId: "u1" }, headers = evalKey) => call("POST", "/v1/evaluate", { flagKey, context }, 200, headers);
const insights = (key: string, query = "environment=production", status = 200, app: { request: TestApp["request"] } = h) => call("GET", `${FLAGS}/${key}/insights?${query}`, undefined, status, admin, app);
/** The point of the current hour: the last one by default. */
const current = (body: Record<string, any>) => body.points.at(-1);
/** Rows of flag_insights, numbers as numbers (PostgreSQL gives a bigint as text, `day` as a boolean). */
const insightRows = async (query: string) =>
  (await rawRows(h.ctx, query)).map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, ["count", "bucket", "day", "n"].includes(k) ? Number(v) : v])));
/** One flush, once written (PostgreSQL writes in the background): how many counters it wrote. */
const flush = async () => {
  const n = h.ctx.insightsFlusher.flush();
  await h.ctx.insightsFlusher.pending;
  return n;
};

describe("counts", () => {
  test("equal the evaluations made, by variant and reason: single, batch and OFREP; shown before they are flushed", async () => {
    for (let i = 0; i < 3; i++) await evaluate("theme", { userId: `u${i}`, plan: "beta" }); // b, TARGETING_RULE_MATCH
    for (let i = 0; i < 2; i++) await evaluate("theme", { userId: `v${i}` }); // a, FLAG_ENABLED
    await evaluate("dark"); // off, FLAG_DISABLED
    await call("POST", "/v1/evaluate/batch", { flags: ["theme", "dark"], context: { userId: "w" } }, 200, evalKey); // a + off
    await call("POST", "/ofrep/v1/evaluate/flags/theme", { context: { targetingKey: "x", plan: "beta" } }, 200, evalKey); // b
    await call("POST", "/ofrep/v1/evaluate/flags", { context: { targetingKey: "y" } }, 200, evalKey); // bulk: theme a + dark off

    const theme = await insights("theme");
    expect(theme).toMatchObject({ flagKey: "theme", environment: "production", interval: "hour", lastEvaluatedAt: "2026-11-22T10:00:00.000Z" });
    expect(theme.points).toHaveLength(24);
    expect(theme.points[0].start).toBe("2026-11-21T11:00:00.000Z");
    expect(current(theme)).toEqual({ start: "2026-11-22T10:00:00.000Z", total: 8, byVariant: { a: 4, b: 4 }, byReason: { TARGETING_RULE_MATCH: 4, FLAG_ENABLED: 4 } });
    // Every other bucket is listed, with zeros.
    expect(theme.points.slice(0, -1).every((p: any) => p.total === 0 && Object.keys(p.byVariant).length === 0 && Object.keys(p.byReason).length === 0)).toBe(true);
    const dark = await insights("dark");
    expect(current(dark)).toEqual({ start: "2026-11-22T10:00:00.000Z", total: 3, byVariant: { off: 3 }, byReason: { FLAG_DISABLED: 3 } });
    // Nothing in another environment.
    expect(current(await insights("theme", "environment=development")).total).toBe(0);

    // Flushed: the same answer from the database, and the rows hold it.
    expect(await flush()).toBe(2);
    expect(current(await insights("theme"))).toEqual(current(theme));
    const rows = (await insightRows("SELECT variant, reason, count FROM flag_insights i JOIN flags f ON f.id = i.flag_id WHERE f.key = 'theme' ORDER BY variant"));
    expect(rows).toEqual([
      { variant: "a", reason: "FLAG_ENABLED", count: 4 },
      { variant: "b", reason: "TARGETING_RULE_MATCH", count: 4 },
    ]);
    // More evaluations add to the same hour: flushed and pending together.
    await evaluate("theme");
    expect(current(await insights("theme")).byVariant).toEqual({ a: 5, b: 4 });
    await flush();
    expect((await insightRows("SELECT sum(count) AS n FROM flag_insights"))[0]).toEqual({ n: 12 });
  });

  test("each flush is one batch: nothing is written by an evaluation, a flush with nothing new writes nothing", async () => {
    await evaluate("theme");
    expect({ n: await countRows(h.ctx, "flag_insights") }).toEqual({ n: 0 });
    expect(await flush()).toBe(1);
    expect(await flush()).toBe(0);
    expect({ n: await countRows(h.ctx, "flag_insights") }).toEqual({ n: 1 });
  });

  test("a deleted flag's counts go with it", async () => {
    await evaluate("dark");
    await flush();
    await call("DELETE", `${FLAGS}/dark`, undefined, 204);
    expect({ n: await countRows(h.ctx, "flag_insights") }).toEqual({ n: 0 });
    expect({ n: await countRows(h.ctx, "flag_last_evaluated") }).toEqual({ n: 0 });
    await call("POST", FLAGS, { key: "dark", name: "Dark again" }, 201);
    expect(current(await insights("dark")).total).toBe(0);
  });
});

describe("test sessions", () => {
  // Not on PostgreSQL: its flush writes in the background (the test reads at once).
  sqliteOnly("overrides are listed under TEST_OVERRIDE only: never in total or byVariant, never lastEvaluatedAt", async () => {
    const testKey = bearer((await seedApiKey(h.ctx, "test", "default", "production")).secret);
    const projectId = (await call("GET", "/v1/projects/default")).id;
    const session = await call("POST", "/v1/testing/sessions", { projectId }, 201, testKey);
    await call("PUT", `/v1/testing/sessions/${session.id}/overrides/theme`, { value: "b" }, 200, testKey);
    await call("PUT", `/v1/testing/sessions/${session.id}/overrides/dark`, { value: true }, 200, testKey);
    const inSession = { ...evalKey, "x-service-session": session.token };
    for (let i = 0; i < 4; i++) expect((await evaluate("theme", { userId: `t${i}` }, inSession)).reason).toBe("TEST_OVERRIDE");
    await evaluate("dark", { userId: "t" }, inSession);

    const theme = await insights("theme");
    expect(current(theme)).toEqual({ start: "2026-11-22T10:00:00.000Z", total: 0, byVariant: {}, byReason: { TEST_OVERRIDE: 4 } });
    expect(theme.lastEvaluatedAt).toBeNull();
    expect((await call("GET", `${FLAGS}/theme/states/production`)).lastEvaluatedAt).toBeNull();
    await flush();
    expect(current(await insights("theme")).byReason).toEqual({ TEST_OVERRIDE: 4 });
    expect({ n: await countRows(h.ctx, "flag_last_evaluated") }).toEqual({ n: 0 });

    // Production traffic beside it: counted, and it sets lastEvaluatedAt.
    h.clock.advance(60_000);
    await evaluate("theme");
    const after = await insights("theme");
    expect(current(after)).toEqual({ start: "2026-11-22T10:00:00.000Z", total: 1, byVariant: { a: 1 }, byReason: { TEST_OVERRIDE: 4, FLAG_ENABLED: 1 } });
    expect(after.lastEvaluatedAt).toBe("2026-11-22T10:01:00.000Z");
  });
});

describe("lastEvaluatedAt on states", () => {
  test("set by production evaluations, per environment; kept once flushed", async () => {
    h.clock.advance(5 * 60_000);
    await evaluate("theme");
    const states = await call("GET", `${FLAGS}/theme/states`);
    expect(states.states.map((s: any) => [s.environment, s.lastEvaluatedAt])).toEqual([
      ["development", null],
      ["staging", null],
      ["production", "2026-11-22T10:05:00.000Z"],
    ]);
    expect((await call("GET", `${FLAGS}/theme/states/production`)).lastEvaluatedAt).toBe("2026-11-22T10:05:00.000Z");
    await flush();
    expect((await call("GET", `${FLAGS}/theme/states`)).states[2].lastEvaluatedAt).toBe("2026-11-22T10:05:00.000Z");
    // A PUT answers the state with it too.
    expect((await call("PUT", `${FLAGS}/theme/states/production`, { enabled: true, rolloutPercentage: 50 })).lastEvaluatedAt).toBe("2026-11-22T10:05:00.000Z");
  });
});

describe("across a restart", () => {
  // SQLite's file reopened. On PostgreSQL the same promise (a closed node's last counts written
  // before its pool closes, read by another) is tested in test/pg-nodes.test.ts, through HTTP.
  sqliteOnly("a context closed and reopened on the same SQLite file keeps the flushed counts and lastEvaluatedAt", async () => {
    for (let i = 0; i < 7; i++) await evaluate("theme", { userId: `u${i}`, plan: i < 3 ? "beta" : "free" });
    await flush();
    await evaluate("dark"); // not flushed by hand: closing the context flushes it
    const before = await insights("theme");
    const { dir } = h;
    h.ctx.close();

    const clock = new TestClock(NOW + 2 * 60_000);
    const config = loadConfig({ SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "error", SVC_LOG_FORMAT: "json" });
    const ctx = await createContext(config, { clock, log: createLogger({ level: "error", format: "json", write: () => {} }) });
    await bootstrap(ctx);
    const app = dispatcher(createApp(ctx, createServices(ctx)));
    const again = { request: (method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) => app(new Request(`http://localhost${path}`, { method, headers: init.headers })) };
    try {
      const after = await insights("theme", "environment=production", 200, again);
      expect(current(after)).toEqual({ start: "2026-11-22T10:00:00.000Z", total: 7, byVariant: { a: 4, b: 3 }, byReason: { TARGETING_RULE_MATCH: 3, FLAG_ENABLED: 4 } });
      expect(after).toEqual(before);
      expect(current(await insights("dark", "environment=production", 200, again)).byVariant).toEqual({ off: 1 });
      const states = await call("GET", `${FLAGS}/theme/states`, undefined, 200, admin, again);
      expect(states.states[2].lastEvaluatedAt).toBe("2026-11-22T10:00:00.000Z");
    } finally {
      ctx.close();
      // h.close() removes the directory; the first context is closed already (a second close is harmless).
      rmSync(dir, { recursive: true, force: true });
      h = { ...h, close: async () => {} };
    }
  });
});

describe("rollup and retention (test clock)", () => {
  test("hourly buckets older than 30 days become daily ones; daily ones older than a year are removed", async () => {
    // Two hours of one day: 10:00 and 13:00.
    await evaluate("theme");
    await flush();
    h.clock.advance(3 * HOUR);
    await evaluate("theme");
    await evaluate("theme", { userId: "z", plan: "beta" });
    await flush();
    const day = "interval=day&environment=production&from=2026-11-21T00:00:00Z&to=2026-11-24T00:00:00Z";
    const daily = await insights("theme", day);
    expect(daily.points.map((p: any) => [p.start, p.total])).toEqual([
      ["2026-11-21T00:00:00.000Z", 0],
      ["2026-11-22T00:00:00.000Z", 3],
      ["2026-11-23T00:00:00.000Z", 0],
    ]);

    // 29 days later nothing moves; 31 days later the day is rolled up.
    h.clock.ms = NOW + 29 * DAY;
    expect(await h.services.insights.rollup()).toEqual({ rolled: 0, deleted: 0 });
    h.clock.ms = NOW + 31 * DAY;
    expect(await h.services.insights.rollup()).toEqual({ rolled: 3, deleted: 0 });
    expect((await insightRows("SELECT day, bucket, variant, reason, count FROM flag_insights ORDER BY variant"))).toEqual([
      { day: 1, bucket: Date.parse("2026-11-22T00:00:00Z"), variant: "a", reason: "FLAG_ENABLED", count: 2 },
      { day: 1, bucket: Date.parse("2026-11-22T00:00:00Z"), variant: "b", reason: "TARGETING_RULE_MATCH", count: 1 },
    ]);
    expect((await insights("theme", day)).points).toEqual(daily.points);
    // Hourly points that old are gone: asking for them is a 400 that says to use days.
    const old = await insights("theme", "environment=production&from=2026-11-22T00:00:00Z&to=2026-11-23T00:00:00Z", 400);
    expect(old.details).toEqual([{ path: "query.from", message: "Hourly counts are kept 30 days: use interval=day for older ones" }]);

    // Past a year, the daily bucket goes too.
    h.clock.ms = NOW + 364 * DAY;
    expect(await h.services.insights.rollup()).toEqual({ rolled: 0, deleted: 0 });
    h.clock.ms = NOW + 367 * DAY;
    expect(await h.services.insights.rollup()).toEqual({ rolled: 0, deleted: 2 });
    expect({ n: await countRows(h.ctx, "flag_insights") }).toEqual({ n: 0 });
  });

  sqliteOnly("a rollup adds to a daily bucket that already holds counts", async () => {
    await evaluate("theme");
    await flush();
    h.clock.ms = NOW + 31 * DAY;
    await h.services.insights.rollup();
    // Counts for that old hour arrive again (a row written late): rolled into the same day.
    await h.ctx.stores.insights.writeNow(NOW, [{ projectId: (await call("GET", "/v1/projects/default")).id, environmentId: (await rawRows(h.ctx, "SELECT id FROM environments WHERE slug = 'production' AND project_id = (SELECT id FROM projects WHERE slug = 'default')"))[0]!.id as string, flagKey: "theme", cells: [{ variant: "a", reason: "FLAG_ENABLED", count: 4 }], lastAt: 0 }]);
    await h.services.insights.rollup();
    expect((await insightRows("SELECT day, count FROM flag_insights"))).toEqual([{ day: 1, count: 5 }]);
  });
});

describe("validation", () => {
  const cases: [string, string, number, { path: string; message?: string }[] | null][] = [
    ["no environment", "", 400, [{ path: "query.environment" }]],
    ["a malformed environment", "environment=Prod!", 400, [{ path: "query.environment" }]],
    ["an unknown interval", "environment=production&interval=week", 400, [{ path: "query.interval", message: "Must be hour or day" }]],
    ["a malformed from", "environment=production&from=yesterday", 400, [{ path: "query.from" }]],
    ["a time without a zone", "environment=production&to=2026-11-22T10:00:00", 400, [{ path: "query.to" }]],
    ["from after to", "environment=production&from=2026-11-22T09:00:00Z&to=2026-11-22T08:00:00Z", 400, [{ path: "query.from", message: "from must be before to" }]],
    ["more than 30 days of hours", "environment=production&from=2026-10-23T00:00:00Z&to=2026-11-22T10:00:00Z", 400, [{ path: "query.from" }]],
    ["more than 366 days of days", "interval=day&environment=production&from=2025-11-01T00:00:00Z&to=2026-11-22T00:00:00Z", 400, [{ path: "query.from" }]],
    ["an unknown field", "environment=production&granularity=hour", 400, null],
    ["an unknown environment", "environment=qa", 404, null],
  ];
  for (const [name, query, status, details] of cases) {
    test(`${name}: ${status}`, async () => {
      const body = await insights("theme", query, status);
      expect(body.error).toBe(status === 400 ? "VALIDATION_ERROR" : "NOT_FOUND");
      if (details) expect(body.details).toEqual(details.map((d) => expect.objectContaining(d)));
    });
  }

  test("an unknown flag or project: 404; 30 days of hours and 366 of days are fine", async () => {
    expect((await insights("nope", "environment=production", 404)).error).toBe("NOT_FOUND");
    expect((await call("GET", "/v1/projects/nope/flags/theme/insights?environment=production", undefined, 404)).error).toBe("NOT_FOUND");
    expect((await insights("theme", "environment=production&from=2026-10-23T11:00:00Z&to=2026-11-22T11:00:00Z")).points).toHaveLength(720);
    const days = await insights("theme", "interval=day&environment=production&from=2025-11-21T00:00:00Z&to=2026-11-22T00:00:00Z");
    expect(days.points).toHaveLength(366);
    expect((await insights("theme", "interval=day&environment=production")).points.at(-1).start).toBe("2026-11-22T00:00:00.000Z");
  });

  test("access as for reading flags: a mgmt key of the project and a viewer read; an eval key does not", async () => {
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    expect((await call("GET", `${FLAGS}/theme/insights?environment=production`, undefined, 200, mgmt)).flagKey).toBe("theme");
    expect((await call("GET", `${FLAGS}/theme/insights?environment=production`, undefined, 403, evalKey)).error).toBe("FORBIDDEN");
    expect((await call("GET", `${FLAGS}/theme/insights?environment=production`, undefined, 401, {})).error).toBe("UNAUTHORIZED");
  });
});
