/**
 * Plugins and integrations on several nodes (src/modules/leases/, docs/scaling.md): two contexts
 * on one PostgreSQL database, as two nodes are. A plugin and an integration's change-event
 * sends run on the one node that holds their lease: each change event reaches a local receiver
 * once, not once per node; when the holder is closed, the other node takes over within the
 * lease's TTL and goes on from the stored position, losing nothing. Skipped when PostgreSQL is
 * not installed.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bootstrap } from "../src/bootstrap";
import { loadConfig } from "../src/config";
import { pluginLease } from "../src/plugins/host";
import { integrationLease } from "../src/modules/integrations/sender";
import { createApp, createContext, createServices, dispatcher } from "../src/server";
import { tempDir, until } from "./helpers";
import { createDatabase, pgAvailable } from "./pg";
import { startReceiver, type Received } from "./webhook-receiver";

/** Short leases, so that a takeover is quick: renewed every 400 ms, lapsed 1.2 s after the last renewal. */
const TTL_MS = 1200;
const ADMIN = `svc_admin_${"k".repeat(32)}`;
const PACKAGE = "@test/counter";

/** A plugin that posts each event it is handed (its id and flag key) to config.url. */
function dropCounter(dataDir: string): void {
  const folder = join(dataDir, "marketplace", "counter-1.0.0");
  mkdirSync(folder, { recursive: true });
  writeFileSync(
    join(folder, "index.js"),
    `export async function onEvent(event, ctx) {
  await ctx.http({ method: "POST", url: ctx.config.url, headers: { "content-type": "application/json" }, body: JSON.stringify({ id: event.id, flagKey: event.data.flagKey }) });
}`,
  );
  writeFileSync(
    join(folder, "plugin.json"),
    JSON.stringify({
      packageName: PACKAGE,
      name: "Counter",
      description: "Posts each event it is handed",
      category: "monitoring",
      version: "1.0.0",
      author: "tests",
      entry: "index.js",
      hooks: ["onEvent"],
      configSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"], additionalProperties: false },
      publishedAt: "2026-11-01T00:00:00.000Z",
    }),
  );
}

type Node = Awaited<ReturnType<typeof node>>;

