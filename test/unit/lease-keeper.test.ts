/** The lease keeper (src/modules/leases/keeper.ts) over a real SQLite file: gained, renewed, lost, released. */
import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { openDatabase, type Store } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { createLogger } from "../../src/lib/log";
import { LeaseKeeper } from "../../src/modules/leases/keeper";
import { SqliteLeaseStore } from "../../src/modules/leases/store";
import { tempDir, until } from "../helpers";

const log = createLogger({ level: "error", format: "json", write: () => {} });
const open: { store: Store; keepers: LeaseKeeper[] }[] = [];

function setup() {
  const store = openDatabase(join(tempDir(), "flagsvc.db"));
  migrate(store.sqlite);
  const leases = new SqliteLeaseStore(store.sqlite);
  const made = { store, keepers: [] as LeaseKeeper[] };
  open.push(made);
  const keeper = (node: string, ttlMs = 300) => {
    const k = new LeaseKeeper({ store: leases, node, log, ttlMs });
    made.keepers.push(k);
    return k;
  };
  /** A handler that records what happened to the lease. */
  const events = () => {
    const seen: string[] = [];
    return { seen, handler: { gained: () => void seen.push("gained"), lost: () => void seen.push("lost") } };
  };
  return { store, leases, keeper, events };
}

afterEach(() => {
  for (const { store, keepers } of open.splice(0)) {
    for (const k of keepers) k.close();
    store.sqlite.close();
  }
});

test("a wanted lease is gained at once and renewed; drop releases it; a second want of a held lease hands it to the new handler", async () => {
  const { leases, keeper, events } = setup();
  const a = keeper("node-a");
  const first = events();
  a.want("plugin:p1", first.handler);
  await until("gained", () => first.seen.length === 1);
  expect(first.seen).toEqual(["gained"]);
  expect(a.holds("plugin:p1")).toBe(true);
  await Bun.sleep(700); // two TTLs: renewed meanwhile, still held
  expect(await leases.holder("plugin:p1")).toBe("node-a");
  const second = events();
  a.want("plugin:p1", second.handler);
  expect(second.seen).toEqual(["gained"]);
  await a.drop("plugin:p1");
  expect(await leases.holder("plugin:p1")).toBeNull();
  expect(first.seen).toEqual(["gained"]);
});

test("another holder takes the lease (SQLite grants every acquire): the first one's renewal is refused and its work is told it lost it", async () => {
  const { leases, keeper, events } = setup();
  const a = keeper("node-a");
  const b = keeper("node-b");
  const onA = events();
  a.want("integration:i1", onA.handler);
  await until("A gained", () => onA.seen.length === 1);
  const onB = events();
  b.want("integration:i1", onB.handler);
  await until("B gained", () => onB.seen.length === 1);
  await until("A lost", () => onA.seen.length === 2, 2000);
  expect(onA.seen).toEqual(["gained", "lost"]);
  expect(a.holds("integration:i1")).toBe(false);
  expect(await leases.holder("integration:i1")).toBe("node-b");
});

test("renewals that fail (the database gone): the lease is kept until it may have lapsed, then lost", async () => {
  const { store, keeper, events } = setup();
  const a = keeper("node-a", 600);
  const onA = events();
  a.want("plugin:p1", onA.handler);
  await until("gained", () => onA.seen.length === 1);
  const closedAt = performance.now();
  store.sqlite.close();
  await until("lost", () => onA.seen.length === 2, 3000);
  const ms = performance.now() - closedAt;
  expect(onA.seen).toEqual(["gained", "lost"]);
  expect(ms).toBeGreaterThanOrEqual(200); // not at the first failed renewal
  expect(ms).toBeLessThan(1500);
  a.close();
  open.pop(); // its database is closed already
});

test("releaseAll gives every held lease up and stops trying", async () => {
  const { leases, keeper, events } = setup();
  const a = keeper("node-a");
  const one = events();
  const two = events();
  a.want("plugin:p1", one.handler);
  a.want("plugin:p2", two.handler);
  await until("both gained", () => one.seen.length === 1 && two.seen.length === 1);
  await a.releaseAll();
  expect([await leases.holder("plugin:p1"), await leases.holder("plugin:p2")]).toEqual([null, null]);
});
