/**
 * Nodes that agree (src/changes/pg-feed.ts): several backends on one PostgreSQL, each with its
 * own bus and change feed, as several nodes are. Skipped when PostgreSQL is not installed.
 */
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { ChangeBus } from "../src/changes/bus";
import type { ChangeEntry } from "../src/changes/entry";
import { PgChangeFeed } from "../src/changes/pg-feed";
import { PgAuditStore } from "../src/modules/audit/pg-store";
import { openPostgresBackend, type PgBackend } from "../src/db/pg-backend";
import { AUTHOR, change, seedProject, T0, T2 } from "./contract/backend";
import { LiveSessions } from "../src/modules/testing/live";
import type { PgTestSessionStore } from "../src/modules/testing/pg-store";
import { PgSessionSync } from "../src/modules/testing/pg-sync";
import { bootstrap } from "../src/bootstrap";
import { loadConfig } from "../src/config";
import { createApp, createContext, createServices, dispatcher } from "../src/server";
import { tempDir, TestClock } from "./helpers";
import { Scheduler } from "../src/lib/scheduler";
import { createLogger } from "../src/lib/log";
import { createDatabase, pgAvailable } from "./pg";

/** A node: its backend, and every publication its bus heard (its positions), also by its first entry's resource id. */
interface Node {
  backend: PgBackend;
  heard: number[][];
  byId: Map<string, number[]>;
}

async function nodes(n: number, url?: string): Promise<Node[]> {
  const db = url ?? (await createDatabase());
  const made: Node[] = [];
  for (let i = 0; i < n; i++) {
    const bus = new ChangeBus();
    const heard: number[][] = [];
    const byId = new Map<string, number[]>();
    bus.subscribe("test", (entries: readonly ChangeEntry[]) => {
      const positions = entries.map((e) => e.position);
      heard.push(positions);
      byId.set(entries[0]!.resource.id, positions);
    });
    const backend = await openPostgresBackend(db, { max: 3 }, bus, new TestClock());
    await backend.feed.start(await backend.stores.audit.position());
    made.push({ backend, heard, byId });
  }
  return made;
}

/** Commits `keys.length` entries in one transaction on `node` (unique keys): its positions, as its own bus heard them. */
async function write(node: Node, ...keys: string[]): Promise<number[]> {
  await node.backend.changeLog.commit(AUTHOR, async () => ({ result: undefined, changes: keys.map((k) => change("flag", k, k)) }));
  return node.byId.get(keys[0]!)!;
}