async function node(url: string) {
  const dir = tempDir();
  dropCounter(dir);
  const config = loadConfig({
    SVC_DATA_DIR: dir,
    SVC_DATABASE_URL: url,
    SVC_ADMIN_KEY: ADMIN,
    SVC_ADMIN_PASSWORD: "a-long-password",
    SVC_LOG_LEVEL: "error",
    SVC_EDITION: "pro",
    SVC_OUTBOUND_ALLOWED_HOSTS: "loopback",
  });
  const ctx = await createContext(config, { leaseTtlMs: TTL_MS });
  await bootstrap(ctx);
  const app = dispatcher(createApp(ctx, createServices(ctx)));
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await app(new Request(`http://localhost${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));
    return { status: res.status, body: (await res.json().catch(() => null)) as any };
  };
  await until("the counter package", () => ctx.catalog.get(PACKAGE, "1.0.0"));
  return { ctx, call };
}

/** Creates flags `prefix-0`…, alternating between the nodes given: each flag makes one change event per environment. */
async function createFlags(nodes: Node[], prefix: string, n: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = `${prefix}-${i}`;
    expect((await nodes[i % nodes.length]!.call("POST", "/v1/projects/default/flags", { key, name: key })).status).toBe(201);
    keys.push(key);
  }
  return keys;
}

/** Waits for `n` ids, then a while longer (time for a second sender, if there were one): exactly `n`, each once. */
async function arrivedOnce(what: string, ids: () => string[], n: number): Promise<void> {
  await until(what, () => (ids().length >= n ? true : undefined), 10_000);
  await Bun.sleep(TTL_MS);
  expect(ids()).toHaveLength(n);
  expect(new Set(ids()).size).toBe(n);
}

/** Closes the holder (a closed context is as a dead node), writes 2 flags through the other: the ms until `tookOver` holds (within the TTL and a tick). */
async function closeHolder(holder: Node, other: Node, prefix: string, tookOver: () => boolean | Promise<boolean>): Promise<number> {
  holder.ctx.close();
  const closedAt = performance.now();
  await createFlags([other], prefix, 2);
  await until("the other node took over", async () => (await tookOver()) || undefined, 5000);
  const ms = performance.now() - closedAt;
  expect(ms).toBeLessThan(TTL_MS + 1000);
  return ms;
}

/** The node holding `lease` once exactly one of `nodes` does, by its id. */
async function holderOf(nodes: Node[], lease: string): Promise<Node> {
  const id = await until(`a holder of ${lease}`, () => nodes[0]!.ctx.stores.leases.holder(lease).then((h) => h ?? undefined), 5000);
  return nodes.find((n) => n.ctx.node === id)!;
}

const receiver = startReceiver();
afterAll(() => receiver.stop());

describe.skipIf(!pgAvailable())("PostgreSQL nodes: plugins and integrations run on one node (leases)", () => {
  test("an integration's change events are sent once, by the lease holder; the holder closed, the other takes over within the TTL from the stored position", async () => {
    const url = await createDatabase();
    const a = await node(url);
    const b = await node(url);
    const slack = () => receiver.received.filter((r: Received) => r.path.endsWith("/services/T1/B1/leases"));
    // Slack's message names the change event's id after the second " · " of its context line.
    const sentIds = () => slack().map((r) => String(r.json.blocks[1].elements[0].text.split(" · ")[2]));
    try {
      const made = await a.call("POST", "/v1/projects/default/integrations", { type: "slack", config: { webhookUrl: `${receiver.url}/services/T1/B1/leases` } });
      expect(made.status).toBe(201);
      const lease = integrationLease(made.body.id);
      const holder = await holderOf([a, b], lease);
      const other = holder === a ? b : a;
      // The other node runs the integration too (its evaluations), and wants the lease.
      await until("B heard of the integration", () => other.ctx.stores.leases.holder(lease).then((h) => h === holder.ctx.node));

      await createFlags([a, b], "one", 4);
      await arrivedOnce("the first changes", sentIds, 12);

      const tookMs = await closeHolder(holder, other, "two", () => other.ctx.stores.leases.holder(lease).then((h) => h === other.ctx.node));
      await arrivedOnce("the changes after the takeover", sentIds, 18);
      console.log(`integration: takeover ${tookMs.toFixed(0)} ms after the holder closed (TTL ${TTL_MS} ms)`);
      other.ctx.close();
    } finally {
      a.ctx.close();
      b.ctx.close();
    }
  });

  test("a plugin runs on one node: each event handled once; node B's status names A; the holder closed, B takes it over from the stored position", async () => {
    const url = await createDatabase();
    const a = await node(url);
    const b = await node(url);
    const handed = () => receiver.received.filter((r: Received) => r.path.endsWith("/counter")).map((r) => String(r.json.id));
    try {
      const made = await a.call("POST", "/v1/projects/default/plugins", { packageName: PACKAGE, config: { url: `${receiver.url}/counter` } });
      expect(made.status).toBe(201);
      const id = String(made.body.id);
      const holder = await holderOf([a, b], pluginLease(id));
      const other = holder === a ? b : a;
      await until("active", async () => ((await other.call("GET", `/v1/projects/default/plugins/${id}/status`)).body.status === "active" ? true : undefined));
      // Read from the node that does not run it: the stored status and the node that does.
      const seen = (await other.call("GET", `/v1/projects/default/plugins/${id}/status`)).body;
      expect(seen).toMatchObject({ status: "active", node: holder.ctx.node, logs: [] });
      expect(holder.ctx.plugins.workers).toBe(1);
      expect(other.ctx.plugins.workers).toBe(0);
      expect(((await holder.call("GET", "/v1/health")).body as any).detail.node).toBe(holder.ctx.node);

      await createFlags([a, b], "p-one", 4);
      await arrivedOnce("the first events", handed, 12);
      const stats = (await other.call("GET", `/v1/projects/default/plugins/${id}/status`)).body.stats;
      expect(stats.eventsHandled).toBe(12);

      const tookMs = await closeHolder(holder, other, "p-two", () => other.ctx.plugins.workers === 1);
      await arrivedOnce("the events after the takeover", handed, 18);
      const after = (await other.call("GET", `/v1/projects/default/plugins/${id}/status`)).body;
      expect(after).toMatchObject({ status: "active", node: other.ctx.node, stats: { eventsHandled: 18 } });
      console.log(`plugin: takeover ${tookMs.toFixed(0)} ms after the holder closed (TTL ${TTL_MS} ms)`);
      await other.ctx.plugins.stopAll();
    } finally {
      a.ctx.close();
      b.ctx.close();
    }
  });
});
