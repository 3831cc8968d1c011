/**
 * Integrations through the compiled binary (Pro): the sender runs on a thread of its own
 * there. Evaluations and changes reach a local receiver playing Mixpanel, with `stats` counting
 * what it took; flag changes committed before a kill -9 reach a receiver playing Slack after the
 * restart, each of them (at least once: one in flight at the kill may come twice). Killed three
 * times while changes flow to five integrations and a plugin, no `stats.sent` (nor the plugin's
 * `eventsHandled`) is ever below the distinct messages the receiver took.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { callServer, until } from "../helpers";
import { startReceiver } from "../webhook-receiver";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"integrate".repeat(5)}`;
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_EDITION: "pro", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_RATE_LIMITS: "admin:100000,eval:100000" };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const api = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

test("evaluations and changes reach Mixpanel's /import from the integrations thread; stats count the events taken", async () => {
  const mixpanel = startReceiver({ answer: (_req, n) => Response.json({ code: 200, num_records_imported: mixpanel.received[n - 1]!.json.length, status: "OK" }) });
  const srv = await startBinary({ dataDir: join(tempDir(), "data"), env: ENV });
  try {
    const created = await api(srv, "POST", "/v1/projects/default/integrations", { type: "mixpanel", config: { projectToken: "mp-token", apiHost: `http://127.0.0.1:${mixpanel.port}` } });
    expect(created.status).toBe(201);
    expect((await api(srv, "POST", "/v1/projects/default/flags", { key: "e2e-flag", name: "E2E" })).status).toBe(201);
    const key = await api(srv, "POST", "/v1/projects/default/api-keys", { name: "sdk", scope: "eval", environment: "production" });
    for (let i = 0; i < 50; i++) {
      const res = await callServer(srv.url, "POST", "/v1/evaluate", { key: key.body.key, body: { flagKey: "e2e-flag", context: { userId: `u${i}` } } });
      expect(res.status).toBe(200);
    }
    const events = () => mixpanel.received.flatMap((r) => r.json as { event: string; properties: Record<string, unknown> }[]);
    await until("50 exposures and 3 changes", () => events().filter((e) => e.event === "$experiment_started").length === 50 && events().length === 53, 15_000);
    expect(mixpanel.received[0]!.path).toBe("/import");
    expect(mixpanel.received[0]!.headers.get("authorization")).toBe(`Basic ${Buffer.from("mp-token:").toString("base64")}`);
    expect(events().filter((e) => e.event !== "$experiment_started").map((e) => e.properties.actor_type)).toEqual(["admin_key", "admin_key", "admin_key"]);
    const stats = await until("stats", async () => ((s) => s.sent === 53 && s)((await api(srv, "GET", `/v1/projects/default/integrations/${created.body.id}`)).body.stats));
    expect(stats).toMatchObject({ sent: 53, failed: 0, lastError: null });
  } finally {
    await srv.stop();
    mixpanel.stop();
  }
}, 60_000);

test("kill -9 with changes committed and not yet sent: after the restart Slack gets every one of them", async () => {
  // Slack takes one message at a time (in order) and this one takes 300 ms each: most wait at the kill.
  const slack = startReceiver({ answer: async () => (await Bun.sleep(300), new Response("ok")) });
  const dataDir = join(tempDir(), "data");
  let srv = await startBinary({ dataDir, env: ENV });
  try {
    const created = await api(srv, "POST", "/v1/projects/default/integrations", { type: "slack", config: { webhookUrl: `http://127.0.0.1:${slack.port}/services/T0001/B0001/e2e` } });
    expect(created.status).toBe(201);
    const keys = ["k9-1", "k9-2", "k9-3", "k9-4"];
    for (const key of keys) expect((await api(srv, "POST", "/v1/projects/default/flags", { key, name: key })).status).toBe(201);
    await slack.waitFor(1, 10_000);
    srv.proc.kill("SIGKILL");
    await srv.proc.exited;
    expect(slack.received.length).toBeLessThan(keys.length * 3);

    srv = await startBinary({ dataDir, env: ENV });
    // The event id is in each message's context block.
    const ids = () => slack.received.map((r) => /evt_[A-Za-z0-9]+/.exec(JSON.stringify(r.json.blocks))?.[0]);
    await until("every change", () => new Set(ids()).size === keys.length * 3, 30_000);
    const texts = slack.received.map((r) => r.json.text as string);
    for (const key of keys) for (const env of ["development", "staging", "production"]) expect(texts.some((t) => t.includes(`*${key}*`) && t.includes(`*${env}*`))).toBe(true);
    expect(texts.every((t) => t.startsWith("admin key “"))).toBe(true);
  } finally {
    await srv.stop();
    slack.stop();
  }
}, 90_000);

/** The receiver's side of the kill test: each integration type's messages (only changes flow) by their ids, and the plugin's. */
const MESSAGE_IDS: [string, (path: string, body: any) => string[] | null][] = [
  ["mixpanel", (path, body) => (path === "/import" ? body.map((e: any) => e.properties.$insert_id) : null)],
  ["amplitude", (path, body) => (path === "/2/httpapi" ? body.events.map((e: any) => e.insert_id) : null)],
  ["segment", (path, body) => (path === "/v1/batch" ? body.batch.map((m: any) => m.messageId) : null)],
  ["datadog", (path, body) => (path === "/api/v2/events" ? [body.data.attributes.attributes.change_metadata.flagsvc_event_id] : null)],
  ["slack", (path, body) => (path.startsWith("/services/") ? [/evt_[A-Za-z0-9]+/.exec(JSON.stringify(body.blocks))![0]] : null)],
  ["plugin", (path, body) => (path === "/plugin" ? [body.id] : null)],
];

