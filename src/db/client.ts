/** Opens the SQLite database with the pragmas the service relies on. */
import { Database } from "bun:sqlite";
import { chmodSync, existsSync } from "node:fs";
import { getTableName, sql, type SQL } from "drizzle-orm";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";

export type Db = BunSQLiteDatabase<typeof schema>;

export interface Store {
  sqlite: Database;
  db: Db;
}

export const DB_FILE = "flagsvc.db";

export function openDatabase(file: string, opts: { readonly?: boolean } = {}): Store {
  const isNew = !opts.readonly && !existsSync(file);
  const sqlite = opts.readonly ? new Database(file, { readonly: true }) : new Database(file, { create: true });
  // It holds key hashes and session tokens: owner only. The WAL and shm files take this mode.
  if (isNew) chmodSync(file, 0o600);
  // No pragma here writes to the file: a database that is about to be refused (written by a
  // newer version) must stay byte for byte as it was. WAL is switched on by migrate().
  if (!opts.readonly) sqlite.run("PRAGMA synchronous = NORMAL");
  // Deleted rows (a webhook's old secret, a revoked key's hash) are overwritten where that costs
  // no extra I/O, rather than left readable in free space.
  if (!opts.readonly) sqlite.run("PRAGMA secure_delete = FAST");
  sqlite.run("PRAGMA busy_timeout = 5000");
  sqlite.run("PRAGMA foreign_keys = ON");
  return { sqlite, db: drizzle({ client: sqlite, schema }) };
}

/**
 * The `seq` of a row about to be inserted: one more than the table's largest (docs/architecture.md,
 * Storage: lists are ordered by explicit columns, never rowid). Correct because SQLite serialises
 * writers; `offset` numbers several rows inserted by one statement.
 */
export function nextSeq(table: SQLiteTable, offset = 0): SQL {
  return sql.raw(`(SELECT coalesce(max(seq), 0) + ${1 + offset} FROM "${getTableName(table)}")`);
}

/**
 * Runs `fn` in a transaction (a savepoint when already inside one), so that services compose:
 * drizzle's own `db.transaction` cannot nest. Queries inside use `store.db` as usual.
 * `BEGIN IMMEDIATE`: the write lock is taken (waiting up to busy_timeout) before the first read.
 * A deferred transaction that reads, then writes after another connection (the background
 * worker's) committed, fails at once with "database is locked": its snapshot is stale, and
 * waiting cannot help, so SQLite does not wait.
 */
export function transaction<T>(store: Store, fn: () => T): T {
  return store.sqlite.transaction(fn).immediate();
}

/**
 * Queries built and compiled once per connection: `prepared((db) => ({ q: db.select()...
 * .where(eq(col, sql.placeholder("x"))).prepare() }))` gives a function of the store that
 * returns them. For the lookups every management request makes (project, flag, state):
 * building a drizzle query and preparing its SQLite statement anew costs more than running it.
 */
export function prepared<T>(build: (db: Db) => T): (store: Store) => T {
  const byDb = new WeakMap<Db, T>();
  return ({ db }) => {
    let queries = byDb.get(db);
    if (queries === undefined) byDb.set(db, (queries = build(db)));
    return queries;
  };
}
