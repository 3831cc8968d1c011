/**
 * Graceful stop on a real TLS listener: in-flight requests finish, new connections are refused,
 * then the jobs stop and the database closes.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/lib/log";
import { startServer } from "../../src/server";
import { tempDir, sqliteOf, sqliteOnly } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("requests sent right before stop() are answered: it reads for a short grace before it stops listening", async () => {
  const server = await startServer(loadConfig({ SVC_DATA_DIR: tempDir(), SVC_PORT: "0", SVC_HOST: "127.0.0.1", SVC_RATE_LIMITS: "anonymous:100000" }), {
    log: createLogger({ level: "error", format: "json", write: () => {} }),
  });
  const url = `https://127.0.0.1:${server.port}/v1/health`;
  const tls = { rejectUnauthorized: false };
  const burst = () => Promise.all(Array.from({ length: 16 }, () => fetch(url, { tls }).then((r) => r.status, (e: Error) => e.message)));
  expect(await burst()).toEqual(Array(16).fill(200)); // connections open and idle (kept alive)
  const answers = burst();
  const stopping = server.stop();
  expect(await answers).toEqual(Array(16).fill(200));
  await stopping;
  rmSync(server.ctx.config.dataDir, { recursive: true, force: true });
}, 30_000);

sqliteOnly("stop() lets an in-flight request finish, refuses new ones, then closes the database", async () => {
  let entered!: () => void;
  const handlerEntered = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));

  const server = await startServer(loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1" }), {
    log: createLogger({ level: "error", format: "json", write: () => {} }),
    extend: (app) => {
      app.get("/v1/probe-slow", async () => {
        entered();
        await released;
        return { finished: true };
      });
    },
  });
  const url = `https://127.0.0.1:${server.port}`;
  const tls = { rejectUnauthorized: false };
  expect((await fetch(`${url}/v1/health`, { tls })).status).toBe(200);
  expect(server.ctx.scheduler.names()).toContain("db-optimize");

  const inFlight = fetch(`${url}/v1/probe-slow`, { tls, keepalive: false });
  await handlerEntered;
  let stopped = false;
  const stopping = server.stop().then(() => (stopped = true));

  await Bun.sleep(400); // past the short grace in which a stopping server still reads (see below)
  expect(stopped).toBe(false); // still draining
  await expect(fetch(`${url}/v1/health`, { tls, keepalive: false, signal: AbortSignal.timeout(2_000) })).rejects.toThrow();

  release();
  const res = await inFlight;
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ finished: true });
  await stopping;
  expect(stopped).toBe(true);
  expect(server.ctx.scheduler.names()).toEqual([]);
  expect(() => sqliteOf(server.ctx).sqlite.query("SELECT 1").get()).toThrow();
});
