/**
 * The contract suites (test/contract/*.contract.ts) on PostgreSQL: each test gets a fresh
 * database on the test process's private cluster (test/pg.ts), opened as the server will open
 * it (`openPostgresBackend`: migrated, change log, stores). Skipped when PostgreSQL is not
 * installed.
 */
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { ChangeBus } from "../../src/changes/bus";
import type { Tx } from "../../src/changes/log";
import { CHANGES_CHANNEL, pgTx } from "../../src/changes/pg";
import { PgChangeEventStore } from "../../src/modules/change-events/pg-store";
import { PgCredentialStore } from "../../src/modules/credentials/pg-store";
import { migratePg, PG_MIGRATIONS } from "../../src/db/pg/migrate";
import { TestClock } from "../helpers";
import { openPostgresBackend } from "../../src/db/pg-backend";
import { PgMaintenance } from "../../src/db/pg-maintenance";
import { createDatabase, pgAvailable } from "../pg";
import { AUTHOR, change, flag, seedFlag, seedProject, T0, T1, type MakeBackend } from "./backend";
import { CLAIM_MS } from "../../src/modules/schedules/pg-store";
import { iso } from "../../src/lib/clock";
import { PgDeliveryQueue } from "../../src/modules/webhooks/pg-store";
import { describeChangeEventQueueContract } from "./change-events.contract";
import { describeChangeLogContract } from "./change-log.contract";
import { describeDefinitionsStoreContract } from "./definitions.contract";
import { describeFlagStoreContract } from "./flags.contract";
import { describeScheduleStoreContract } from "./schedules.contract";
import { describeSegmentStoreContract } from "./segments.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
import { describeInsightsStoreContract } from "./insights.contract";
import { describeIntegrationStoreContract, describePluginStoreContract } from "./plugins-integrations.contract";
import { describeLeaseStoreContract } from "./leases.contract";
import { describeProjectStoreContract } from "./projects.contract";
import { describeTestSessionStoreContract } from "./test-sessions.contract";
import { describeTransferStoreContract } from "./transfer.contract";
import { describeWebhookStoreContract } from "./webhooks.contract";
import { describeLoginFailureStoreContract } from "./login-failures.contract";

const makeBackend: MakeBackend = async ({ clock, bus }) => {
  const backend = await openPostgresBackend(await createDatabase(), { max: 4 }, bus, clock);
  const { db } = backend.changeLog;
  const beside = {
    changeEvents: (tx?: Tx) => new PgChangeEventStore(tx ? pgTx(tx) : db),
    integrationRuntime: backend.integrationRuntime,
    credentials: backend.credentials,
  };
  return { changeLog: backend.changeLog, stores: backend.stores, beside, close: () => backend.close() };
};

const SUITES = [describeChangeLogContract, describeProjectStoreContract, describeFlagStoreContract, describeSegmentStoreContract, describeScheduleStoreContract, describeUserStoreContract, describeAdminKeyStoreContract, describeApiKeyStoreContract, describeTestSessionStoreContract, describeWebhookStoreContract, describeDefinitionsStoreContract, describePluginStoreContract, describeIntegrationStoreContract, describeInsightsStoreContract, describeChangeEventQueueContract, describeLoginFailureStoreContract, describeTransferStoreContract];

if (!pgAvailable()) describe.skip("contract suites on PostgreSQL", () => test.skip("initdb is not on PATH", () => {}));
else {
  for (const suite of SUITES) describe("PostgreSQL", () => suite(makeBackend));
  describe("PostgreSQL", () => describeLeaseStoreContract(makeBackend, { exclusive: true }));
}

