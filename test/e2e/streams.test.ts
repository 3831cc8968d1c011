/**
 * The streams through the compiled binary over HTTPS: a deleted key's OFREP stream ends and its
 * URL is refused; a definitions stream resumed with Last-Event-ID while writes go on loses
 * nothing; SIGTERM ends every stream at once, so the process exits well within the 10 s drain.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventsPath, type StreamKey } from "../../scripts/lib/streams";
import { callServer } from "../helpers";
import { DefinitionsModel, SseReader } from "../sse";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "./binary";

const T = 60_000;
const ADMIN_KEY = `svc_admin_${"s7r".repeat(12)}`;
const JWT_SECRET = "e2e-streams-jwt-secret-0123456789abcdef";
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_JWT_SECRET: JWT_SECRET, SVC_RATE_LIMITS: "admin:100000,mgmt:100000,eval:100000" };
const tls = { rejectUnauthorized: false };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const admin = (srv: RunningBinary, method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

/** A new API key of the default project, with what its stream token binds. */
async function apiKey(srv: RunningBinary, scope: string, environment = "production"): Promise<StreamKey> {
  const made = await admin(srv, "POST", "/v1/projects/default/api-keys", { name: `${scope} key`, scope, environment });
  expect(made.status).toBe(201);
  const project = (await admin(srv, "GET", "/v1/projects/default")).body;
  const env = project.environments.find((e: { slug: string }) => e.slug === environment);
  return { id: made.body.id, secret: made.body.key, projectId: project.id, environmentId: env.id };
}

/** A stream over its own connection, after its `retry: 1000`. */
async function connect(srv: RunningBinary, path: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const res = await fetch(`${srv.url}${path}`, { headers, tls, keepalive: false });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const r = new SseReader(res);
  expect(await r.next()).toEqual({ retry: "1000" });
  return r;
}

test(
  "a deleted key's OFREP stream ends at once and its URL is refused; a reconnect behind is told at once",
  async () => {
    const srv = await startBinary({ env: ENV });
    try {
      const key = await apiKey(srv, "eval");
      const path = eventsPath(JWT_SECRET, key);
      expect((await admin(srv, "POST", "/v1/projects/default/flags", { key: "banner", name: "Banner" })).status).toBe(201);
      const r = await connect(srv, path);
      expect((await admin(srv, "PUT", "/v1/projects/default/flags/banner/states/production", { enabled: true })).status).toBe(200);
      const message = (await r.next()) as { event: string; id: string; data: string };
      const id = message.id;
      expect(id).toMatch(/^\d+$/);
      expect(message.event).toBe("message");
      const data = JSON.parse(message.data);
      expect(data).toEqual({ type: "refetchEvaluation", etag: `"${id}"`, lastModified: data.lastModified });
      expect(Math.abs(data.lastModified - Date.now() / 1000)).toBeLessThan(60);
      // Evaluation already sees what the message announced.
      const evaluated = await callServer(srv.url, "POST", "/v1/evaluate", { key: key.secret, body: { flagKey: "banner", context: {} } });
      expect(evaluated.body.enabled).toBe(true);
      // Behind by one change: told at once.
      expect((await admin(srv, "PUT", "/v1/projects/default/flags/banner/states/production", { enabled: false })).status).toBe(200);
      const behind = await connect(srv, path, { "last-event-id": id });
      expect(await behind.next()).toMatchObject({ event: "message", id: String(Number(id) + 1) });
      const started = performance.now();
      expect((await admin(srv, "DELETE", `/v1/api-keys/${key.id}`)).status).toBe(204);
      await Promise.all([r.end(), behind.end()]);
      expect(performance.now() - started).toBeLessThan(2_000);
      const refused = await fetch(`${srv.url}${path}`, { tls });
      expect(refused.status).toBe(401);
      expect((await refused.json()).error).toBe("UNAUTHORIZED");
      // Logged as the path alone.
      await Bun.sleep(100);
      expect(srv.output()).not.toContain(path.split("=")[1]!.slice(0, 40));
    } finally {
      await srv.stop();
    }
  },
  T,
);

test(
  "a definitions stream resumed with Last-Event-ID again and again while writes go on ends equal to GET /v1/definitions",
  async () => {
    const srv = await startBinary({ env: ENV });
    try {
      const key = await apiKey(srv, "mgmt");
      const sdk = { authorization: `Bearer ${key.secret}` };
      const flags = Array.from({ length: 10 }, (_, i) => `flag-${i}`);
      const model = new DefinitionsModel();
      let r = await connect(srv, "/v1/definitions/stream", sdk);
      model.apply((await r.nextEvent()) as never);
      let writes = 0;
      const writer = async (w: number) => {
        for (let i = 0; i < 40; i++) {
          const flag = flags[(i * 3 + w * 7) % flags.length]!;
          const op = (i + w) % 4;
          const res =
            op === 0
              ? await admin(srv, "POST", "/v1/projects/default/flags", { key: flag, name: flag })
              : op === 1
                ? await admin(srv, "PUT", `/v1/projects/default/flags/${flag}/states/${i % 3 ? "production" : "staging"}`, { enabled: i % 2 === 0, rolloutPercentage: i % 5 ? null : 20 })
                : op === 2
                  ? await admin(srv, "PATCH", `/v1/projects/default/flags/${flag}`, { rules: [{ name: `r${i}`, conditions: [{ attribute: "plan", operator: "equals", value: `p${w}` }] }] })
                  : await admin(srv, "DELETE", `/v1/projects/default/flags/${flag}`);
          if (res.status < 300) writes++;
        }
      };
      const writing = Promise.all([0, 1, 2, 3].map(writer));
      for (let resume = 0; resume < 8; resume++) {
        for (let n = 0; n < 4; n++) {
          const e = await Promise.race([r.nextEvent(), Bun.sleep(300).then(() => null)]);
          if (e === "end") throw new Error("the stream ended");
          if (e === null) break;
          model.apply(e);
        }
        await r.cancel();
        r = await connect(srv, "/v1/definitions/stream", { ...sdk, "last-event-id": model.lastId! });
      }
      await writing;
      expect(writes).toBeGreaterThan(30);
      // A last write, then read until it is in: everything before it is too.
      expect((await admin(srv, "POST", "/v1/projects/default/flags", { key: "marker", name: "marker" })).status).toBe(201);
      while (!model.flags.has("marker")) {
        const e = await r.nextEvent();
        if (e === "end") throw new Error("the stream ended");
        model.apply(e);
      }
      const current = await callServer(srv.url, "GET", "/v1/definitions", { key: key.secret });
      expect(model.list()).toEqual(current.body.flags);
      expect(model.puts).toBe(1);
      await r.cancel();
    } finally {
      await srv.stop();
    }
  },
  T,
);

test(
  "SIGTERM ends every open stream at once: the process exits well within the 10 s drain",
  async () => {
    const srv = await startBinary({ env: ENV });
    const key = await apiKey(srv, "full");
    const streams = await Promise.all([
      ...Array.from({ length: 5 }, () => connect(srv, eventsPath(JWT_SECRET, key))),
      ...Array.from({ length: 5 }, () => connect(srv, "/v1/definitions/stream", { authorization: `Bearer ${key.secret}` })),
    ]);
    const started = performance.now();
    const code = await srv.stop("SIGTERM");
    const took = performance.now() - started;
    expect(code).toBe(0);
    expect(took).toBeLessThan(3_000);
    for (const s of streams) await s.end(2_000);
    expect(srv.output()).not.toContain("in-flight requests still open after 10 s");
  },
  T,
);
