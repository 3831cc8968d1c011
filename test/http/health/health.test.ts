/**
 * /livez, /readyz and /v1/health (docs/metrics.md, "Health"): on a real listener (startServer),
 * and through app.handle for the admin detail.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/lib/log";
import { startServer, type RunningServer } from "../../../src/server";
import { VERSION } from "../../../src/version";
import { bearer, json, seedAdminKey, seedApiKey, tempDir, testApp, userToken, type TestApp } from "../../helpers";

const tls = { rejectUnauthorized: false };
const apps: TestApp[] = [];
afterEach(() => {
  for (const a of apps.splice(0)) a.close();
});

async function server(env: Record<string, string> = {}): Promise<RunningServer> {
  return startServer(loadConfig({ SVC_DATA_DIR: tempDir(), SVC_PORT: "0", SVC_HOST: "127.0.0.1", ...env }), {
    log: createLogger({ level: "error", format: "json", write: () => {} }),
  });
}

describe("/livez and /readyz", () => {
  test("a listening server: both 200, with nothing but a status; without a credential", async () => {
    const s = await server();
    try {
      const live = await fetch(`${s.url}/livez`, { tls });
      expect(live.status).toBe(200);
      expect(await live.text()).toBe('{"status":"ok"}');
      const ready = await fetch(`${s.url}/readyz`, { tls });
      expect(ready.status).toBe(200);
      expect(await ready.text()).toBe('{"status":"ready"}');
    } finally {
      await s.stop();
      rmSync(s.ctx.config.dataDir, { recursive: true, force: true });
    }
  }, 30_000);

  test("stopping: /readyz answers 503 at once while /livez and the API still answer (SVC_SHUTDOWN_DELAY_SECONDS), then the listener closes", async () => {
    const s = await server({ SVC_SHUTDOWN_DELAY_SECONDS: "1" });
    const stopping = s.stop();
    try {
      const ready = await fetch(`${s.url}/readyz`, { tls });
      expect(ready.status).toBe(503);
      expect(await ready.text()).toBe('{"status":"unavailable"}');
      expect((await fetch(`${s.url}/livez`, { tls })).status).toBe(200);
      expect((await fetch(`${s.url}/v1/health`, { tls })).status).toBe(200);
    } finally {
      await stopping;
    }
    expect(await fetch(`${s.url}/livez`, { tls }).then(() => "answered", () => "refused")).toBe("refused");
    rmSync(s.ctx.config.dataDir, { recursive: true, force: true });
  }, 30_000);

  test("an app that does not listen yet (created, not started) is not ready", async () => {
    const h = await testApp();
    apps.push(h);
    expect((await h.request("GET", "/readyz")).status).toBe(503);
    expect((await h.request("GET", "/livez")).status).toBe(200);
    h.ctx.readiness.listening();
    expect((await h.request("GET", "/readyz")).status).toBe(200);
  });
});

describe("/v1/health", () => {
  test("the same bytes for everyone without an admin credential; an admin key or an admin's token adds the detail", async () => {
    const h = await testApp();
    apps.push(h);
    const admin = bearer(await seedAdminKey(h.ctx));
    // The text as sent, its uptime aside (a second may tick between two calls).
    const plain = async (headers: Record<string, string>) => (await h.request("GET", "/v1/health", { headers })).text().then((t) => t.replace(/"uptimeSeconds":\d+/, '"uptimeSeconds":0'));
    const anonymous = await plain({});
    expect(anonymous).toMatch(new RegExp(`^\\{"status":"ok","version":"${VERSION.replace(/\./g, "\\.")}","edition":"ce","uptimeSeconds":0\\}$`));
    for (const headers of [bearer((await seedApiKey(h.ctx, "full")).secret), bearer("svc_admin_not-a-real-key-at-all-000000000"), { authorization: "nonsense" }]) {
      expect(await plain(headers)).toBe(anonymous);
    }
    expect(await plain(await userToken(h.ctx, "editor"))).toBe(anonymous);
    for (const headers of [admin, await userToken(h.ctx, "admin")]) {
      const b = await json(await h.request("GET", "/v1/health", { headers }), 200);
      expect(Object.keys(b)).toEqual(["status", "version", "edition", "uptimeSeconds", "detail"]);
      expect(b.detail).toEqual({
        node: h.ctx.node,
        database: { answers: true, bytes: expect.any(Number), lag: 0 },
        threads: { background: "in-process", integrations: "in-process" },
        pluginHost: { workers: 0, plugins: { installing: 0, active: 0, error: 0, disabled: 0 } },
        queues: { webhookDeliveries: 0, changeEvents: 0, schedulesPending: 0 },
      });
      expect(b.detail.database.bytes).toBeGreaterThan(0);
    }
  });

  test("on the server, the threads are running", async () => {
    const s = await server({ SVC_ADMIN_KEY: `svc_admin_${"h".repeat(40)}` });
    try {
      const res = await fetch(`${s.url}/v1/health`, { tls, headers: bearer(`svc_admin_${"h".repeat(40)}`) });
      expect(res.status).toBe(200);
      expect((await res.json()).detail.threads).toEqual({ background: "running", integrations: "running" });
    } finally {
      await s.stop();
      rmSync(s.ctx.config.dataDir, { recursive: true, force: true });
    }
  }, 30_000);
});
