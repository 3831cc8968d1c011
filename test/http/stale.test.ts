/**
 * Stale flags (issue 32 part 3, docs/insights.md) on the test clock, through the detection the
 * server runs every 5 minutes (`services.insights.detectStale`): both kinds, a new flag never
 * stale, `staleAfterDays`, the `?stale=` filter, and `flag.stale` sent once to a real local
 * receiver for a webhook that lists it, never to one that lists the events of before.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, entriesAfter, json, lastPosition, seedAdminKey, seedApiKey, testApp, type TestApp, countRows, rawRows } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

const FLAGS = "/v1/projects/default/flags";
const NOW = Date.parse("2026-11-22T10:00:00.000Z"); // the TestClock's start
const DAY = 86_400_000;
const at = (days: number) => new Date(NOW + days * DAY).toISOString();
const OLD_EVENTS = ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled"];

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;

beforeEach(async () => {
  h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
});
afterEach(() => h.close());

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin) => json(await h.request(method, path, { body, headers }), status);
const evaluate = (flagKey: string, headers = evalKey) => call("POST", "/v1/evaluate", { flagKey, context: { userId: "u1" } }, 200, headers);
const toDay = (days: number) => (h.clock.ms = NOW + days * DAY);
const detect = () => h.services.insights.detectStale();
const stale = async (key: string) => (await call("GET", `${FLAGS}/${key}`)).stale;
const listed = async (query: string) => (await call("GET", `${FLAGS}?${query}`)).flags.map((f: { key: string }) => f.key);
const enableEverywhere = async (key: string, rolloutPercentage: number | null = null) => {
  for (const env of ["development", "staging", "production"]) await call("PUT", `${FLAGS}/${key}/states/${env}`, { enabled: true, rolloutPercentage });
};

describe("not_evaluated", () => {
  test("since when evaluations are counted is stored by the first start, before a detection uses it", async () => {
    toDay(40);
    expect(await detect()).toEqual([]);
    expect(await rawRows(h.ctx, "SELECT value FROM settings WHERE key = 'insights_observed_since'")).toEqual([{ value: at(0) }]);
  });

  test("a flag never evaluated is stale N days after its creation; a new flag never is", async () => {
    await call("POST", FLAGS, { key: "unused", name: "Unused" }, 201);
    expect(await stale("unused")).toBeNull();
    await detect();
    expect(await stale("unused")).toBeNull();
    toDay(29.9);
    expect(await detect()).toEqual([]);
    await call("POST", FLAGS, { key: "fresh", name: "Fresh" }, 201); // created on day 29.9
    toDay(30);
    await detect();
    expect(await stale("unused")).toEqual({ reason: "not_evaluated", since: at(30) });
    expect(await stale("fresh")).toBeNull(); // a day old
    expect(await listed("stale=true")).toEqual(["unused"]);
    expect(await listed("stale=false")).toEqual(["fresh"]);
    expect((await call("GET", FLAGS)).flags.map((f: any) => [f.key, f.stale])).toEqual([
      ["fresh", null],
      ["unused", { reason: "not_evaluated", since: at(30) }],
    ]);
    expect((await call("GET", `${FLAGS}?stale=maybe`, undefined, 400)).details[0].path).toBe("query.stale");
  });

  test("counted from the last production evaluation in any environment; test-session overrides do not count", async () => {
    await call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
    // Half the users in production: not one value to everyone (that would be fully_rolled_out).
    await call("PUT", `${FLAGS}/checkout/states/production`, { enabled: true, rolloutPercentage: 50 });
    toDay(20);
    await evaluate("checkout"); // production
    // A test session's override on day 40 is not traffic.
    toDay(40);
    const testKey = bearer((await seedApiKey(h.ctx, "test", "default", "production")).secret);
    const session = await call("POST", "/v1/testing/sessions", { projectId: (await call("GET", "/v1/projects/default")).id }, 201, testKey);
    await call("PUT", `/v1/testing/sessions/${session.id}/overrides/checkout`, { value: true }, 200, testKey);
    expect((await evaluate("checkout", { ...evalKey, "x-service-session": session.token })).reason).toBe("TEST_OVERRIDE");
    await detect();
    expect(await stale("checkout")).toBeNull(); // 20 days since the production evaluation
    toDay(50);
    await detect();
    expect(await stale("checkout")).toEqual({ reason: "not_evaluated", since: at(50) });
    // Evaluated again: no longer stale at the next detection.
    await evaluate("checkout");
    await detect();
    expect(await stale("checkout")).toBeNull();
  });

  test("staleAfterDays: PATCH on the project, shown in its record, bounded; the next detection follows it", async () => {
    expect((await call("GET", "/v1/projects/default")).staleAfterDays).toBe(30);
    await call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
    toDay(8);
    await detect();
    expect(await stale("checkout")).toBeNull();
    const patched = await call("PATCH", "/v1/projects/default", { staleAfterDays: 7 });
    expect(patched.staleAfterDays).toBe(7);
    expect(patched.updatedAt).toBe(at(8));
    await detect();
    expect(await stale("checkout")).toEqual({ reason: "not_evaluated", since: at(7) });
    for (const bad of [0, 366, 7.5, "7"]) {
      expect((await call("PATCH", "/v1/projects/default", { staleAfterDays: bad }, 400)).details[0].path).toBe("body.staleAfterDays");
    }
    expect((await call("GET", "/v1/projects/default")).staleAfterDays).toBe(7);
    await call("PATCH", "/v1/projects/default", { staleAfterDays: 60 });
    await detect();
    expect(await stale("checkout")).toBeNull();
  });
});

describe("fully_rolled_out", () => {
  /** Keeps the flag evaluated (production traffic) every 10 days up to `days`. */
  const keepEvaluating = async (key: string, days: number) => {
    for (let d = 10; d <= days; d += 10) {
      toDay(d);
      await evaluate(key);
    }
  };

  test("one value to everyone in every environment, unchanged for N days", async () => {
    await call("POST", FLAGS, { key: "everyone", name: "Everyone" }, 201);
    await enableEverywhere("everyone");
    await call("POST", FLAGS, { key: "half", name: "Half" }, 201);
    await enableEverywhere("half", 50);
    await call("POST", FLAGS, { key: "targeted", name: "Targeted", rules: [{ conditions: [{ attribute: "plan", operator: "equals", value: "beta" }] }] }, 201);
    await enableEverywhere("targeted");
    await call("POST", FLAGS, { key: "off", name: "Off everywhere" }, 201);
    await call("POST", FLAGS, { key: "weighted", name: "Weighted", variants: [{ key: "a", weight: 100 }, { key: "b", weight: 0 }] }, 201);
    await enableEverywhere("weighted");
    await call("POST", FLAGS, { key: "split", name: "Split", variants: [{ key: "a", weight: 50 }, { key: "b", weight: 50 }] }, 201);
    await enableEverywhere("split");
    for (const key of ["everyone", "half", "targeted", "off", "weighted", "split"]) await keepEvaluating(key, 30);
    toDay(30);
    await detect();
    const all = Object.fromEntries((await call("GET", FLAGS)).flags.map((f: any) => [f.key, f.stale]));
    expect(all).toEqual({
      everyone: { reason: "fully_rolled_out", since: at(30) },
      half: null,
      targeted: null,
      off: { reason: "fully_rolled_out", since: at(30) },
      weighted: { reason: "fully_rolled_out", since: at(30) },
      split: null,
    });
  });

  test("a change of a state or of the rules restarts the count", async () => {
    await call("POST", FLAGS, { key: "everyone", name: "Everyone" }, 201);
    await enableEverywhere("everyone");
    toDay(10);
    await evaluate("everyone");
    await call("PUT", `${FLAGS}/everyone/states/staging`, { enabled: true, rolloutPercentage: 100 }); // still everyone, but a change
    toDay(20);
    await evaluate("everyone");
    await call("PATCH", `${FLAGS}/everyone`, { rules: [{ name: "all", conditions: [] }] }); // a rule for everyone: still one value
    toDay(30);
    await evaluate("everyone");
    await detect();
    expect(await stale("everyone")).toBeNull();
    toDay(50);
    await evaluate("everyone");
    await detect();
    expect(await stale("everyone")).toEqual({ reason: "fully_rolled_out", since: at(50) });
    // Changed again: no longer stale at the next detection.
    await call("PUT", `${FLAGS}/everyone/states/production`, { enabled: true, rolloutPercentage: 10 });
    await detect();
    expect(await stale("everyone")).toBeNull();
  });
});

