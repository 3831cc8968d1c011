/**
 * The contract suites (test/contract/*.contract.ts) on PostgreSQL: each test gets a fresh
 * database on the test process's private cluster (test/pg.ts), opened as the server will open
 * it (`openPostgresBackend`: migrated, change log, stores). Skipped when PostgreSQL is not
 * installed. A suite runs once every store it reaches has a PostgreSQL implementation
 * (src/db/pg-backend.ts `PgStoreName`); until then it is skipped, naming what it waits for.
 */
import { describe, test } from "bun:test";
import type { Stores } from "../../src/context";
import { openPostgresBackend, type PgStoreName } from "../../src/db/pg-backend";
import { createDatabase, pgAvailable } from "../pg";
import type { MakeBackend } from "./backend";
import { describeChangeLogContract } from "./change-log.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
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
];

const IMPLEMENTED: readonly PgStoreName[] = ["projects", "settings", "users", "adminKeys", "apiKeys", "audit"];

if (!pgAvailable()) {
  describe.skip("contract suites on PostgreSQL", () => test.skip("initdb is not on PATH", () => {}));
} else {
  for (const [name, suite, needs] of SUITES) {
    const missing = needs.filter((s) => !(IMPLEMENTED as readonly string[]).includes(s));
    if (missing.length === 0) describe("PostgreSQL", () => suite(makeBackend));
    else describe.skip(`${name} contract on PostgreSQL`, () => test.skip(`waits for the ${missing.join(", ")} store(s)`, () => {}));
  }
}
