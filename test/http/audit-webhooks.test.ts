/**
 * The change-log entries of webhook writes, and their absence where a write is no change of a
 * resource (redeliver, attempt-now) or is test data (test sessions and overrides): read from
 * `change_log` with SQL after each call through HTTP. A webhook's secret, old or new, appears
 * nowhere in the stored entry (its serialized row is searched for the text).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { SYSTEM } from "../../src/changes/entry";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, entriesAfter, lastPosition, rawRows, countRows } from "../helpers";

const SECRET = "first-secret-of-the-webhook-0001";
const NEW_SECRET = "second-secret-of-the-webhook-002";
const HOOKS = "/v1/projects/default/webhooks";
const URL = "http://127.0.0.1:9/hook";

let h: TestApp;
let admin: Record<string, string>;

beforeEach(async () => {
  h = await testApp({ SVC_EDITION: "pro", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
  admin = bearer(await seedAdminKey(h.ctx, "ops key"));
});
afterEach(() => h.close());


/** Everything stored of webhooks and their deliveries, to compare before and after a refused call. */
const stored = async () => JSON.stringify((await rawRows(h.ctx, "SELECT * FROM webhooks ORDER BY id"))) + JSON.stringify((await rawRows(h.ctx, "SELECT * FROM webhook_deliveries ORDER BY id")));

/** The call's response (its status checked) and the entries it appended. */
async function write(method: string, path: string, body: unknown, status: number, headers = admin) {
  const before = await lastPosition(h.ctx);
  const res = await h.request(method, path, { body, headers });
  const answer = await json(res, status);
  return { answer, requestId: res.headers.get("x-request-id"), entries: await entriesAfter(h.ctx, before) };
}

const register = (headers = admin, body: Record<string, unknown> = {}) =>
  write("POST", HOOKS, { url: URL, events: ["flag.created", "flag.enabled"], secret: SECRET, description: "ops", ...body }, 201, headers);

const adminKeyId = async () => (await h.ctx.stores.adminKeys.list()).find((k) => k.name === "ops key")!.id;
const defaultProjectId = async () => (await h.ctx.stores.projects.bySlug("default"))!.id;

describe("webhook writes append one entry each", () => {
  test("create (admin key): the whole record, the secret masked, the author and the request", async () => {
    const { answer, requestId, entries } = await register();
    expect(entries.length).toBe(1);
    const [e] = entries;
    expect(e).toMatchObject({
      actor_type: "admin_key",
      actor_id: (await adminKeyId()),
      actor_label: "ops key",
      request_id: requestId,
      project_id: (await defaultProjectId()),
      project_slug: "default",
      environment: null,
      resource_type: "webhook",
      resource_id: answer.id,
      resource_key: null,
      action: "created",
    });
    expect(e!.id).toMatch(/^aud_/);
    expect(JSON.parse(e!.changes)).toEqual({
      id: { before: null, after: answer.id },
      projectSlug: { before: null, after: "default" },
      url: { before: null, after: URL },
      events: { before: null, after: ["flag.created", "flag.enabled"] },
      environments: { before: null, after: [] },
      description: { before: null, after: "ops" },
      enabled: { before: null, after: true },
      createdAt: { before: null, after: answer.createdAt },
      updatedAt: { before: null, after: answer.updatedAt },
      secret: { before: null, after: "********", changed: true },
    });
    expect(JSON.stringify(e)).not.toContain(SECRET);
  });

  test("PATCH (editor JWT): the fields that changed, a new secret masked with changed: true, enabled as `updated`", async () => {
    const { answer: hook } = await register();
    const editor = await userToken(h.ctx, "editor");
    const user = (await rawRows(h.ctx, "SELECT id, email FROM users WHERE role = 'editor'"))[0] as { id: string; email: string };
    h.clock.advance(1000);
    const { answer, entries } = await write("PATCH", `/v1/webhooks/${hook.id}`, { secret: NEW_SECRET, enabled: false, description: null }, 200, editor);
    expect(entries.length).toBe(1);
    expect(entries[0]).toMatchObject({ actor_type: "user", actor_id: user.id, actor_label: user.email, resource_id: hook.id, resource_key: null, action: "updated" });
    expect(JSON.parse(entries[0]!.changes)).toEqual({
      description: { before: "ops", after: null },
      enabled: { before: true, after: false },
      secret: { before: "********", after: "********", changed: true },
    });
    expect(answer.updatedAt).not.toBe(hook.updatedAt); // moved, and not an entry field of its own
    const text = JSON.stringify(entries[0]);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(NEW_SECRET);
  });

  test("a PATCH that changes nothing (the same secret included) appends nothing", async () => {
    const { answer: hook } = await register();
    for (const body of [{}, { secret: SECRET, enabled: true, url: URL }]) {
      const { answer, entries } = await write("PATCH", `/v1/webhooks/${hook.id}`, body, 200);
      expect(entries).toEqual([]);
      expect(answer.updatedAt).toBe(hook.updatedAt);
    }
  });

  test("delete (mgmt key): the whole record, the secret masked; its project's key is the actor", async () => {
    const mgmt = await seedApiKey(h.ctx, "mgmt");
    const { answer: hook } = await register(bearer(mgmt.secret));
    const { entries } = await write("DELETE", `/v1/webhooks/${hook.id}`, undefined, 204, bearer(mgmt.secret));
    expect(entries.length).toBe(1);
    expect(entries[0]).toMatchObject({ actor_type: "api_key", actor_id: mgmt.id, actor_label: "mgmt key", resource_type: "webhook", resource_id: hook.id, action: "deleted" });
    const changes = JSON.parse(entries[0]!.changes);
    expect(changes.secret).toEqual({ before: "********", after: null });
    expect(changes.url).toEqual({ before: URL, after: null });
    expect(Object.keys(changes)).toEqual(["id", "projectSlug", "url", "events", "environments", "description", "enabled", "createdAt", "updatedAt", "secret"]);
    expect(JSON.stringify(entries[0])).not.toContain(SECRET);
  });

  test("a full key's create is recorded with that key as the actor", async () => {
    const full = await seedApiKey(h.ctx, "full");
    const { entries } = await register(bearer(full.secret));
    expect(entries.map((e) => [e.actor_type, e.actor_id, e.action])).toEqual([["api_key", full.id, "created"]]);
  });
});

