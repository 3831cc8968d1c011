/**
 * Three nodes of the compiled binary on one PostgreSQL (docs/scaling.md): each with its own port
 * and data dir, the same SVC_DATABASE_URL and SVC_JWT_SECRET. A write on one node is evaluated on
 * the others, a key revoked on one fails on the others, a webhook's deliveries are sent once at a
 * time by whichever node claims them, a node killed with SIGKILL under load loses no acknowledged
 * write and leaves no delivery behind, and a restart of PostgreSQL under load is survived without
 * restarting a node. Skipped when PostgreSQL is not installed (test/pg.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { callServer } from "../helpers";
import { createDatabase, pgAvailable, pgRestartable, restartCluster } from "../pg";
import { startReceiver, type Receiver } from "../webhook-receiver";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"clus".repeat(10)}`;
const FLAGS = "/v1/projects/default/flags";
/** A webhook attempt's time limit: the claim of a delivery lapses after max(6 x this, this + 5 s) (src/modules/webhooks/pg-store.ts). */
const WEBHOOK_TIMEOUT_MS = 1000;
const LEASE_MS = Math.max(6 * WEBHOOK_TIMEOUT_MS, WEBHOOK_TIMEOUT_MS + 5000);

const available = pgAvailable();

beforeAll(async () => {
  if (available) await binaryPath();
}, 120_000);
afterAll(() => cleanup());

interface Node {
  name: string;
  srv: RunningBinary;
}

/** `n` nodes on `url`, started one after the other (the first one migrates and bootstraps). */
async function cluster(url: string, n = 3): Promise<Node[]> {
  const nodes: Node[] = [];
  for (let i = 0; i < n; i++) {
    const srv = await startBinary({
      env: {
        SVC_DATABASE_URL: url,
        SVC_DATABASE_POOL_SIZE: "4",
        SVC_JWT_SECRET: "e2e-cluster-jwt-secret-of-enough-length-0123456789",
        SVC_ADMIN_KEY: ADMIN_KEY,
        SVC_OUTBOUND_ALLOWED_HOSTS: "loopback",
        SVC_WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
        SVC_WEBHOOK_RETRY_DELAYS: "1,1,1,1",
        SVC_RATE_LIMITS: "eval:1000000,admin:1000000",
        SVC_LOG_FORMAT: "json",
      },
    });
    nodes.push({ name: "ABC"[i]!, srv });
  }
  return nodes;
}

/** Stops every node; the output of one that had exited by itself is printed (a crash is what the test then reports). */
const stopAll = (nodes: Node[]) =>
  Promise.all(
    nodes.map(async (n) => {
      const crashed = n.srv.proc.exitCode !== null || (n.srv.proc.signalCode !== null && n.srv.proc.signalCode !== "SIGKILL");
      const code = await n.srv.stop().catch(() => undefined);
      if (crashed) console.log(`node ${n.name} had exited by itself (${code}):\n${n.srv.output()}`);
    }),
  );

const call = (node: Node, method: string, path: string, body?: unknown, key = ADMIN_KEY) => callServer(node.srv.url, method, path, { key, body });