describe("flag.stale", () => {
  let stale: Receiver;
  let old: Receiver;
  beforeEach(() => {
    stale = startReceiver();
    old = startReceiver();
  });
  afterEach(() => {
    stale.stop();
    old.stop();
  });

  test("once per turn to stale, to a webhook that lists it, never to one that lists the events of before", async () => {
    await call("POST", "/v1/projects/default/webhooks", { url: stale.url, events: ["flag.stale"], secret: "a-webhook-secret-of-some-length", environments: ["production"] }, 201);
    await call("POST", "/v1/projects/default/webhooks", { url: old.url, events: OLD_EVENTS, secret: "a-webhook-secret-of-some-length" }, 201);
    await call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
    await call("PUT", `${FLAGS}/checkout/states/production`, { enabled: true, rolloutPercentage: 20 });
    await old.waitFor(4); // flag.created in each of 3 environments, flag.enabled in production
    const position = await lastPosition(h.ctx);
    toDay(31);
    const changes = await detect();
    expect(changes.map((c) => [c.key, c.before, c.after])).toEqual([["checkout", null, { reason: "not_evaluated", since: at(30) }]]);
    const [received] = await stale.waitFor(1);
    expect(received!.json).toEqual({
      id: expect.stringMatching(/^evt_/),
      event: "flag.stale",
      projectSlug: "default",
      environment: "production",
      timestamp: at(31),
      data: { flagKey: "checkout", previousState: { enabled: true }, currentState: { enabled: true }, stale: { reason: "not_evaluated", since: at(30) } },
    });
    expect(received!.headers.get("x-service-event")).toBe("flag.stale");
    // Its entry: a change of the flag by the system, its staleness alone.
    const entries = await entriesAfter(h.ctx, position);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ resource_type: "flag", resource_key: "checkout", action: "updated", actor_type: "system" });
    expect(JSON.parse(entries[0]!.changes)).toEqual({ stale: { before: null, after: { reason: "not_evaluated", since: at(30) } } });

    // Still stale: nothing more.
    toDay(32);
    expect(await detect()).toEqual([]);
    // No longer stale (evaluated), then stale again: one more event.
    await evaluate("checkout");
    expect((await detect()).map((c) => c.after)).toEqual([null]);
    toDay(70);
    await detect();
    await stale.waitFor(2);
    expect(stale.received[1]!.json.data.stale).toEqual({ reason: "not_evaluated", since: at(62) });
    await Bun.sleep(100);
    expect(stale.received).toHaveLength(2);
    // The webhook of the five events of before got none of it (its deliveries run concurrently:
    // compared in any order).
    expect(old.received.map((r) => r.json.event).sort()).toEqual(["flag.created", "flag.created", "flag.created", "flag.enabled"]);
    // A deleted stale flag takes its staleness with it.
    await call("DELETE", `${FLAGS}/checkout`, undefined, 204);
    expect({ n: await countRows(h.ctx, "flag_stale") }).toEqual({ n: 0 });
  });
});
