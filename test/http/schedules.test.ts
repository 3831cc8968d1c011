/**
 * Scheduled changes (issue 31, part 3; docs/targeting.md "Scheduled changes"): create, ramps
 * (all or none), listings, cancel, and applying on the test clock through the service's
 * `applyDue` (what the server's every-second job runs): the state PUT's own path, its entry
 * authored by the creator with the schedule's id, its webhook delivery.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, entriesAfter, ISO_TIMESTAMP, json, lastPosition, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, countRows } from "../helpers";
import { startReceiver } from "../webhook-receiver";

const FLAGS = "/v1/projects/default/flags";
const SCHEDULES = `${FLAGS}/checkout/schedules`;
const NOW = Date.parse("2026-11-22T10:00:00.000Z"); // the TestClock's start
const inMinutes = (m: number) => new Date(NOW + m * 60_000).toISOString();

let h: TestApp;
let admin: Record<string, string>;

beforeEach(async () => {
  h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
  admin = bearer(await seedAdminKey(h.ctx, "ops admin"));
  await call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
});
afterEach(() => h.close());

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin) => json(await h.request(method, path, { body, headers }), status);
const state = async (env = "production") => call("GET", `${FLAGS}/checkout/states/${env}`);
const advanceTo = (iso: string) => (h.clock.ms = Date.parse(iso));
const statusOf = async (id: string) => (await call("GET", SCHEDULES)).schedules.find((s: { id: string }) => s.id === id).status;

describe("create", () => {
  test("201 with the schedule: pending, at normalised to UTC, createdBy the actor", async () => {
    const s = await call("POST", SCHEDULES, { environment: "production", at: "2026-11-22T11:30:00+01:00", state: { enabled: true } }, 201);
    expect(s).toEqual({
      id: expect.stringMatching(/^sch_[A-Za-z0-9]{22}$/),
      flagKey: "checkout",
      environment: "production",
      at: "2026-11-22T10:30:00.000Z",
      state: { enabled: true },
      status: "pending",
      createdBy: { type: "admin_key", id: expect.stringMatching(/^key_/), label: "ops admin" },
      createdAt: "2026-11-22T10:00:00.000Z",
      appliedAt: null,
      error: null,
    });
    expect(s.createdAt).toMatch(ISO_TIMESTAMP);
  });

  test("the creation is a change: a schedule entry, no webhook event", async () => {
    const rx = startReceiver();
    try {
      await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled"], secret: "a-webhook-secret-of-some-length" }, 201);
      const events = async () => ({ n: await countRows(h.ctx, "webhook_events") } as { n: number }).n;
      const before = await events();
      const position = await lastPosition(h.ctx);
      const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { rolloutPercentage: 20 } }, 201);
      const [entry, ...rest] = await entriesAfter(h.ctx, position);
      expect(rest).toEqual([]);
      expect(entry).toMatchObject({ resource_type: "schedule", resource_id: s.id, resource_key: "checkout", action: "created", environment: "production", actor_type: "admin_key" });
      expect(JSON.parse(entry!.changes).status).toEqual({ before: null, after: "pending" });
      expect((await events())).toBe(before);
      // The audit API takes the new resource type.
      const audit = await call("GET", "/v1/projects/default/audit-log?resourceType=schedule");
      expect(audit.entries.map((e: { resource: { id: string } }) => e.resource.id)).toEqual([s.id]);
    } finally {
      rx.stop();
    }
  });

  test("400 with details: at in the past, without a zone, state empty or invalid, both forms at once", async () => {
    const past = await call("POST", SCHEDULES, { environment: "production", at: "2026-11-22T09:59:59Z", state: { enabled: true } }, 400);
    expect(past.details).toEqual([{ path: "body.at", message: "Must be in the future (now: 2026-11-22T10:00:00.000Z)" }]);
    const now = await call("POST", SCHEDULES, { environment: "production", at: "2026-11-22T10:00:00Z", state: { enabled: true } }, 400);
    expect(now.details[0].path).toBe("body.at");
    const noZone = await call("POST", SCHEDULES, { environment: "production", at: "2026-11-22T12:00:00", state: { enabled: true } }, 400);
    expect(noZone.details.map((d: { path: string }) => d.path)).toContain("body.at");
    const noDay = await call("POST", SCHEDULES, { environment: "production", at: "2027-02-30T10:00:00Z", state: { enabled: true } }, 400);
    expect(noDay.details).toEqual([{ path: "body.at", message: "Not a valid time" }]);
    const empty = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: {} }, 400);
    expect(empty.details).toEqual([{ path: "body.state", message: "Must set at least one of enabled, rolloutPercentage" }]);
    const tooBig = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { rolloutPercentage: 101 } }, 400);
    expect(tooBig.details[0].path).toBe("body.state.rolloutPercentage");
    const decimals = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { rolloutPercentage: 1.2345 } }, 400);
    expect(decimals.details).toEqual([{ path: "body.state.rolloutPercentage", message: "At most 3 decimal places" }]);
    const notBool = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: "yes" } }, 400);
    expect(notBool.details[0].path).toBe("body.state.enabled");
    const unknown = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true, rules: [] } }, 400);
    expect(unknown.error).toBe("VALIDATION_ERROR");
    const missing = await call("POST", SCHEDULES, { environment: "production" }, 400);
    expect(missing.details).toEqual([
      { path: "body.at", message: "Required" },
      { path: "body.state", message: "Required" },
    ]);
    const both = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true }, steps: [{ at: inMinutes(6), state: { enabled: true } }] }, 400);
    expect(both.details[0].path).toBe("body.steps");
    expect((await call("GET", SCHEDULES)).schedules).toEqual([]);
  });

  test("404 for an unknown flag or environment", async () => {
    await call("POST", `${FLAGS}/nope/schedules`, { environment: "production", at: inMinutes(5), state: { enabled: true } }, 404);
    await call("POST", SCHEDULES, { environment: "nope", at: inMinutes(5), state: { enabled: true } }, 404);
  });
});

describe("ramps", () => {
  test("every step created, in one commit: 201 { schedules } in the order sent", async () => {
    const position = await lastPosition(h.ctx);
    const steps = [10, 50, 100].map((p, i) => ({ at: inMinutes(10 * (i + 1)), state: { enabled: true, rolloutPercentage: p } }));
    const { schedules } = await call("POST", SCHEDULES, { environment: "production", steps }, 201);
    expect(schedules.map((s: { at: string; state: unknown; status: string }) => [s.at, s.state, s.status])).toEqual(steps.map((s) => [s.at, s.state, "pending"]));
    const entries = await entriesAfter(h.ctx, position);
    expect(entries.map((e) => [e.resource_type, e.action])).toEqual([
      ["schedule", "created"],
      ["schedule", "created"],
      ["schedule", "created"],
    ]);
  });

  test("one bad step: none created, the step's problem in details", async () => {
    const steps = [
      { at: inMinutes(10), state: { enabled: true, rolloutPercentage: 10 } },
      { at: "2020-01-01T00:00:00Z", state: { rolloutPercentage: 50 } },
      { at: inMinutes(30), state: {} },
    ];
    const res = await call("POST", SCHEDULES, { environment: "production", steps }, 400);
    expect(res.details.map((d: { path: string }) => d.path)).toEqual(["body.steps[1].at", "body.steps[2].state"]);
    expect((await call("GET", SCHEDULES)).schedules).toEqual([]);
    await call("POST", SCHEDULES, { environment: "production", steps: [] }, 400);
  });
});

describe("listing", () => {
  test("ordered by at then id; status filters; the project's list holds every flag's", async () => {
    await call("POST", FLAGS, { key: "search", name: "Search" }, 201);
    const late = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(30), state: { enabled: true } }, 201);
    const early = await call("POST", SCHEDULES, { environment: "staging", at: inMinutes(10), state: { enabled: true } }, 201);
    const other = await call("POST", `${FLAGS}/search/schedules`, { environment: "production", at: inMinutes(20), state: { enabled: true } }, 201);
    const { schedules: same } = await call("POST", SCHEDULES, { environment: "development", steps: [{ at: inMinutes(40), state: { enabled: true } }, { at: inMinutes(40), state: { enabled: false } }] }, 201);
    await call("DELETE", `${SCHEDULES}/${late.id}`);
    const ids = (body: Record<string, any>) => (body.schedules as { id: string }[]).map((s) => s.id);
    const sameSorted = same.map((s: { id: string }) => s.id).sort();
    expect(ids(await call("GET", SCHEDULES))).toEqual([early.id, late.id, ...sameSorted]);
    expect(ids(await call("GET", "/v1/projects/default/schedules"))).toEqual([early.id, other.id, late.id, ...sameSorted]);
    expect(ids(await call("GET", "/v1/projects/default/schedules?status=pending"))).toEqual([early.id, other.id, ...sameSorted]);
    expect(ids(await call("GET", "/v1/projects/default/schedules?status=cancelled"))).toEqual([late.id]);
    expect(ids(await call("GET", `${SCHEDULES}?status=applied`))).toEqual([]);
    await call("GET", "/v1/projects/default/schedules?status=done", undefined, 400);
    await call("GET", `${FLAGS}/nope/schedules`, undefined, 404);
    await call("GET", "/v1/projects/nope/schedules", undefined, 404);
  });
});

describe("cancel", () => {
  test("pending becomes cancelled (kept, never applied, an entry); again: 409", async () => {
    const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true } }, 201);
    const position = await lastPosition(h.ctx);
    const cancelled = await call("DELETE", `${SCHEDULES}/${s.id}`);
    expect(cancelled).toEqual({ ...s, status: "cancelled" });
    const [entry] = await entriesAfter(h.ctx, position);
    expect(entry).toMatchObject({ resource_type: "schedule", resource_id: s.id, action: "updated" });
    expect(JSON.parse(entry!.changes)).toEqual({ status: { before: "pending", after: "cancelled" } });
    const again = await call("DELETE", `${SCHEDULES}/${s.id}`, undefined, 409);
    expect(again.error).toBe("CONFLICT");
    advanceTo(inMinutes(6));
    expect(await h.services.schedules.applyDue()).toBe(0);
    expect((await state()).enabled).toBe(false);
    expect(await statusOf(s.id)).toBe("cancelled");
  });

  test("an applied schedule: 409; an unknown id or another flag's: 404", async () => {
    const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true } }, 201);
    advanceTo(inMinutes(5));
    await h.services.schedules.applyDue();
    await call("DELETE", `${SCHEDULES}/${s.id}`, undefined, 409);
    await call("DELETE", `${SCHEDULES}/sch_unknown`, undefined, 404);
    await call("POST", FLAGS, { key: "search", name: "Search" }, 201);
    const other = await call("POST", `${FLAGS}/search/schedules`, { environment: "production", at: inMinutes(9), state: { enabled: true } }, 201);
    await call("DELETE", `${SCHEDULES}/${other.id}`, undefined, 404);
  });
});

describe("applying", () => {
  test("at its time, through the state PUT's path: state, entry by the creator with the schedule's id, a webhook delivery", async () => {
    const rx = startReceiver();
    try {
      await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled", "flag.updated"], secret: "a-webhook-secret-of-some-length", environments: ["production"] }, 201);
      const editor = await userToken(h.ctx, "editor");
      const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true, rolloutPercentage: 25 } }, 201, editor);
      expect(s.createdBy.type).toBe("user");
      // Not yet.
      h.clock.ms = NOW + 5 * 60_000 - 1;
      expect(await h.services.schedules.applyDue()).toBe(0);
      expect((await state()).enabled).toBe(false);
      const position = await lastPosition(h.ctx);
      const deliveries = async () => ({ n: await countRows(h.ctx, "webhook_deliveries") } as { n: number }).n;
      advanceTo(new Date(NOW + 5 * 60_000 + 400).toISOString());
      expect(await h.services.schedules.applyDue()).toBe(1);
      expect(await state()).toMatchObject({ enabled: true, rolloutPercentage: 25, updatedAt: new Date(NOW + 5 * 60_000 + 400).toISOString() });
      const [entry, ...rest] = await entriesAfter(h.ctx, position);
      expect(rest).toEqual([]);
      expect(entry).toMatchObject({
        resource_type: "flag_state",
        resource_key: "checkout",
        environment: "production",
        action: "enabled",
        actor_type: "user",
        actor_id: s.createdBy.id,
        actor_label: s.createdBy.label,
        request_id: s.id,
      });
      expect((await deliveries())).toBe(1);
      const [applied] = (await call("GET", SCHEDULES)).schedules;
      expect(applied).toEqual({ ...s, status: "applied", appliedAt: entry!.at });
      // Applied once: the next run takes nothing.
      expect(await h.services.schedules.applyDue()).toBe(0);
    } finally {
      rx.stop();
    }
  });

  test("due ones in order of at; rollout only keeps enabled; a state it does not change: applied, no entry", async () => {
    await call("PUT", `${FLAGS}/checkout/states/production`, { enabled: true });
    await call("PUT", `${FLAGS}/checkout/states/staging`, { enabled: false });
    const { schedules } = await call("POST", SCHEDULES, { environment: "production", steps: [{ at: inMinutes(20), state: { rolloutPercentage: 50 } }, { at: inMinutes(10), state: { rolloutPercentage: 10 } }] }, 201);
    const same = await call("POST", SCHEDULES, { environment: "staging", at: inMinutes(15), state: { enabled: false } }, 201);
    const position = await lastPosition(h.ctx);
    expect([await h.services.schedules.countPending(), await h.services.schedules.countDue()]).toEqual([3, 0]);
    advanceTo(inMinutes(30));
    expect(await h.services.schedules.countDue()).toBe(3);
    expect(await h.services.schedules.applyDue()).toBe(3);
    expect(await h.services.schedules.countPending()).toBe(0);
    expect(await state()).toMatchObject({ enabled: true, rolloutPercentage: 50 });
    const entries = await entriesAfter(h.ctx, position);
    expect(entries.map((e) => [e.request_id, JSON.parse(e.changes).rolloutPercentage.after])).toEqual([
      [schedules[1].id, 10],
      [schedules[0].id, 50],
    ]);
    expect(await statusOf(same.id)).toBe("applied");
  });

  test("a schedule whose flag or environment is gone fails at its time, with error", async () => {
    const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { enabled: true } }, 201);
    await call("POST", "/v1/projects/default/environments", { slug: "qa", name: "QA" }, 201);
    const qa = await call("POST", SCHEDULES, { environment: "qa", at: inMinutes(6), state: { enabled: true } }, 201);
    await call("DELETE", `${FLAGS}/checkout`, undefined, 204);
    await call("DELETE", "/v1/projects/default/environments/qa", undefined, 204);
    // A new flag of the same key is another flag.
    await call("POST", FLAGS, { key: "checkout", name: "Checkout again" }, 201);
    const position = await lastPosition(h.ctx);
    advanceTo(inMinutes(10));
    expect(await h.services.schedules.applyDue()).toBe(2);
    const { schedules } = await call("GET", "/v1/projects/default/schedules?status=failed");
    expect(schedules.map((x: { id: string; error: string; appliedAt: null }) => [x.id, x.error, x.appliedAt])).toEqual([
      [s.id, "Flag checkout no longer exists"],
      [qa.id, "Environment qa no longer exists"],
    ].map(([id, error]) => [id, error, null]));
    expect((await state()).enabled).toBe(false);
    const entries = await entriesAfter(h.ctx, position);
    expect(entries.map((e) => [e.resource_type, e.action, e.actor_type, e.request_id])).toEqual([
      ["schedule", "updated", "system", s.id],
      ["schedule", "updated", "system", qa.id],
    ]);
    // A failed schedule cannot be cancelled.
    await call("DELETE", `${SCHEDULES}/${s.id}`, undefined, 409);
  });

  test("a request that sends a schedule's id as X-Request-Id does not mark it applied", async () => {
    const s = await call("POST", SCHEDULES, { environment: "production", at: inMinutes(5), state: { rolloutPercentage: 30 } }, 201);
    const editor = await userToken(h.ctx, "editor");
    await call("PUT", `${FLAGS}/checkout/states/production`, { enabled: true }, 200, { ...editor, "x-request-id": s.id });
    expect(await statusOf(s.id)).toBe("pending");
  });
});

describe("access", () => {
  test("reads: every role and mgmt/full keys; writes: admin and editor, mgmt/full keys, admin keys", async () => {
    const body = { environment: "production", at: inMinutes(5), state: { enabled: true } };
    const viewer = await userToken(h.ctx, "viewer");
    const editor = await userToken(h.ctx, "editor");
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    const full = bearer((await seedApiKey(h.ctx, "full")).secret);
    const evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
    for (const who of [viewer, editor, mgmt, full]) {
      await call("GET", SCHEDULES, undefined, 200, who);
      await call("GET", "/v1/projects/default/schedules", undefined, 200, who);
    }
    await call("POST", SCHEDULES, body, 403, viewer);
    const byEditor = await call("POST", SCHEDULES, body, 201, editor);
    await call("DELETE", `${SCHEDULES}/${byEditor.id}`, undefined, 403, viewer);
    const byMgmt = await call("POST", SCHEDULES, body, 201, mgmt);
    expect(byMgmt.createdBy).toMatchObject({ type: "api_key", label: "mgmt key" });
    await call("DELETE", `${SCHEDULES}/${byMgmt.id}`, undefined, 200, full);
    await call("DELETE", `${SCHEDULES}/${byEditor.id}`, undefined, 200, editor);
    await call("GET", SCHEDULES, undefined, 403, evalKey);
    await call("POST", SCHEDULES, body, 403, evalKey);
    await call("GET", SCHEDULES, undefined, 401, {});
  });
});