async function ok(node: Node, method: string, path: string, body?: unknown, status = 200) {
  const res = await call(node, method, path, body);
  if (res.status !== status) throw new Error(`${node.name}: ${method} ${path}: expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Polls `probe` every 20 ms until it returns true; the ms waited. Throws after `ms`. */
async function until(what: string, probe: () => Promise<boolean>, ms: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await probe()) return performance.now() - start;
    if (performance.now() - start > ms) throw new Error(`${what}: not within ${ms} ms`);
    await Bun.sleep(20);
  }
}

const evaluate = (node: Node, key: string, flagKey: string) => callServer(node.srv.url, "POST", "/v1/evaluate", { key, body: { flagKey, context: { userId: "u-1" } } });

/** Creates flag `key` and enables it in production on `node` (a flag.enabled event for production). */
async function createEnabled(node: Node, key: string): Promise<boolean> {
  const created = await call(node, "POST", FLAGS, { key, name: key });
  if (created.status !== 201) return false;
  return (await call(node, "PUT", `${FLAGS}/${key}/states/production`, { enabled: true })).status === 200;
}

/** The flag's production state as read through `node`. */
async function enabledOn(node: Node, key: string): Promise<{ key: string; enabled: boolean | null }> {
  const res = await call(node, "GET", `${FLAGS}/${key}/states/production`);
  return { key, enabled: res.status === 200 ? res.body.enabled : null };
}

/** A receiver that takes `delayMs` to answer each request (so deliveries are in flight a while). */
function slowReceiver(delayMs: number): Receiver {
  return startReceiver({ answer: async () => (await Bun.sleep(delayMs), new Response("ok")) });
}

/** The flag keys of the flag.enabled events the receiver got (each once, however often it came). */
const enabledKeys = (rx: Receiver) => new Set(rx.received.filter((r) => r.json?.event === "flag.enabled").map((r) => r.json.data.flagKey as string));

describe.skipIf(!available)("three binaries on one PostgreSQL", () => {
  test(
    "a flag created and enabled on A is evaluated on B and C within 1 s; a key revoked on B fails on A and C within 1 s",
    async () => {
      const nodes = await cluster(await createDatabase());
      const [a, b, c] = nodes as [Node, Node, Node];
      try {
        const { key: evalKey, id: keyId } = await ok(a, "POST", "/v1/projects/default/api-keys", { name: "sdk", scope: "eval", environment: "production" }, 201);
        // The key itself is a write of A: B and C know it once it reached them.
        for (const n of [b, c]) await until(`${n.name} knows the key`, async () => (await evaluate(n, evalKey, "none")).status !== 401, 1000);

        expect(await createEnabled(a, "checkout")).toBe(true);
        // B and C polled at once, each from the write's answer on.
        await Promise.all(
          [b, c].map(async (n) => {
            const waited = await until(`checkout enabled on ${n.name}`, async () => (await evaluate(n, evalKey, "checkout")).body?.enabled === true, 1000);
            console.log(`write on A evaluated on ${n.name} after ${waited.toFixed(0)} ms of polling`);
          }),
        );
        expect((await evaluate(c, evalKey, "checkout")).body).toMatchObject({ flagKey: "checkout", enabled: true, reason: "FLAG_ENABLED" });

        expect((await evaluate(a, evalKey, "checkout")).status).toBe(200);
        await ok(b, "DELETE", `/v1/api-keys/${keyId}`, undefined, 204);
        await Promise.all(
          [a, c].map(async (n) => {
            const waited = await until(`the key revoked on B fails on ${n.name}`, async () => (await evaluate(n, evalKey, "checkout")).status === 401, 1000);
            console.log(`key revoked on B refused on ${n.name} after ${waited.toFixed(0)} ms of polling`);
          }),
        );
      } finally {
        await stopAll(nodes);
      }
    },
    60_000,
  );

  test(
    "a webhook registered on C: writes on every node, each change arrives at least once and never twice at once",
    async () => {
      const nodes = await cluster(await createDatabase());
      const c = nodes[2]!;
      const rx = slowReceiver(100);
      try {
        const hook = await ok(c, "POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled"], environments: ["production"], secret: "e2e-cluster-webhook" }, 201);
        const keys = Array.from({ length: 30 }, (_, i) => `hooked-${i}`);
        await Promise.all(keys.map((k, i) => createEnabled(nodes[i % 3]!, k).then((done) => expect(done).toBe(true))));
        await until("every change delivered", async () => keys.every((k) => enabledKeys(rx).has(k)), 15_000);
        expect([...enabledKeys(rx)].sort()).toEqual([...keys].sort());
        expect(rx.overlaps).toEqual([]);
        // Each event is one delivery, and each was sent by some node.
        const deliveries = new Set(rx.received.map((r) => r.headers.get("x-service-delivery")));
        expect(deliveries.size).toBe(keys.length);
        // Outcomes are stored in batches, after the answer: none stays pending.
        await until("no delivery pending", async () => (await ok(nodes[0]!, "GET", `/v1/webhooks/${hook.id}/deliveries?status=pending&limit=1`)).deliveries.length === 0, 5_000);
      } finally {
        rx.stop();
        await stopAll(nodes);
      }
    },
    60_000,
  );

  test(
    "kill -9 of one node under write and delivery load: every acknowledged write is there, its deliveries are completed by the others",
    async () => {
      const nodes = await cluster(await createDatabase());
      const [a, b, c] = nodes as [Node, Node, Node];
      // Slow answers: at the kill, some deliveries are in flight on C.
      const rx = slowReceiver(400);
      try {
        const hook = await ok(a, "POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled"], environments: ["production"], secret: "e2e-cluster-webhook" }, 201);
        const acknowledged: string[] = [];
        let alive = [a, b, c];
        let writing = true;
        let n = 0;
        const writer = async () => {
          while (writing) {
            const i = n++;
            const node = alive[i % alive.length]!;
            const key = `load-${i}`;
            if (await createEnabled(node, key).catch(() => false)) acknowledged.push(key);
          }
        };
        const writers = Promise.all([writer(), writer(), writer()]);
        await Bun.sleep(1500);
        const sentBefore = rx.received.length;
        await c.srv.stop("SIGKILL");
        alive = [a, b];
        await Bun.sleep(1500);
        writing = false;
        await writers;
        console.log(`acknowledged ${acknowledged.length} writes; the receiver had ${sentBefore} requests at the kill`);
        expect(acknowledged.length).toBeGreaterThan(10);

        // No acknowledged write lost: every flag is there, enabled, read through a survivor.
        for (const key of acknowledged) expect(await enabledOn(b, key)).toEqual({ key, enabled: true });

        // Every change reaches the receiver: C's claims lapse and A or B send them.
        await until("every acknowledged change delivered", async () => acknowledged.every((k) => enabledKeys(rx).has(k)), LEASE_MS + 15_000);
        expect(rx.overlaps).toEqual([]);
        await until("no delivery pending", async () => (await ok(a, "GET", `/v1/webhooks/${hook.id}/deliveries?status=pending&limit=1`)).deliveries.length === 0, 5_000);
        const ids = rx.received.map((r) => r.headers.get("x-service-delivery"));
        console.log(`${new Set(ids).size} deliveries, ${ids.length - new Set(ids).size} sent again after C's claims lapsed (at least once)`);
      } finally {
        rx.stop();
        await stopAll(nodes);
      }
    },
    90_000,
  );

  test.skipIf(!pgRestartable())(
    "PostgreSQL restarted under load: nodes keep evaluating, reconnect, resynchronise and answer writes again without a restart of theirs",
    async () => {
      // A private cluster of its own: CI's shared one (FLAGSVC_TEST_PG_URL) is not this test's to restart.
      const url = await createDatabase({ restartable: true });
      const nodes = await cluster(url);
      let loading = true;
      let loaders: Promise<unknown> = Promise.resolve();
      const [a, b, c] = nodes as [Node, Node, Node];
      const listeners = async () => {
        const sql = new SQL(url, { max: 1 });
        try {
          const [row] = await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND datname = current_database()`;
          return row.n as number;
        } finally {
          await sql.close();
        }
      };
      try {
        expect(await listeners()).toBe(3);
        const { key: evalKey } = await ok(a, "POST", "/v1/projects/default/api-keys", { name: "sdk", scope: "eval", environment: "production" }, 201);
        expect(await createEnabled(a, "before")).toBe(true);
        for (const n of [b, c]) await until(`'before' on ${n.name}`, async () => (await evaluate(n, evalKey, "before")).body?.enabled === true, 1000);

        // Load: evaluations on every node (counted by status), writes round-robin (some fail while the database is down).
        const evaluations = new Map<number, number>();
        const acknowledged: string[] = [];
        let failed = 0;
        let n = 0;
        const load = async () => {
          while (loading) {
            const i = n++;
            const node = nodes[i % 3]!;
            const status = await evaluate(node, evalKey, "before").then((r) => r.status, () => 0); // 0: no answer
            evaluations.set(status, (evaluations.get(status) ?? 0) + 1);
            if (i % 5 === 0) {
              if (await createEnabled(node, `during-${i}`).catch(() => false)) acknowledged.push(`during-${i}`);
              else failed++;
            }
          }
        };
        loaders = Promise.all([load(), load()]);
        await Bun.sleep(500);
        const restarting = restartCluster(1500);
        // While it is down: health says so (503, the admin detail left out), evaluation goes on (counted by the load) ...
        await until("A's health reports the database down", async () => (await call(a, "GET", "/v1/health")).status === 503, 3000);
        expect((await call(a, "GET", "/v1/health")).body).toMatchObject({ status: "unavailable" });
        // A write while it is down: 503 with Retry-After, nothing changed (the flag is absent after the restart).
        const refused = await call(b, "POST", "/v1/projects/default/flags", { key: "while-down", name: "While down" });
        expect(refused.status).toBe(503);
        expect(refused.body).toMatchObject({ error: "SERVICE_UNAVAILABLE" });
        expect(refused.headers.get("retry-after")).toBe("1");
        // ... while every node stays ready: a balancer's probe keeps them all in the pool.
        for (const n of nodes) expect((await call(n, "GET", "/readyz")).status).toBe(200);
        await restarting;
        const restarted = performance.now();

        // Writes answer again (on A), then A's write made after the restart is evaluated on B and C.
        const back = await until("a write on A succeeds", async () => createEnabled(a, `after-${Math.round(performance.now())}`).catch(() => false), 20_000);
        console.log(`a write on A succeeded ${(performance.now() - restarted).toFixed(0)} ms after PostgreSQL was back (${back.toFixed(0)} ms of retrying)`);
        expect(await createEnabled(a, "after")).toBe(true);
        for (const n of [b, c]) {
          const waited = await until(`'after' on ${n.name}`, async () => (await evaluate(n, evalKey, "after")).body?.enabled === true, 3000);
          console.log(`after the restart: a write on A evaluated on ${n.name} after ${waited.toFixed(0)} ms`);
        }
        // Each node listens again (not only the revision check catching up).
        await until("three listeners again", async () => (await listeners()) === 3, 5000);
        for (const n of nodes) {
          await until(`${n.name} healthy`, async () => (await call(n, "GET", "/v1/health")).status === 200, 5000);
          const health = await ok(n, "GET", "/v1/health");
          expect(health).toMatchObject({ status: "ok", detail: { database: { answers: true } } });
          await until(`${n.name} in step`, async () => (await ok(n, "GET", "/v1/health")).detail.database.lag === 0, 3000);
        }
        loading = false;
        await loaders;
        console.log(`during the restart: evaluations by status ${JSON.stringify(Object.fromEntries(evaluations))}; writes acknowledged ${acknowledged.length}, failed ${failed}`);
        // Evaluation never reads the database: it kept answering from the snapshot.
        expect([...evaluations.keys()]).toEqual([200]);
        // Every write a node acknowledged is there.
        for (const key of acknowledged) expect(await enabledOn(c, key)).toEqual({ key, enabled: true });
        expect((await call(a, "GET", "/v1/projects/default/flags/while-down")).status).toBe(404);
      } finally {
        loading = false;
        await loaders;
        await stopAll(nodes);
      }
    },
    90_000,
  );
});
