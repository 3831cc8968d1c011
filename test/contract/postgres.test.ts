/**
 * The contract suites (test/contract/*.contract.ts) on PostgreSQL: each test gets a fresh
 * database on the test process's private cluster (test/pg.ts), opened as the server will open
 * it (`openPostgresBackend`: migrated, change log, stores). Skipped when PostgreSQL is not
 * installed. A suite runs once every store it reaches has a PostgreSQL implementation
 * (src/db/pg-backend.ts `PgStoreName`); until then it is skipped, naming what it waits for.
 */
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { ChangeBus } from "../../src/changes/bus";
import type { Tx } from "../../src/changes/log";
import { CHANGES_CHANNEL, pgTx } from "../../src/changes/pg";
import { PgChangeEventStore } from "../../src/modules/change-events/pg-store";
import { PgCredentialStore } from "../../src/modules/credentials/pg-store";
import { PgIntegrationRuntimeStore } from "../../src/modules/integrations/pg-store";
import { migratePg } from "../../src/db/pg/migrate";
import { TestClock } from "../helpers";
import type { Stores } from "../../src/context";
import { openPostgresBackend, type PgStoreName } from "../../src/db/pg-backend";
import { createDatabase, pgAvailable } from "../pg";
import { AUTHOR, change, T0, type MakeBackend } from "./backend";
import { describeChangeEventQueueContract } from "./change-events.contract";
import { describeChangeLogContract } from "./change-log.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
import { describeInsightsStoreContract } from "./insights.contract";
import { describeIntegrationStoreContract, describePluginStoreContract } from "./plugins-integrations.contract";
import { describeProjectStoreContract } from "./projects.contract";

const makeBackend: MakeBackend = async ({ clock, bus }) => {
  const backend = await openPostgresBackend(await createDatabase(), { max: 4 }, bus, clock);
  // A store not on PostgreSQL yet fails loudly if a suite reaches it (none that runs does).
  const stores = new Proxy(backend.stores, {
    get(target, name: string) {
      if (name in target) return target[name as PgStoreName];
      throw new Error(`the ${name} store has no PostgreSQL implementation yet`);
    },
  }) as unknown as Stores;
  const { db } = backend.changeLog;
  const beside = {
    changeEvents: (tx?: Tx) => new PgChangeEventStore(tx ? pgTx(tx) : db),
    integrationRuntime: new PgIntegrationRuntimeStore(db),
    credentials: new PgCredentialStore(db),
  };
  return { changeLog: backend.changeLog, stores, beside, close: () => backend.close() };
};

/** Each suite with the stores it reaches. */
const SUITES: [string, (m: MakeBackend) => void, (keyof Stores)[]][] = [
  ["ChangeLog", describeChangeLogContract, ["projects", "audit"]],
  ["ProjectStore", describeProjectStoreContract, ["projects", "flags", "audit"]],
  ["UserStore", describeUserStoreContract, ["users"]],
  ["AdminKeyStore", describeAdminKeyStoreContract, ["adminKeys", "users"]],
  ["ApiKeyStore", describeApiKeyStoreContract, ["apiKeys", "projects"]],
  ["PluginStore", describePluginStoreContract, ["plugins", "pluginDownloads", "projects"]],
  ["IntegrationStore", describeIntegrationStoreContract, ["integrations", "projects"]],
  ["InsightsStore", describeInsightsStoreContract, ["insights", "projects", "flags"]],
  ["Change-event queue", describeChangeEventQueueContract, ["projects", "plugins", "integrations", "pluginRuntime", "metrics", "users", "apiKeys", "audit"]],
];

const IMPLEMENTED: readonly PgStoreName[] = ["projects", "settings", "users", "adminKeys", "apiKeys", "audit",
  "plugins", "pluginDownloads", "integrations", "pluginRuntime", "metrics", "insights"];

if (!pgAvailable()) {
  describe.skip("contract suites on PostgreSQL", () => test.skip("initdb is not on PATH", () => {}));
} else {
  for (const [name, suite, needs] of SUITES) {
    const missing = needs.filter((s) => !(IMPLEMENTED as readonly string[]).includes(s));
    if (missing.length === 0) describe("PostgreSQL", () => suite(makeBackend));
    else describe.skip(`${name} contract on PostgreSQL`, () => test.skip(`waits for the ${missing.join(", ")} store(s)`, () => {}));
  }
}

/** What only PostgreSQL has: several processes on one database. */
describe.skipIf(!pgAvailable())("PostgreSQL backend", () => {
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