describe("refused webhook writes append nothing and change nothing", () => {
  test("400, 403, 404 on create, PATCH and delete", async () => {
    const { answer: hook } = await register();
    await h.services.projects.create(SYSTEM, { slug: "other", name: "Other" });
    const otherKey = bearer((await seedApiKey(h.ctx, "mgmt", "other")).secret);
    const viewer = await userToken(h.ctx, "viewer");
    const before = await stored();
    const position = await lastPosition(h.ctx);
    const refused: [string, string, unknown, number, Record<string, string>][] = [
      ["POST", HOOKS, { url: "http://127.0.0.1:9/x", events: ["flag.created"], secret: "short" }, 400, admin],
      ["POST", HOOKS, { url: URL, events: ["flag.created"], secret: SECRET, environments: ["nowhere"] }, 400, admin],
      ["POST", "/v1/projects/missing/webhooks", { url: URL, events: ["flag.created"], secret: SECRET }, 404, admin],
      ["POST", HOOKS, { url: URL, events: ["flag.created"], secret: SECRET }, 403, viewer],
      ["PATCH", `/v1/webhooks/${hook.id}`, { environments: ["nowhere"], secret: NEW_SECRET }, 400, admin],
      ["PATCH", `/v1/webhooks/${hook.id}`, { secret: NEW_SECRET }, 403, otherKey],
      ["PATCH", "/v1/webhooks/wh_missing", { secret: NEW_SECRET }, 404, admin],
      ["DELETE", `/v1/webhooks/${hook.id}`, undefined, 403, otherKey],
      ["DELETE", "/v1/webhooks/wh_missing", undefined, 404, admin],
    ];
    for (const [method, path, body, status, headers] of refused) {
      const res = await h.request(method, path, { body, headers });
      expect(`${method} ${path} ${res.status}`).toBe(`${method} ${path} ${status}`);
    }
    expect(await entriesAfter(h.ctx, position)).toEqual([]);
    expect((await stored())).toBe(before);
  });
});

describe("delivery operations are no change of a resource: no entry", () => {
  test("redeliver and attempt-now append nothing", async () => {
    const { answer: hook } = await register();
    await h.request("POST", "/v1/projects/default/flags", { body: { key: "f", name: "f" }, headers: admin });
    const delivery = (await rawRows(h.ctx, "SELECT id FROM webhook_deliveries WHERE webhook_id = ?", [hook.id]))[0] as { id: string };
    // One waiting for a retry (attempt-now), then one failed for good (redeliver).
    await rawRows(h.ctx, "UPDATE webhook_deliveries SET attempts = 1, next_attempt_at = '2100-01-01T00:00:00.000Z' WHERE id = ?", [delivery.id]);
    const attempted = await write("POST", `/v1/webhook-deliveries/${delivery.id}/attempt-now`, undefined, 202);
    expect(attempted.entries).toEqual([]);
    await h.ctx.deliveries.drain();
    await rawRows(h.ctx, "UPDATE webhook_deliveries SET status = 'failed', attempts = 5, next_attempt_at = NULL WHERE id = ?", [delivery.id]);
    const redelivered = await write("POST", `/v1/webhook-deliveries/${delivery.id}/redeliver`, undefined, 202);
    expect(redelivered.answer.redeliveryOf).toBe(delivery.id);
    expect(redelivered.entries).toEqual([]);
  });
});

describe("test sessions and overrides are test data: no entry", () => {
  test("create, override, batch, remove override, destroy: nothing appended", async () => {
    const tester = bearer((await seedApiKey(h.ctx, "test")).secret);
    const position = await lastPosition(h.ctx);
    const session = await json(await h.request("POST", "/v1/testing/sessions", { body: { projectId: "default", label: "ci" }, headers: tester }), 201);
    const base = `/v1/testing/sessions/${session.id}`;
    await json(await h.request("PUT", `${base}/overrides/f`, { body: { value: true }, headers: tester }), 200);
    await json(await h.request("PUT", `${base}/overrides/batch`, { body: { overrides: { g: "blue", h: false } }, headers: tester }), 200);
    await json(await h.request("DELETE", `${base}/overrides/f`, { headers: tester }), 204);
    await json(await h.request("DELETE", base, { headers: tester }), 204);
    expect({ n: await countRows(h.ctx, "test_sessions") }).toEqual({ n: 0 });
    expect(await entriesAfter(h.ctx, position)).toEqual([]);
  });
});
