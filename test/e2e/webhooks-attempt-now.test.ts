/**
 * attempt-now through the compiled binary, on the real clock (issue 20, point 6): a delivery
 * whose retry is an hour away is attempted at once when asked, from the server's background
 * thread, and succeeds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { callServer } from "../helpers";
import { startReceiver } from "../webhook-receiver";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"now1".repeat(10)}`;

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

test(
  "a delivery waiting an hour for its retry arrives within a second of attempt-now",
  async () => {
    const rx = startReceiver({ answer: (_req, n) => new Response(null, { status: n === 1 ? 503 : 200 }) });
    const env = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_RETRY_DELAYS: "3600,3600,3600,3600" };
    const srv = await startBinary({ env });
    try {
      const hook = await call(srv, "POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled"], secret: "e2e-webhook-secret-value" });
      expect(hook.status).toBe(201);
      expect((await call(srv, "POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout" })).status).toBe(201);
      expect((await call(srv, "PUT", "/v1/projects/default/flags/checkout/states/production", { enabled: true })).status).toBe(200);
      await rx.waitFor(1);
      let delivery: Record<string, any>;
      do {
        await Bun.sleep(20);
        [delivery] = (await call(srv, "GET", `/v1/webhooks/${hook.body.id}/deliveries`)).body.deliveries;
      } while (delivery!.attempts === 0);
      expect(delivery!).toMatchObject({ status: "pending", attempts: 1, responseStatus: 503 });
      expect(Date.parse(delivery!.nextAttemptAt) - Date.now()).toBeGreaterThan(3_500_000);

      const asked = performance.now();
      const now = await call(srv, "POST", `/v1/webhook-deliveries/${delivery!.id}/attempt-now`);
      expect(now.status).toBe(202);
      expect(now.body).toMatchObject({ id: delivery!.id, status: "pending", attempts: 1 });
      expect(Math.abs(Date.parse(now.body.nextAttemptAt) - Date.now())).toBeLessThan(2_000);
      const [, second] = await rx.waitFor(2, 3_000);
      expect(performance.now() - asked).toBeLessThan(1_000);
      expect(second!.headers.get("x-service-delivery")).toBe(delivery!.id);
      let done: Record<string, any>;
      do {
        await Bun.sleep(20);
        [done] = (await call(srv, "GET", `/v1/webhooks/${hook.body.id}/deliveries`)).body.deliveries;
      } while (done!.status === "pending");
      expect(done!).toMatchObject({ id: delivery!.id, status: "succeeded", attempts: 2, responseStatus: 200, nextAttemptAt: null });
      expect(await srv.stop()).toBe(0);
    } finally {
      rx.stop();
    }
  },
  60_000,
);
