/**
 * Scheduled changes through the compiled binary, on the real clock (docs/targeting.md,
 * "Scheduled changes"): a schedule 2 s ahead is applied within a second of its time and a
 * webhook receiver gets its flag.* event; one that comes due while the binary is stopped is
 * applied after the restart (and the log says so); a cancelled one never is.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startReceiver } from "../webhook-receiver";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"sche".repeat(10)}`;
const FLAGS = "/v1/projects/default/flags";
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_LOG_FORMAT: "json" };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = async (srv: RunningBinary, method: string, path: string, body?: unknown, status = 200) => {
  const res = await callServer(srv.url, method, path, { key: ADMIN_KEY, body });
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
};

async function setUp(srv: RunningBinary, receiverUrl: string) {
  await call(srv, "POST", "/v1/projects/default/webhooks", { url: receiverUrl, events: ["flag.enabled", "flag.updated"], environments: ["production"], secret: "e2e-schedule-secret" }, 201);
  await call(srv, "POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
}

test(
  "a schedule 2 s ahead is applied within a second of its time; the receiver gets flag.enabled",
  async () => {
    const rx = startReceiver();
    const srv = await startBinary({ env: ENV });
    try {
      await setUp(srv, rx.url);
      const at = new Date(Date.now() + 2_000).toISOString();
      const s = await call(srv, "POST", `${FLAGS}/checkout/schedules`, { environment: "production", at, state: { enabled: true, rolloutPercentage: 40 } }, 201);
      expect(s.status).toBe("pending");
      const [event] = await rx.waitFor(1, 6_000);
      expect(event!.json).toMatchObject({ event: "flag.enabled", environment: "production", data: { flagKey: "checkout", currentState: { enabled: true } } });
      const [applied] = (await call(srv, "GET", `${FLAGS}/checkout/schedules`)).schedules;
      expect(applied).toMatchObject({ id: s.id, status: "applied", error: null });
      const late = Date.parse(applied.appliedAt) - Date.parse(at);
      // Within a second, and the job's own time on a loaded machine.
      expect({ late, inTime: late >= 0 && late <= 1_250 }).toEqual({ late, inTime: true });
      const audit = await call(srv, "GET", "/v1/projects/default/audit-log?resourceType=flag_state");
      expect(audit.entries[0]).toMatchObject({ requestId: s.id, actor: { type: "admin_key" }, action: "enabled" });
    } finally {
      await srv.stop();
      rx.stop();
    }
  },
  30_000,
);

test(
  "due while stopped: applied after the restart, the log says so; a cancelled one never is",
  async () => {
    const rx = startReceiver();
    const cwd = tempDir();
    let srv = await startBinary({ cwd, env: ENV });
    try {
      await setUp(srv, rx.url);
      const at = new Date(Date.now() + 1_500).toISOString();
      const kept = await call(srv, "POST", `${FLAGS}/checkout/schedules`, { environment: "production", at: new Date(Date.parse(at) + 1).toISOString(), state: { enabled: true } }, 201);
      const cancelled = await call(srv, "POST", `${FLAGS}/checkout/schedules`, { environment: "production", at, state: { enabled: true, rolloutPercentage: 5 } }, 201);
      await call(srv, "DELETE", `${FLAGS}/checkout/schedules/${cancelled.id}`);
      expect(await srv.stop()).toBe(0);
      await Bun.sleep(Math.max(0, Date.parse(kept.at) - Date.now()) + 500);
      expect(rx.received).toEqual([]);

      srv = await startBinary({ cwd, env: ENV });
      const [line] = await srv.waitFor(/.*applying schedules missed while stopped.*/);
      expect(JSON.parse(line)).toMatchObject({ msg: "applying schedules missed while stopped", count: 1 });
      const [event] = await rx.waitFor(1, 5_000);
      expect(event!.json).toMatchObject({ event: "flag.enabled", data: { flagKey: "checkout", currentState: { enabled: true } } });
      const { schedules } = await call(srv, "GET", "/v1/projects/default/schedules");
      expect(schedules.map((s: { id: string; status: string }) => [s.id, s.status])).toEqual([
        [cancelled.id, "cancelled"],
        [kept.id, "applied"],
      ]);
      // Nothing more arrives: the cancelled one stays unapplied.
      await Bun.sleep(1_500);
      expect(rx.received.length).toBe(1);
      expect(await call(srv, "GET", `${FLAGS}/checkout/states/production`)).toMatchObject({ enabled: true, rolloutPercentage: null });
    } finally {
      await srv.stop();
      rx.stop();
    }
  },
  40_000,
);
