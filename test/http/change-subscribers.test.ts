/**
 * The change log's consumers (issue 21, point 2), through HTTP: every write reaches the
 * evaluation snapshot before its response (read-your-writes), the credential registry (a new
 * key works on the next request, a deleted one or its project's is refused at once), the test
 * sessions (a deleted project's end at once), and the webhook outbox (events and deliveries
 * in the entry's own transaction, none for a refused write). Entries are published once, in
 * commit order, with increasing positions.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { ChangeEntry } from "../../src/changes/entry";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp, rawRows, countRows, sqliteOnly } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;

beforeEach(async () => {
  h = await testApp({ SVC_RATE_LIMITS: "eval:1000000,test:100000,mgmt:100000,full:100000,admin:1000000,user:100000,anonymous:100000" });
  admin = bearer(await seedAdminKey(h.ctx));
});
afterEach(() => h.close());

const send = async (method: string, path: string, body?: unknown, status = method === "POST" ? 201 : method === "DELETE" ? 204 : 200, headers = admin) =>
  json(await h.request(method, path, { headers, body }), status);
const count = (table: string) => countRows(h.ctx, table);
const positions = async () => ((await rawRows(h.ctx, "SELECT position FROM change_log ORDER BY position")) as { position: number }[]).map((r) => Number(r.position)); // bigint on PostgreSQL: text

describe("the evaluation snapshot", () => {
  test("each state PUT and flag PATCH is evaluated right after its response, 300 times in a row", async () => {
    const evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
    await send("POST", "/v1/projects/default/flags", { key: "hot", name: "Hot", variants: [{ key: "a" }, { key: "b" }] });
    const evaluate = async () => json(await h.request("POST", "/v1/evaluate", { headers: evalKey, body: { flagKey: "hot", context: { userId: "u1" } } }), 200);
    for (let i = 0; i < 300; i++) {
      const enabled = i % 2 === 0;
      await send("PUT", "/v1/projects/default/flags/hot/states/production", { enabled });
      expect((await evaluate()).enabled).toBe(enabled);
      if (!enabled) continue;
      // The rule now serves the other variant: the next evaluation must see it.
      const variant = i % 4 === 0 ? "a" : "b";
      await send("PATCH", "/v1/projects/default/flags/hot", { rules: [{ id: "rule_all", conditions: [{ attribute: "userId", operator: "equals", value: "u1" }], variant }] });
      expect((await evaluate()).variant).toBe(variant);
    }
    // A deleted flag is gone for the next evaluation too.
    await send("DELETE", "/v1/projects/default/flags/hot");
    expect((await evaluate()).reason).toBe("FLAG_NOT_FOUND");
  });
});

describe("credentials", () => {
  test("a created key works on the next request; deleted, it is refused at once", async () => {
    const { id, key } = await send("POST", "/v1/projects/default/api-keys", { name: "fresh", scope: "mgmt", environment: "development" });
    expect((await h.request("GET", "/v1/projects/default/flags", { headers: bearer(key) })).status).toBe(200);
    await send("DELETE", `/v1/api-keys/${id}`);
    expect((await h.request("GET", "/v1/projects/default/flags", { headers: bearer(key) })).status).toBe(401);
  });

  test("a rotated key's old secret is refused at once (no grace period), the new one works", async () => {
    const { id, key } = await send("POST", "/v1/projects/default/api-keys", { name: "rotated", scope: "mgmt", environment: "development" });
    const rotated = await send("POST", `/v1/api-keys/${id}/rotate`, undefined, 200);
    expect((await h.request("GET", "/v1/projects/default/flags", { headers: bearer(key) })).status).toBe(401);
    expect((await h.request("GET", "/v1/projects/default/flags", { headers: bearer(rotated.key) })).status).toBe(200);
  });

  test("a deleted project's keys are refused at once; another project's keep working", async () => {
    await send("POST", "/v1/projects", { slug: "doomed", name: "Doomed" });
    const doomed = bearer((await send("POST", "/v1/projects/doomed/api-keys", { name: "k", scope: "full", environment: "development" })).key);
    const kept = bearer((await send("POST", "/v1/projects/default/api-keys", { name: "k", scope: "full", environment: "development" })).key);
    expect((await h.request("GET", "/v1/projects/doomed", { headers: doomed })).status).toBe(200);
    await send("DELETE", "/v1/projects/doomed");
    expect((await h.request("GET", "/v1/projects/doomed", { headers: doomed })).status).toBe(401);
    expect((await h.request("GET", "/v1/projects/default", { headers: kept })).status).toBe(200);
  });
});

describe("test sessions", () => {
  test("a deleted project's sessions end at once; another project's stay", async () => {
    await send("POST", "/v1/projects", { slug: "doomed", name: "Doomed" });
    const doomedKey = bearer((await seedApiKey(h.ctx, "test", "doomed")).secret);
    const keptKey = bearer((await seedApiKey(h.ctx, "test", "default")).secret);
    const doomed = await send("POST", "/v1/testing/sessions", { projectId: "doomed" }, 201, doomedKey);
    const kept = await send("POST", "/v1/testing/sessions", { projectId: "default" }, 201, keptKey);
    const live = (id: string) => h.ctx.testSessions.live(id, h.clock.now()) !== undefined;
    expect([live(doomed.id), live(kept.id)]).toEqual([true, true]);
    await send("DELETE", "/v1/projects/doomed");
    expect([live(doomed.id), live(kept.id)]).toEqual([false, true]);
    expect((await h.request("GET", `/v1/testing/sessions/${kept.id}`, { headers: keptKey })).status).toBe(200);
  });
});

describe("the webhook outbox", () => {
  /** An enabled webhook of `default` on a name the default outbound setting refuses: attempts fail locally. */
  const hook = () => send("POST", "/v1/projects/default/webhooks", { url: "http://localhost:9/hook", events: ["flag.enabled", "flag.disabled", "flag.updated"], secret: "a-webhook-secret-of-some-length" });

  test("a state change: one event and one delivery per matching webhook, with its entry; a refused or a no-op write: none", async () => {
    const [one, two] = [await hook(), await hook()];
    await send("POST", "/v1/projects/default/flags", { key: "f", name: "F" });
    const events = async () => (await count("webhook_events"));
    const before = { events: (await events()), deliveries: (await count("webhook_deliveries")), entries: (await positions()).length };
    await send("PUT", "/v1/projects/default/flags/f/states/staging", { enabled: true });
    expect({ events: (await events()), deliveries: (await count("webhook_deliveries")), entries: (await positions()).length }).toEqual({
      events: before.events + 1,
      deliveries: before.deliveries + 2,
      entries: before.entries + 1,
    });
    const event = (await rawRows(h.ctx, "SELECT id, event, environment, created_at FROM webhook_events WHERE event = 'flag.enabled' AND environment = 'staging'"))[0] as Record<string, string>;
    const entry = (await rawRows(h.ctx, "SELECT at, action, environment FROM change_log ORDER BY position DESC LIMIT 1"))[0] as Record<string, string>;
    expect(event).toMatchObject({ event: "flag.enabled", environment: "staging", created_at: entry.at });
    expect(entry).toEqual({ at: event.created_at!, action: "enabled", environment: "staging" });
    const targets = ((await rawRows(h.ctx, "SELECT webhook_id AS w FROM webhook_deliveries WHERE event_id = ? ORDER BY webhook_id", [event.id!])) as { w: string }[]).map((r) => r.w);
    expect(targets).toEqual([one.id, two.id].sort());

    const after = { events: (await events()), deliveries: (await count("webhook_deliveries")), entries: (await positions()).length };
    await send("PUT", "/v1/projects/default/flags/f/states/staging", { enabled: true, rolloutPercentage: 101 }, 400);
    await send("PUT", "/v1/projects/default/flags/nowhere/states/staging", { enabled: false }, 404);
    await send("PUT", "/v1/projects/default/flags/f/states/staging", { enabled: true }); // changes nothing
    expect({ events: (await events()), deliveries: (await count("webhook_deliveries")), entries: (await positions()).length }).toEqual(after);
  });

  // SQLite-only: a temporary trigger makes the insert fail.
  sqliteOnly("one transaction: when the entry cannot be stored, neither the state nor its event and deliveries are; when the deliveries cannot, neither the state nor its entry", async () => {
    await hook();
    await send("POST", "/v1/projects/default/flags", { key: "f", name: "F" });
    const state = async () => ({ n: await countRows(h.ctx, "flag_states") });
    const before = { state: (await state()), events: (await count("webhook_events")), deliveries: (await count("webhook_deliveries")), entries: (await positions()) };
    const unchanged = async () => expect({ state: (await state()), events: (await count("webhook_events")), deliveries: (await count("webhook_deliveries")), entries: (await positions()) }).toEqual(before);

    await rawRows(h.ctx, "CREATE TEMP TRIGGER refuse_entry BEFORE INSERT ON change_log BEGIN SELECT RAISE(ABORT, 'no entry'); END");
    expect((await h.request("PUT", "/v1/projects/default/flags/f/states/production", { headers: admin, body: { enabled: true } })).status).toBe(500);
    (await unchanged());
    await rawRows(h.ctx, "DROP TRIGGER refuse_entry");

    await rawRows(h.ctx, "CREATE TEMP TRIGGER refuse_delivery BEFORE INSERT ON webhook_deliveries BEGIN SELECT RAISE(ABORT, 'no delivery'); END");
    expect((await h.request("PUT", "/v1/projects/default/flags/f/states/production", { headers: admin, body: { enabled: true } })).status).toBe(500);
    (await unchanged());
    await rawRows(h.ctx, "DROP TRIGGER refuse_delivery");

    // And the evaluation snapshot never saw either.
    const evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
    expect((await json(await h.request("POST", "/v1/evaluate", { headers: evalKey, body: { flagKey: "f" } }), 200)).enabled).toBe(false);
  });
});

