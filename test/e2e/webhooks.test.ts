/**
 * Webhooks through the compiled binary, on the real clock: a delivery pending when the process
 * is killed with SIGKILL arrives after a restart (at-least-once), and retries run on the
 * retry timer with SVC_WEBHOOK_RETRY_DELAYS=1,1,1,1, also for more deliveries of one webhook than it
 * may have in flight.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signatureMatches, startReceiver } from "../webhook-receiver";
import { callServer } from "../helpers";
import { binaryPath, cleanup, freePort, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"hook".repeat(10)}`;
const SECRET = "e2e-webhook-secret-value";
const BASE = "/v1/projects/default/flags";

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

/** Polls the webhook's deliveries until `check` accepts them (every 50 ms, at most `ms`). */
async function until(srv: RunningBinary, webhookId: string, check: (d: Record<string, any>[]) => boolean, ms = 10_000) {
  const deadline = performance.now() + ms;
  for (;;) {
    const { body } = await call(srv, "GET", `/v1/webhooks/${webhookId}/deliveries`);
    if (check(body.deliveries)) return body.deliveries as Record<string, any>[];
    if (performance.now() > deadline) throw new Error(`deliveries never matched: ${JSON.stringify(body.deliveries)}`);
    await Bun.sleep(50);
  }
}

test(
  "a delivery pending at kill -9 arrives after the restart; retries follow SVC_WEBHOOK_RETRY_DELAYS on the real clock",
  async () => {
    const cwd = tempDir();
    const port = await freePort(); // nothing listens there yet: attempts are refused
    const env = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_RETRY_DELAYS: "1,1,1,1", SVC_WEBHOOK_TIMEOUT_MS: "2000" };
    let srv = await startBinary({ cwd, env });
    const hook = await call(srv, "POST", "/v1/projects/default/webhooks", {
      url: `http://127.0.0.1:${port}/hook`,
      events: ["flag.enabled", "flag.disabled"],
      environments: ["production"],
      secret: SECRET,
    });
    expect(hook.status).toBe(201);
    expect((await call(srv, "POST", BASE, { key: "checkout", name: "Checkout" })).status).toBe(201);
    expect((await call(srv, "PUT", `${BASE}/checkout/states/production`, { enabled: true })).status).toBe(200);
    const [pending] = await until(srv, hook.body.id, (d) => d.length === 1 && d[0]!.attempts >= 1);
    expect(pending).toMatchObject({ status: "pending", responseStatus: null, error: "connection refused" });

    expect(await srv.stop("SIGKILL")).not.toBe(0);
    const rx = startReceiver({ port });
    try {
      // Down for longer than the retry delay: the delivery is due when the process starts.
      await Bun.sleep(Math.max(0, Date.parse(pending!.nextAttemptAt) - Date.now()) + 100);
      srv = await startBinary({ cwd, env });
      const [arrived] = await rx.waitFor(1, 10_000);
      expect(arrived!.json).toMatchObject({ id: pending!.eventId, event: "flag.enabled", projectSlug: "default", environment: "production", data: { flagKey: "checkout", previousState: { enabled: false }, currentState: { enabled: true } } });
      expect(arrived!.headers.get("x-service-delivery")).toBe(pending!.id);
      expect(signatureMatches(SECRET, arrived!.bytes, arrived!.headers.get("x-service-signature"))).toBe(true);
      const [done] = await until(srv, hook.body.id, (d) => d[0]!.status === "succeeded");
      expect(done).toMatchObject({ id: pending!.id, attempts: pending!.attempts + 1, responseStatus: 200, error: null });

      // Two failures, then success: each retry when it comes due, 1 s after the failure (not at
      // the next whole-second pass after that, up to a second later).
      const times: number[] = [];
      rx.answer = (_req, n) => {
        times.push(performance.now());
        return new Response(null, { status: n <= 3 ? 503 : 200 });
      };
      const t0 = performance.now();
      expect((await call(srv, "PUT", `${BASE}/checkout/states/production`, { enabled: false })).status).toBe(200);
      const [retried] = await until(srv, hook.body.id, (d) => d[0]!.event === "flag.disabled" && d[0]!.status === "succeeded");
      expect(retried).toMatchObject({ attempts: 3, responseStatus: 200, error: null, nextAttemptAt: null });
      expect(performance.now() - t0).toBeGreaterThan(1_900); // two waits of at least 1 s each
      const gaps = times.slice(1).map((t, i) => Math.round(t - times[i]!));
      expect({ gaps, onTime: gaps.every((g) => g >= 950 && g < 1_500) }).toEqual({ gaps, onTime: true });
      expect(rx.received.map((m) => m.json.event)).toEqual(["flag.enabled", "flag.disabled", "flag.disabled", "flag.disabled"]);
      expect(new Set(rx.received.slice(1).map((m) => new TextDecoder().decode(m.bytes))).size).toBe(1); // the same bytes each time
      expect(await srv.stop()).toBe(0);
    } finally {
      rx.stop();
    }
  },
  60_000,
);

test(
  "retries of several deliveries to one webhook each run when due, past the per-webhook bound of 4 in flight",
  async () => {
    const cwd = tempDir();
    const env = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_RETRY_DELAYS: "1,1,1,1", SVC_WEBHOOK_TIMEOUT_MS: "2000" };
    // Each delivery fails once, then succeeds: its second attempt should come 1 s after its first.
    const attempts = new Map<string, number[]>();
    const rx = startReceiver({
      answer: (req) => {
        const id = req.headers.get("x-service-delivery")!;
        const times = attempts.get(id) ?? [];
        times.push(performance.now());
        attempts.set(id, times);
        return new Response(null, { status: times.length === 1 ? 500 : 200 });
      },
    });
    const srv = await startBinary({ cwd, env });
    try {
      const hook = await call(srv, "POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.created"], environments: ["production"], secret: SECRET });
      expect(hook.status).toBe(201);
      for (let i = 0; i < 8; i++) expect((await call(srv, "POST", BASE, { key: `retried-${i}`, name: "Retried" })).status).toBe(201);
      await rx.waitFor(16, 10_000);
      const late = [...attempts.values()].map(([first, second]) => Math.round(second! - first! - 1000));
      expect({ late, onTime: late.every((ms) => ms >= -50 && ms < 400) }).toEqual({ late, onTime: true });
      expect(await srv.stop()).toBe(0);
    } finally {
      rx.stop();
    }
  },
  60_000,
);
