/**
 * /metrics and the health probes through the compiled binary (docs/metrics.md): a scrape with
 * the metrics token, parsed by a real Prometheus text parser, whose counts follow what was done
 * (webhook outcomes come from the background thread); and on SIGTERM, /readyz at 503 while the
 * process keeps serving for SVC_SHUTDOWN_DELAY_SECONDS with a stream open, then a clean exit.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import parse from "parse-prometheus-text-format";
import { callServer } from "../helpers";
import { startReceiver } from "../webhook-receiver";
import { binaryPath, cleanup, startBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"metr".repeat(10)}`;
const TOKEN = "e2e-metrics-token-0123456789abcdefghij";
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_METRICS_TOKEN: TOKEN, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_LOG_FORMAT: "json", SVC_SHUTDOWN_DELAY_SECONDS: "2" };
const tls = { rejectUnauthorized: false };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

test(
  "the binary: /metrics with the token; /readyz 503 during the SIGTERM drain while /livez and an open stream still answer; exit 0",
  async () => {
    const rx = startReceiver();
    const srv = await startBinary({ env: ENV });
    try {
      const call = async (method: string, path: string, body?: unknown, key = ADMIN_KEY) => (await callServer(srv.url, method, path, { key, body })).body;
      await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.created"], environments: ["production"], secret: "e2e-metrics-secret" });
      await call("POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout" });
      const { key } = await call("POST", "/v1/projects/default/api-keys", { name: "e2e", scope: "full", environment: "production" });
      for (let i = 0; i < 4; i++) await call("POST", "/v1/evaluate", { flagKey: "checkout" }, key);
      await rx.waitFor(1, 5_000);

      const scrape = async () => {
        const res = await fetch(`${srv.url}/metrics`, { tls, headers: { authorization: `Bearer ${TOKEN}` } });
        expect(res.status).toBe(200);
        return new Map(parse(await res.text()).map((f) => [f.name, f.metrics]));
      };
      const at = (m: Map<string, { labels?: Record<string, string>; value?: string }[]>, name: string, labels: Record<string, string>) =>
        Number(m.get(name)?.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v))?.value ?? NaN);
      let metrics = await scrape();
      expect(at(metrics, "flagsvc_evaluations_total", { project: "default", environment: "production", flag: "checkout", variant: "off", reason: "FLAG_DISABLED" })).toBe(4);
      expect(at(metrics, "flagsvc_http_requests_total", { method: "POST", route: "/v1/evaluate", status: "200" })).toBe(4);
      expect(at(metrics, "flagsvc_build_info", {})).toBe(1);
      expect(metrics.has("process_resident_memory_bytes")).toBe(true);
      // The background thread reports its stored outcomes every second.
      for (let waited = 0; at(metrics, "flagsvc_webhook_deliveries_total", { outcome: "succeeded" }) !== 1 && waited < 5_000; waited += 250) {
        await Bun.sleep(250);
        metrics = await scrape();
      }
      expect(at(metrics, "flagsvc_webhook_deliveries_total", { outcome: "succeeded" })).toBe(1);
      expect((await fetch(`${srv.url}/metrics`, { tls })).status).toBe(401);

      expect((await fetch(`${srv.url}/readyz`, { tls })).status).toBe(200);
      const stream = await fetch(`${srv.url}/v1/definitions/stream`, { tls, headers: { authorization: `Bearer ${key}` } });
      expect(stream.status).toBe(200);
      const reader = stream.body!.getReader();
      await reader.read(); // the first event: the stream is open

      const exited = srv.stop("SIGTERM");
      await srv.waitFor(/draining: \/readyz answers 503/, 5_000);
      const ready = await fetch(`${srv.url}/readyz`, { tls });
      expect(ready.status).toBe(503);
      expect(await ready.text()).toBe('{"status":"unavailable"}');
      expect((await fetch(`${srv.url}/livez`, { tls })).status).toBe(200);
      metrics = await scrape();
      expect(at(metrics, "flagsvc_streams_connected", { kind: "definitions" })).toBe(1);
      expect(await exited).toBe(0);
      // The stream was ended by the drain.
      for (;;) if ((await reader.read()).done) break;
    } finally {
      if (srv.proc.exitCode === null) await srv.stop();
      rx.stop();
    }
  },
  60_000,
);