describe("publication", () => {
  const ENVS = ["development", "staging", "production"];
  // Concurrent requests reach the write queue in no promised order (on PostgreSQL a write's reads
  // before it are I/O, so a later request can overtake an earlier one): each state PUT therefore
  // sends a rollout of its own, a change whatever the order, and the entries must chain.
  test("concurrent writes: every committed entry published once, in commit order, positions increasing; none lost", async () => {
    const published: ChangeEntry[][] = [];
    h.ctx.bus.subscribe("recorder", (entries) => void published.push([...entries]));
    const start = (await positions()).at(-1) ?? 0;
    for (let i = 0; i < 8; i++) await send("POST", "/v1/projects/default/flags", { key: `f${i}`, name: `F${i}` });
    const writes: Promise<unknown>[] = [];
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 8; i++) {
        writes.push(send("PUT", `/v1/projects/default/flags/f${i}/states/${ENVS[round % 3]}`, { enabled: round % 2 === 0, rolloutPercentage: round }));
        writes.push(send("PATCH", `/v1/projects/default/flags/f${i}`, { name: `F${i} round ${round}` }));
      }
    }
    await Promise.all(writes);
    const flat = published.flat().map((e) => e.position);
    const stored = (await positions()).filter((p) => p > start);
    expect(stored.length).toBe(8 + 8 * 20 * 2);
    expect(flat).toEqual(stored);
    for (let i = 1; i < flat.length; i++) expect(flat[i]!).toBeGreaterThan(flat[i - 1]!);
    // Each publication is one commit's entries: here one write, one entry.
    expect(published.every((p) => p.length === 1)).toBe(true);
    // No write lost: each state entry starts from what the one before it left, and the stored
    // state is what the last one says.
    const last = new Map<string, unknown>();
    for (const e of published.flat().filter((e) => e.resource.type === "flag_state")) {
      const at = `${e.resource.key}/${e.environment}`;
      const rollout = e.changes.rolloutPercentage as { before: unknown; after: unknown };
      expect(rollout.before).toBe(last.get(at) ?? null);
      last.set(at, rollout.after);
    }
    expect(last.size).toBe(8 * 3);
    for (const [at, rollout] of last) expect((await send("GET", `/v1/projects/default/flags/${at.replace("/", "/states/")}`)).rolloutPercentage).toBe(rollout);
  });
});
