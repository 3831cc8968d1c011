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
import { CHANGES_CHANNEL } from "../../src/changes/pg";
import { migratePg } from "../../src/db/pg/migrate";
import { TestClock } from "../helpers";
import type { Stores } from "../../src/context";
import { openPostgresBackend, type PgStoreName } from "../../src/db/pg-backend";
import { createDatabase, pgAvailable } from "../pg";
import { AUTHOR, change, type MakeBackend } from "./backend";
import { describeChangeLogContract } from "./change-log.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
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
  return { changeLog: backend.changeLog, stores, close: () => backend.close() };
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
];

const IMPLEMENTED: readonly PgStoreName[] = ["projects", "settings", "users", "adminKeys", "apiKeys", "audit",
  "plugins", "pluginDownloads", "integrations"];

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

});