/** What only PostgreSQL has: several processes on one database; its own maintenance. */
describe.skipIf(!pgAvailable())("PostgreSQL backend", () => {
  test("maintenance: the database answers, has a size, is analyzed, reports its schema; backup points to pg_dump", async () => {
    const url = await createDatabase();
    const sql = new SQL(url, { max: 1 });
    try {
      const maintenance = new PgMaintenance(sql);
      expect(await maintenance.schemaStatus()).toEqual({ applied: 0, pending: PG_MIGRATIONS.length, unknown: 0 });
      await migratePg(sql);
      expect(await maintenance.schemaStatus()).toEqual({ applied: PG_MIGRATIONS.length, pending: 0, unknown: 0 });
      expect(await maintenance.answers()).toBe(true);
      expect(await maintenance.bytes()).toBeGreaterThan(1_000_000);
      await maintenance.optimize();
      expect(await maintenance.integrityCheck()).toBe("ok");
      await expect(maintenance.backup("/tmp/never")).rejects.toThrow(/pg_dump/);
    } finally {
      await sql.close();
    }
    // A pool that cannot query: it does not answer.
    expect(await new PgMaintenance(sql).answers()).toBe(false);
  });

  test("nodes migrating together: one applies the migrations, the others find them applied", async () => {
    const url = await createDatabase();
    const clients = [new SQL(url, { max: 1 }), new SQL(url, { max: 1 }), new SQL(url, { max: 1 })];
    try {
      const applied = await Promise.all(clients.map((c) => migratePg(c)));
      expect(applied.filter((n) => n > 0)).toHaveLength(1);
      expect(applied.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      expect(await migratePg(clients[0]!)).toBe(0);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  test("two nodes committing at once: every entry stored, positions in commit order, each commit notified with its last position", async () => {
    const url = await createDatabase();
    const nodes = await Promise.all([0, 1].map(() => openPostgresBackend(url, { max: 4 }, new ChangeBus(), new TestClock())));
    const listener = new SQL(url, { max: 1 });
    const heard: number[] = [];
    const unlisten = await listener.listen(CHANGES_CHANNEL, (payload) => void heard.push(Number(payload)));
    try {
      const ids = Array.from({ length: 10 }, (_, i) => `u${i}`);
      await Promise.all(ids.map((id, i) => nodes[i % 2]!.changeLog.commit(AUTHOR, async () => ({ result: id, changes: [change("user", id, null), change("user", `${id}b`, null)] }))));
      const { entries } = await nodes[0]!.stores.audit.page({}, 100);
      expect(entries).toHaveLength(20);
      const positions = entries.map((e) => e.position).reverse();
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
      // A commit's two entries are adjacent: the write lock serialises the nodes' transactions.
      for (let i = 0; i < positions.length; i += 2) expect(entries.at(-1 - i)!.resource.id + "b").toBe(entries.at(-2 - i)!.resource.id);
      for (let i = 0; i < 50 && heard.length < 10; i++) await Bun.sleep(20);
      expect([...heard].sort((a, b) => a - b)).toEqual(positions.filter((_, i) => i % 2 === 1));
    } finally {
      await unlisten.unlisten();
      await listener.close();
      await Promise.all(nodes.map((n) => n.close()));
    }
  });
  test("two nodes taking due schedules at once never get the same one; a claim not completed lapses after CLAIM_MS", async () => {
    const url = await createDatabase();
    const nodes = await Promise.all([0, 1].map(() => openPostgresBackend(url, { max: 4 }, new ChangeBus(), new TestClock())));
    try {
      const { schedules, projects, flags } = nodes[0]!.stores;
      const p = await seedProject(projects);
      await seedFlag(flags, p, flag("f1", "a"));
      const ids = Array.from({ length: 20 }, (_, i) => `sch_${String(i).padStart(2, "0")}`);
      const pending = { projectId: p.id, flagId: "f1", flagKey: "a", environmentId: "p1-e1", environment: "dev", at: T0, state: { enabled: true } };
      const rows = ids.map((id) => ({ id, ...pending, status: "pending" as const, createdBy: AUTHOR.actor, createdAt: T0, appliedAt: null, error: null }));
      await schedules.create(AUTHOR, rows, [change("schedule", "sch_00", "a", p)]);
      const taken = await Promise.all([0, 1, 0, 1].map((n) => nodes[n]!.stores.schedules.due(T1, 6)));
      const all = taken.flat().map((s) => s.id);
      expect(all).toHaveLength(20);
      expect(new Set(all).size).toBe(20);
      for (const batch of taken) expect(batch.map((s) => s.id)).toEqual(batch.map((s) => s.id).sort());
      expect(await nodes[1]!.stores.schedules.due(T1, 100)).toEqual([]);
      // Still pending, as on SQLite; once the claims lapse, another node takes them again.
      expect(await schedules.countPending()).toBe(20);
      const later = iso(Date.parse(T1) + CLAIM_MS);
      expect((await nodes[1]!.stores.schedules.due(later, 100)).map((s) => s.id)).toEqual(ids);
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  test("the webhook delivery queue of two nodes: each due delivery claimed by one node only, leased until its outcome is stored", async () => {
    const url = await createDatabase();
    const nodes = await Promise.all([0, 1].map(() => openPostgresBackend(url, { max: 4 }, new ChangeBus(), new TestClock(Date.parse(T0)))));
    try {
      const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
      const p = await seedProject(a.stores.projects);
      const hook = { id: "w1", projectId: p.id, projectSlug: p.slug, url: "https://hooks.example.com/w1", events: ["flag.created"], environments: [], description: null, enabled: true, secret: "s".repeat(24), createdAt: T0, updatedAt: T0 };
      await a.stores.webhooks.create(AUTHOR, hook, change("webhook", "w1", null, p));
      const queued = await a.changeLog.commit(AUTHOR, async (tx) => {
        const rows = a.stores.webhooks.outboxRows(tx);
        const takers = await rows.takers(p.id);
        const made = ["dev", "prod", "prod"].map((environment, i) => ({ event: "flag.created" as const, environment, flagKey: `f${i}`, previous: false, current: true }));
        return { result: await rows.recordEvents(p, [...made, { ...made[0]!, event: "flag.deleted" as const }], T0, takers), changes: [] };
      });
      expect(queued).toEqual(["w1", "w1", "w1"]);
      const [qa, qb] = [new PgDeliveryQueue(a.changeLog.db), new PgDeliveryQueue(b.changeLog.db)];
      expect(await qb.enabledWebhooks()).toEqual(["w1"]);
      expect(await qb.target("w1")).toEqual({ url: hook.url, secret: hook.secret });
      const ids = await qa.due("w1", T0, 10);
      expect(ids).toHaveLength(3);
      const claims = await Promise.all(ids.flatMap((id) => [qa.claim(id, T0), qb.claim(id, T0)]));
      for (let i = 0; i < ids.length; i++) {
        const won = claims.slice(2 * i, 2 * i + 2).filter((c) => c !== null);
        expect(won).toHaveLength(1);
        expect(won[0]).toMatchObject({ id: ids[i], attempts: 0, event: "flag.created" });
        expect(JSON.parse(won[0]!.payload)).toMatchObject({ event: "flag.created" });
      }
      expect(await qb.due("w1", T0, 10)).toEqual([]);
      const lease = new Date(Date.parse(T0) + 60_000).toISOString();
      expect(await qb.nextDue(T0)).toBe(lease);
      expect(await qb.claim(ids[0]!, lease)).not.toBeNull(); // a lease that ran out: another node may send it again
      const outcome = { lastAttemptAt: T0, responseStatus: 200, error: null, durationMs: 5 };
      await qb.record([
        { id: ids[0]!, status: "succeeded", attempts: 1, nextAttemptAt: null, ...outcome },
        { id: ids[1]!, status: "pending", attempts: 1, nextAttemptAt: T1, ...outcome, responseStatus: 500 },
      ]);
      await qa.record([{ id: ids[0]!, status: "failed", attempts: 2, nextAttemptAt: null, ...outcome }]); // settled: left as it is
      const listed = await a.stores.webhooks.deliveries("w1", { limit: 10 });
      expect(Object.fromEntries(listed.map((d) => [d.id, [d.status, d.attempts]]))).toEqual({ [ids[0]!]: ["succeeded", 1], [ids[1]!]: ["pending", 1], [ids[2]!]: ["pending", 0] });
      expect(await qa.due("w1", T1, 10)).toEqual([ids[2]!, ids[1]!]); // the unsettled lease ran out before T1
      const again = await a.stores.webhooks.redeliver(ids[0]!, () => T1);
      expect(again).toMatchObject({ webhookId: "w1", eventId: listed.find((d) => d.id === ids[0])!.eventId, status: "pending", attempts: 0, redeliveryOf: ids[0], nextAttemptAt: T1 });
      // Attempt-now on a delivery a node's claim holds (its attempt in flight): the claim stays, no other node takes it meanwhile.
      expect((await a.stores.webhooks.attemptNow(ids[2]!, () => T0)).nextAttemptAt).toBe(T0);
      expect(await qa.due("w1", T0, 10)).toEqual([]);
      expect(await qb.claim(ids[2]!, T0)).toBeNull();
      expect(await qa.due("w1", lease, 10)).toEqual([ids[2]!]); // once the claim has run out
      expect(await qa.prune(Date.parse(T0))).toEqual({ deliveries: 0, events: 0 });
      expect(await qa.prune(Date.parse(T1) + 31 * 86_400_000)).toEqual({ deliveries: 4, events: 3 });
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  test("another node's credential write is seen by the change log's position (no data_version); a write of anything else moves it, unnoticed", async () => {
    const url = await createDatabase();
    const [a, b] = await Promise.all([0, 1].map(() => openPostgresBackend(url, { max: 2 }, new ChangeBus(), new TestClock())));
    try {
      const credentials = new PgCredentialStore(a!.changeLog.db);
      const { position } = await credentials.load(Date.now());
      expect(await credentials.externalCredentialChange(position)).toEqual({ changed: false, position });
      await b!.changeLog.commit(AUTHOR, async () => ({ result: undefined, changes: [change("flag", "f1", "a")] }));
      const moved = await credentials.externalCredentialChange(position);
      expect(moved).toEqual({ changed: false, position: position + 1 });
      await b!.stores.users.create(AUTHOR, { id: "u1", email: "zoe@example.com", role: "admin", passwordHash: "h", tokensValidAfter: null, createdAt: T0, updatedAt: T0 }, change("user", "u1", "zoe@example.com"));
      expect(await credentials.externalCredentialChange(moved.position)).toEqual({ changed: true, position: position + 2 });
      expect((await credentials.load(Date.now())).users.map((u) => u.id)).toEqual(["u1"]);
    } finally {
      await Promise.all([a!, b!].map((n) => n.close()));
    }
  });
});
