/** The database client's transaction helper, on a real SQLite file with two connections. */
import { afterEach, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, transaction, type Store } from "../../src/db/client";
import { tempDir } from "../helpers";

let dir = "";
const open: Store[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.sqlite.close();
  rmSync(dir, { recursive: true, force: true });
});

function twoConnections(): [Store, Store] {
  dir = tempDir();
  const file = join(dir, "t.db");
  const a = openDatabase(file);
  a.sqlite.run("PRAGMA journal_mode = WAL");
  a.sqlite.run("CREATE TABLE t (x INTEGER)");
  const b = openDatabase(file);
  b.sqlite.run("PRAGMA busy_timeout = 0");
  open.push(a, b);
  return [a, b];
}

test("a deferred transaction that reads, then writes after another connection committed, fails (what transaction() avoids)", () => {
  const [a, b] = twoConnections();
  expect(() =>
    a.sqlite.transaction(() => {
      a.sqlite.query("SELECT count(*) FROM t").get();
      b.sqlite.run("INSERT INTO t VALUES (1)");
      a.sqlite.run("INSERT INTO t VALUES (2)");
    })(),
  ).toThrow("database is locked");
});

test("transaction() holds the write lock from its start: no other commit comes between its read and its write", () => {
  const [a, b] = twoConnections();
  const n = transaction(a, () => {
    const before = (a.sqlite.query("SELECT count(*) AS n FROM t").get() as { n: number }).n;
    expect(() => b.sqlite.run("INSERT INTO t VALUES (1)")).toThrow("database is locked");
    a.sqlite.run("INSERT INTO t VALUES (2)");
    return before;
  });
  expect(n).toBe(0);
  b.sqlite.run("INSERT INTO t VALUES (3)"); // the lock is released at commit
  expect(a.sqlite.query("SELECT x FROM t ORDER BY x").all()).toEqual([{ x: 2 }, { x: 3 }]);
});

test("transaction() nests as a savepoint: an inner failure rolls back only the inner part", () => {
  const [a] = twoConnections();
  transaction(a, () => {
    a.sqlite.run("INSERT INTO t VALUES (1)");
    expect(() =>
      transaction(a, () => {
        a.sqlite.run("INSERT INTO t VALUES (2)");
        throw new Error("inner");
      }),
    ).toThrow("inner");
  });
  expect(a.sqlite.query("SELECT x FROM t").all()).toEqual([{ x: 1 }]);
});
