/**
 * The live audit log through the compiled binary (docs/audit.md, "Live"): a stream client gets a
 * change made through the API by another caller within a second; after a restart it resumes with
 * Last-Event-ID and gets what it missed while the binary was stopped, then live entries. An
 * If-Match with a stale ETag is 412 through the binary too.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { callServer } from "../helpers";
import { SseReader, type SseEvent } from "../sse";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"aud1".repeat(10)}`;
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_RATE_LIMITS: "admin:100000,mgmt:100000" };
const STREAM = "/v1/projects/default/audit-log/stream";
const tls = { rejectUnauthorized: false };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const admin = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

async function connect(srv: RunningBinary, headers: Record<string, string>): Promise<SseReader> {
  const res = await fetch(`${srv.url}${STREAM}`, { headers, tls, keepalive: false });
  expect(res.status).toBe(200);
  const r = new SseReader(res);
  expect(await r.next()).toEqual({ retry: "1000" });
  return r;
}

const change = (e: SseEvent | "end") => {
  if (e === "end") throw new Error("the stream ended");
  expect(e.event).toBe("change");
  return { id: e.id!, data: JSON.parse(e.data!) };
};

test(
  "a change made through the API reaches a stream client within a second; after a restart, Last-Event-ID resumes without a gap",
  async () => {
    const cwd = tempDir();
    let srv = await startBinary({ cwd, env: ENV });
    try {
      // The follower: a mgmt key of the project (a console would use its session).
      const key = await admin(srv, "POST", "/v1/projects/default/api-keys", { name: "follower", scope: "mgmt", environment: "production" });
      expect(key.status).toBe(201);
      const follower = { authorization: `Bearer ${key.body.key}` };
      let r = await connect(srv, follower);
      const sent = performance.now();
      expect((await admin(srv, "POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout" })).status).toBe(201);
      const first = change(await r.nextEvent(1_000));
      const took = performance.now() - sent;
      expect({ took, withinASecond: took < 1_000 }).toEqual({ took, withinASecond: true });
      expect(first.data).toMatchObject({ action: "created", resource: { type: "flag", key: "checkout" }, actor: { type: "admin_key" } });
      const lastId = first.id;

      // Stopped: the stream ends; writes made after the restart, before the client is back, are not lost.
      expect(await srv.stop()).toBe(0);
      expect(await r.nextEvent()).toBe("end");
      srv = await startBinary({ cwd, env: ENV });
      expect((await admin(srv, "PUT", "/v1/projects/default/flags/checkout/states/production", { enabled: true })).status).toBe(200);
      expect((await admin(srv, "PATCH", "/v1/projects/default/flags/checkout", { name: "Checkout v2" })).status).toBe(200);
      r = await connect(srv, { ...follower, "last-event-id": lastId });
      const missed = [change(await r.nextEvent()), change(await r.nextEvent())];
      expect(missed.map((m) => Number(m.id))).toEqual([Number(lastId) + 1, Number(lastId) + 2]);
      expect(missed.map((m) => m.data.action)).toEqual(["enabled", "updated"]);
      expect((await admin(srv, "DELETE", "/v1/projects/default/flags/checkout")).status).toBe(204);
      expect(change(await r.nextEvent(1_000))).toMatchObject({ id: String(Number(lastId) + 3), data: { action: "deleted" } });
      await r.cancel();
    } finally {
      await srv.stop();
    }
  },
  60_000,
);

test(
  "If-Match through the binary: the current ETag writes, a stale one is 412 naming who changed what",
  async () => {
    const srv = await startBinary({ env: ENV });
    try {
      const created = await fetch(`${srv.url}/v1/projects/default/flags`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ key: "banner", name: "Banner" }),
        tls,
      });
      expect(created.status).toBe(201);
      const etag = created.headers.get("etag")!;
      const patch = (name: string) =>
        fetch(`${srv.url}/v1/projects/default/flags/banner`, {
          method: "PATCH",
          headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json", "if-match": etag },
          body: JSON.stringify({ name }),
          tls,
        });
      const ok = await patch("Banner 2");
      expect(ok.status).toBe(200);
      expect(ok.headers.get("etag")).not.toBe(etag);
      const stale = await patch("Banner 3");
      expect(stale.status).toBe(412);
      expect(((await stale.json()) as { message: string }).message).toMatch(/^Flag banner changed by .+ at \d{4}-.+Z \(name\) since you loaded it: reload it and apply your change again$/);
    } finally {
      await srv.stop();
    }
  },
  60_000,
);