test("3 × kill -9 while changes flow to five integrations and a plugin: after each restart every stats.sent (and eventsHandled) is at least the distinct messages the receiver took", async () => {
  const dataDir = join(tempDir(), "data");
  // What the receiver answered 200 to, per type: the distinct message ids.
  const taken = new Map<string, Set<string>>(MESSAGE_IDS.map(([type]) => [type, new Set<string>()]));
  const rx = startReceiver({
    answer: (_request, n) => {
      const { path, json: body } = rx.received[n - 1]!;
      for (const [type, ids] of MESSAGE_IDS) {
        const found = ids(path, body);
        if (found) for (const id of found) taken.get(type)!.add(id);
      }
      if (path === "/import") return Response.json({ code: 200, num_records_imported: body.length, status: "OK" });
      if (path === "/2/httpapi") return Response.json({ code: 200, events_ingested: body.events.length, payload_size_bytes: 0, server_upload_time: Date.now() });
      if (path === "/api/v2/events") return Response.json({ errors: [] }, { status: 202 });
      return new Response(path === "/v1/batch" ? '{"success":true}' : "ok");
    },
  });
  const host = `http://127.0.0.1:${rx.port}`;
  // A plugin that hands every event's id on (at least once, like the integrations).
  const folder = join(dataDir, "marketplace", "relay-1.0.0");
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "index.js"), `export async function onEvent(event, ctx) { await ctx.http({ method: "POST", url: ctx.config.url, headers: { "content-type": "application/json" }, body: JSON.stringify({ id: event.id }) }); }`);
  writeFileSync(
    join(folder, "plugin.json"),
    JSON.stringify({ packageName: "@e2e/relay", name: "relay", description: "relays event ids", category: "monitoring", version: "1.0.0", author: "tests", entry: "index.js", hooks: ["onEvent"], configSchema: { type: "object", properties: { url: { type: "string" } }, additionalProperties: false }, publishedAt: "2026-11-01T00:00:00.000Z" }),
  );
  let srv = await startBinary({ dataDir, env: ENV });
  const ids: Record<string, string> = {};
  let pluginId = "";
  let stopped = false;
  try {
    const configs: Record<string, Record<string, unknown>> = {
      mixpanel: { projectToken: "mp-token", apiHost: host },
      amplitude: { apiKey: "amp-key", apiHost: host },
      segment: { writeKey: "seg-key", apiHost: host },
      datadog: { apiKey: "dd-key", apiHost: host },
      slack: { webhookUrl: `${host}/services/T0001/B0001/e2e` },
    };
    for (const [type, config] of Object.entries(configs)) {
      const created = await api(srv, "POST", "/v1/projects/default/integrations", { type, config });
      expect(created.status).toBe(201);
      ids[type] = created.body.id;
    }
    const plugin = await api(srv, "POST", "/v1/projects/default/plugins", { packageName: "@e2e/relay", config: { url: `${host}/plugin` } });
    expect(plugin.status).toBe(201);
    pluginId = plugin.body.id;
    const flags = ["kill-a", "kill-b", "kill-c", "kill-d"];
    for (const key of flags) expect((await api(srv, "POST", "/v1/projects/default/flags", { key, name: key })).status).toBe(201);

    /** Two clients flip their flags' production state until the kill (one request at a time each). */
    const write = async (c: number) => {
      for (let n = 0; !stopped; n++) {
        const key = flags[(c * 2 + (n % 2)) % flags.length]!;
        try {
          await api(srv, "PUT", `/v1/projects/default/flags/${key}/states/production`, { enabled: n % 4 < 2 });
        } catch (e) {
          if (!stopped) throw e;
        }
      }
    };
    const check = async (when: string) => {
      for (const [type, id] of Object.entries(ids)) {
        const { stats } = (await api(srv, "GET", `/v1/projects/default/integrations/${id}`)).body;
        expect({ when, type, sent: stats.sent >= taken.get(type)!.size ? "at least taken" : `${stats.sent} < ${taken.get(type)!.size} taken` }).toEqual({ when, type, sent: "at least taken" });
      }
      const { stats } = (await api(srv, "GET", `/v1/projects/default/plugins/${pluginId}/status`)).body;
      const handled = stats.eventsHandled >= taken.get("plugin")!.size ? "at least taken" : `${stats.eventsHandled} < ${taken.get("plugin")!.size} taken`;
      expect({ when, type: "plugin", handled }).toEqual({ when, type: "plugin", handled: "at least taken" });
    };

    /** Every type has taken the same messages and nothing has arrived for a second: the backlog is through. */
    const caughtUp = async () => {
      let last = -1;
      await until(
        "the backlog sent",
        async () => {
          const sizes = [...taken.values()].map((s) => s.size);
          const now = rx.received.length;
          const quiet = now === last && new Set(sizes).size === 1;
          last = now;
          if (!quiet) await Bun.sleep(1000);
          return quiet;
        },
        30_000,
      );
    };

    for (let kill = 1; kill <= 3; kill++) {
      stopped = false;
      const load = [write(0), write(1)];
      // Long enough for every type to be sending (the first round also starts the plugin) and the kill to land mid-flow.
      await until("changes flowing to every type", () => [...taken.values()].every((s) => s.size > 0), 15_000);
      await Bun.sleep(300 + 200 * kill);
      stopped = true;
      srv.proc.kill("SIGKILL");
      await Promise.all([srv.proc.exited, ...load]);
      srv = await startBinary({ dataDir, env: ENV });
      // What was cut short at the kill is sent again (its counts with it); then the counts cover every message taken.
      await caughtUp();
      await check(`after kill ${kill}`);
    }
    // Every change reached every type.
    expect(new Set([...taken.values()].map((s) => s.size)).size).toBe(1);
  } finally {
    stopped = true;
    await srv.stop();
    rx.stop();
  }
}, 120_000);