/** Resolves with the ms waited once `cond` holds; rejects after `ms`. */
async function until(cond: () => boolean, ms: number): Promise<number> {
  const start = performance.now();
  while (!cond()) {
    if (performance.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await Bun.sleep(2);
  }
  return performance.now() - start;
}

const close = (all: Node[]) => Promise.all(all.map((n) => n.backend.close()));

describe.skipIf(!pgAvailable())("PostgreSQL nodes: the change feed", () => {
  test("a commit on A reaches B's bus once, whole and in position order; no node hears its own commits twice", async () => {
    const [a, b] = await nodes(2);
    try {
      const first = await write(a!, "f1", "f2", "f3");
      await until(() => b!.heard.length === 1, 1000);
      expect(b!.heard).toEqual([first]); // one publication for the commit, its three entries
      const mine = await write(b!, "g1");
      const next = [await write(a!, "f4"), await write(a!, "f5", "f6")];
      await until(() => b!.heard.length === 4, 1000);
      expect(b!.heard).toEqual([first, mine, ...next]);
      await until(() => a!.heard.length === 4, 1000);
      // In position order on A too: A's own commits wait for its feed to publish B's before them.
      expect(a!.heard).toEqual([first, next[0]!, next[1]!, mine].sort((x, y) => x[0]! - y[0]!));
      await Bun.sleep(1200); // a revision check later: nothing published again
      expect(a!.heard).toHaveLength(4);
      expect(b!.heard).toHaveLength(4);
      expect(b!.backend.feed.position).toBe(next[1]!.at(-1)!);
    } finally {
      await close([a!, b!]);
    }
  });

  test("commits on three nodes at once: each node hears every other's commits once, in position order", async () => {
    const all = await nodes(3);
    try {
      const mine = await Promise.all(all.map(async (n, i) => {
        const positions: number[][] = [];
        for (let k = 0; k < 5; k++) positions.push(await write(n, `n${i}k${k}`, `n${i}k${k}b`));
        return positions;
      }));
      for (const [i, n] of all.entries()) {
        const others = mine.filter((_, j) => j !== i).flat();
        await until(() => n.heard.length === 15, 2000);
        const fromOthers = n.heard.filter((p) => !mine[i]!.some((m) => m[0] === p[0]));
        expect(fromOthers).toEqual(others.sort((x, y) => x[0]! - y[0]!));
      }
    } finally {
      await close(all);
    }
  });

  test("a notification lost while the listener's connection is down: B reads on after the reconnect or at the revision check", async () => {
    const url = await createDatabase();
    const [a, b] = await nodes(2, url);
    const admin = new SQL(url, { max: 1 });
    try {
      await write(a!, "f0");
      await until(() => b!.heard.length === 1, 1000);
      const killed = await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()`;
      expect(killed.length).toBeGreaterThanOrEqual(2); // A's and B's listeners
      const lost = await write(a!, "f1");
      const waited = await until(() => b!.heard.length === 2, 2500);
      expect(b!.heard[1]).toEqual(lost);
      console.log(`after the listener was killed: B heard A's commit in ${waited.toFixed(0)} ms`);
    } finally {
      await admin.close();
      await close([a!, b!]);
    }
  });

  test("the revision check alone (a feed that never hears a notification) catches up within about a second", async () => {
    const url = await createDatabase();
    const [a, b] = await nodes(2, url);
    const elsewhere = new SQL(await createDatabase(), { max: 1 }); // LISTENs on another database: no notification arrives
    const bus = new ChangeBus();
    const heard: number[][] = [];
    bus.subscribe("test", (entries) => void heard.push(entries.map((e) => e.position)));
    const deaf = new PgChangeFeed({ sql: elsewhere, audit: new PgAuditStore(b!.backend.sql), changeLog: b!.backend.changeLog, bus });
    try {
      await deaf.start(await b!.backend.stores.audit.position());
      const positions = [await write(a!, "f1", "f2"), await write(a!, "f3")];
      const waited = await until(() => heard.length === 2, 2500);
      expect(heard).toEqual(positions);
      console.log(`revision check: caught up ${waited.toFixed(0)} ms after the commits`);
    } finally {
      await deaf.stop();
      await elsewhere.close();
      await close([a!, b!]);
    }
  });

  test("test sessions: the revision check alone (a sync that never hears a notification) applies another node's writes within about a second", async () => {
    const url = await createDatabase();
    const [a, b] = await nodes(2, url);
    const elsewhere = new SQL(await createDatabase(), { max: 1 }); // LISTENs on another database: no notification arrives
    const live = new LiveSessions();
    const deaf = new PgSessionSync({ sql: elsewhere, store: b!.backend.stores.testSessions as PgTestSessionStore, clock: new TestClock(Date.parse(T0)) });
    try {
      await seedProject(a!.backend.stores.projects);
      await deaf.start(live);
      const sessions = a!.backend.stores.testSessions;
      await sessions.create({ id: "s1", token: "tok-s1", projectId: "p1", label: null, createdAt: T0, expiresAt: T2 });
      await sessions.putOverrides("s1", [["checkout", false]], T0);
      const waited = await until(() => live.overridesFor("tok-s1", "p1", Date.parse(T0))?.get("checkout") === false, 2500);
      console.log(`test sessions, revision check: applied ${waited.toFixed(0)} ms after the writes`);
      expect(deaf.revision).toBe(await (sessions as PgTestSessionStore).revision());
      await sessions.remove("s1");
      await until(() => live.size === 0, 2500);
    } finally {
      await deaf.stop();
      await elsewhere.close();
      await close([a!, b!]);
    }
  });

  test("A→B latency over 50 commits (figures printed; the benchmark is the target's place)", async () => {
    const [a, b] = await nodes(2);
    try {
      const times: number[] = [];
      for (let i = 0; i < 50; i++) {
        const start = performance.now();
        await write(a!, `f${i}`);
        await until(() => b!.heard.length === i + 1, 1000);
        times.push(performance.now() - start);
      }
      times.sort((x, y) => x - y);
      console.log(`A commit → B bus: p50 ${times[25]!.toFixed(1)} ms, p99 ${times[49]!.toFixed(1)} ms`);
      expect(b!.heard).toHaveLength(50);
    } finally {
      await close([a!, b!]);
    }
  });
});

const ADMIN = `svc_admin_${"k".repeat(32)}`;
const ADMIN_EMAIL = "admin@example.com";
const ADMIN_PASSWORD = "a-long-password";

/** A node of the service on the database `url`, driven through its HTTP handler (`call`, with the admin key unless another is given). */
async function httpNode(url: string, clock = new TestClock()) {
  const config = loadConfig({ SVC_DATA_DIR: tempDir(), SVC_DATABASE_URL: url, SVC_ADMIN_KEY: ADMIN, SVC_ADMIN_EMAIL: ADMIN_EMAIL, SVC_ADMIN_PASSWORD: ADMIN_PASSWORD, SVC_LOG_LEVEL: "error" });
  const ctx = await createContext(config, { clock });
  await bootstrap(ctx);
  const services = createServices(ctx);
  const app = dispatcher(createApp(ctx, services));
  const call = (method: string, path: string, body?: unknown, key: string | null = ADMIN, headers: Record<string, string> = {}) =>
    app(new Request(`http://localhost${path}`, { method, headers: { ...(key === null ? {} : { authorization: `Bearer ${key}` }), "content-type": "application/json", ...headers }, body: body === undefined ? undefined : JSON.stringify(body) }));
  return { ctx, services, call };
}

/** Asks `ask` until `ok` holds of its answer, at most `ms`: the last answer. */
async function poll<T>(ask: () => Promise<T>, ok: (answer: T) => boolean, ms: number): Promise<T> {
  const start = performance.now();
  let answer = await ask();
  while (!ok(answer) && performance.now() - start < ms) {
    await Bun.sleep(5);
    answer = await ask();
  }
  return answer;
}

describe.skipIf(!pgAvailable())("PostgreSQL nodes: through HTTP", () => {
  test("a flag created and enabled through A's API is evaluated enabled through B's /v1/evaluate", async () => {
    const url = await createDatabase();
    const node = () => httpNode(url);
    const a = await node();
    const b = await node();
    try {
      const made = await a.call("POST", "/v1/projects/default/api-keys", { name: "eval", scope: "eval", environment: "development" });
      expect(made.status).toBe(201);
      const { key } = (await made.json()) as { key: string };
      expect((await a.call("POST", "/v1/projects/default/flags", { key: "shared", name: "Shared" })).status).toBe(201);
      const start = performance.now();
      expect((await a.call("PUT", "/v1/projects/default/flags/shared/states/development", { enabled: true })).status).toBe(200);
      const onB = async () => ((await (await b.call("POST", "/v1/evaluate", { flagKey: "shared", context: {} }, key)).json()) as { enabled?: boolean; value?: unknown });
      let answer = await onB();
      while (answer.enabled !== true && performance.now() - start < 1000) {
        await Bun.sleep(5);
        answer = await onB();
      }
      expect(answer).toMatchObject({ enabled: true });
      console.log(`A's PUT → enabled on B's /v1/evaluate: ${(performance.now() - start).toFixed(1)} ms`);
      // B has applied everything A committed: the health detail says it is 0 positions behind.
      const health = (await (await b.call("GET", "/v1/health")).json()) as { detail: { database: { lag: number } } };
      expect(health.detail.database.lag).toBe(0);
      expect(await b.ctx.lag()).toBe(0);
      // B's evaluation counts live in B's memory until a flush: closing B writes them before its pool closes, and A reads them.
      const evaluatedOnB = (await b.call("GET", "/v1/projects/default/flags/shared/insights?environment=development")).json() as Promise<{ points: { total: number }[] }>;
      const countedOnB = (await evaluatedOnB).points.reduce((n, p) => n + p.total, 0);
      expect(countedOnB).toBeGreaterThan(0);
      await b.ctx.close();
      const onA = (await (await a.call("GET", "/v1/projects/default/flags/shared/insights?environment=development")).json()) as { points: { total: number }[] };
      expect(onA.points.reduce((n, p) => n + p.total, 0)).toBe(countedOnB);
    } finally {
      await a.ctx.close();
      await b.ctx.close();
    }
  });

  test("test sessions: a session and its overrides written on A apply on B within 1 s (created, changed, deleted), also after a lost notification", async () => {
    const url = await createDatabase();
    const a = await httpNode(url);
    const b = await httpNode(url);
    try {
      const key = async (scope: string) => ((await (await a.call("POST", "/v1/projects/default/api-keys", { name: scope, scope, environment: "development" })).json()) as { key: string }).key;
      const [testKey, evalKey] = [await key("test"), await key("eval")];
      expect((await a.call("POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout" })).status).toBe(201);
      expect((await a.call("PUT", "/v1/projects/default/flags/checkout/states/development", { enabled: true })).status).toBe(200);
      const onB = (token: string) => async () =>
        (await (await b.call("POST", "/v1/evaluate", { flagKey: "checkout", context: {} }, evalKey, { "x-service-session": token })).json()) as { reason?: string; enabled?: boolean };
      const made = await a.call("POST", "/v1/testing/sessions", { projectId: "default" }, testKey);
      expect(made.status).toBe(201);
      const session = (await made.json()) as { id: string; token: string };
      let start = performance.now();
      expect((await a.call("PUT", `/v1/testing/sessions/${session.id}/overrides/checkout`, { value: false }, testKey)).status).toBe(200);
      const overridden = await poll(onB(session.token), (r) => r.reason === "TEST_OVERRIDE", 1000);
      expect(overridden).toMatchObject({ reason: "TEST_OVERRIDE", enabled: false });
      console.log(`A's override → TEST_OVERRIDE on B's /v1/evaluate: ${(performance.now() - start).toFixed(1)} ms`);
      // B's own API answers the session too (its memory holds it), with A's override.
      expect(await (await b.call("GET", `/v1/testing/sessions/${session.id}`, undefined, testKey)).json()).toMatchObject({ id: session.id, overrides: { checkout: false } });
      // Changed on B: A sees it.
      expect((await b.call("PUT", `/v1/testing/sessions/${session.id}/overrides/checkout`, { value: true }, testKey)).status).toBe(200);
      const onA = await poll(async () => (await (await a.call("GET", `/v1/testing/sessions/${session.id}`, undefined, testKey)).json()) as { overrides: Record<string, unknown> }, (r) => r.overrides.checkout === true, 1000);
      expect(onA.overrides).toEqual({ checkout: true });
      // The override deleted on A: B evaluates the flag itself again.
      expect((await a.call("DELETE", `/v1/testing/sessions/${session.id}/overrides/checkout`, undefined, testKey)).status).toBe(204);
      expect(await poll(onB(session.token), (r) => r.reason !== "TEST_OVERRIDE", 1000)).toMatchObject({ enabled: true });
      expect((await b.call("GET", `/v1/testing/sessions/${session.id}`)).status).not.toBe(500);

      // A notification lost (the listeners killed): B catches up at the reconnect or the revision check.
      const admin = new SQL(url, { max: 1 });
      try {
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()`;
      } finally {
        await admin.close();
      }
      start = performance.now();
      expect((await a.call("PUT", `/v1/testing/sessions/${session.id}/overrides/checkout`, { value: false }, testKey)).status).toBe(200);
      expect(await poll(onB(session.token), (r) => r.reason === "TEST_OVERRIDE", 2500)).toMatchObject({ enabled: false });
      console.log(`after the listeners were killed: B applied A's override in ${(performance.now() - start).toFixed(0)} ms`);

      // The session deleted on A: B ignores its token.
      expect((await a.call("DELETE", `/v1/testing/sessions/${session.id}`, undefined, testKey)).status).toBe(204);
      expect(await poll(onB(session.token), (r) => r.reason !== "TEST_OVERRIDE", 1000)).toMatchObject({ enabled: true });
      expect((await b.call("GET", `/v1/testing/sessions/${session.id}`, undefined, testKey)).status).toBe(404);
    } finally {
      a.ctx.close();
      b.ctx.close();
    }
  });

  test("login lockout: 10 failed logins spread over A and B lock the email on both, with today's 429", async () => {
    const url = await createDatabase();
    const a = await httpNode(url);
    const b = await httpNode(url);
    try {
      const login = (node: typeof a, password: string) => node.call("POST", "/v1/auth/login", { email: ADMIN_EMAIL, password }, null);
      for (let i = 0; i < 10; i++) expect((await login(i % 2 === 0 ? a : b, `wrong password ${i}`)).status).toBe(401);
      for (const node of [a, b]) {
        const locked = await login(node, ADMIN_PASSWORD); // even the right password
        expect(locked.status).toBe(429);
        expect(await locked.json()).toEqual({ error: "RATE_LIMITED", message: expect.stringContaining("Too many failed logins for this email"), retryAfter: 900 });
        expect(locked.headers.get("retry-after")).toBe("900");
      }
    } finally {
      a.ctx.close();
      b.ctx.close();
    }
  }, 60_000);
});

describe.skipIf(!pgAvailable())("PostgreSQL nodes: retention and sweeps on one node at a time", () => {
  test("two nodes running the same job at once: it runs once; the lock is free again after it", async () => {
    const [a, b] = await nodes(2);
    try {
      let runs = 0;
      const job = async () => {
        runs++;
        await Bun.sleep(300);
      };
      expect(await Promise.all([a!.backend.exclusive("audit-retention", job), b!.backend.exclusive("audit-retention", job)])).toEqual(expect.arrayContaining([true, false]));
      expect(runs).toBe(1);
      // Another job is not held by it; and once it is over, the next run of the same job goes ahead.
      expect(await Promise.all([a!.backend.exclusive("audit-retention", job), b!.backend.exclusive("webhook-retention", job)])).toEqual([true, true]);
      expect(runs).toBe(3);
      // A job that throws releases the lock all the same.
      await expect(a!.backend.exclusive("audit-retention", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
      expect(await b!.backend.exclusive("audit-retention", job)).toBe(true);
    } finally {
      await close([a!, b!]);
    }
  });

  test("the sweeps of two nodes' schedulers firing together: each run goes to one node", async () => {
    const [a, b] = await nodes(2);
    const schedulers = [a!, b!].map((n) => new Scheduler(createLogger({ level: "error", format: "json" }), n.backend.exclusive));
    try {
      const ran: { node: string; second: number }[] = [];
      for (const [i, s] of schedulers.entries()) {
        s.every("test-sessions-sweep", "* * * * * *", async () => {
          ran.push({ node: i === 0 ? "a" : "b", second: Math.floor(Date.now() / 1000) });
          await Bun.sleep(400); // the other node's run fires meanwhile
        }, { oneNode: true });
      }
      await Bun.sleep(3100);
      expect(ran.length).toBeGreaterThanOrEqual(2);
      expect(new Set(ran.map((r) => r.second)).size).toBe(ran.length); // never two runs in one second
      console.log(`runs over 3 s of a job both nodes fire every second: ${ran.map((r) => r.node).join(" ")}`);
    } finally {
      for (const s of schedulers) s.stopAll();
      await close([a!, b!]);
    }
  });
});
