/**
 * Integrations through the compiled binary (Pro): the sender runs on a thread of its own
 * there. Evaluations and changes reach a local receiver playing Mixpanel, with `stats` counting
 * what it took; flag changes committed before a kill -9 reach a receiver playing Slack after the
 * restart, each of them (at least once: one in flight at the kill may come twice).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
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
