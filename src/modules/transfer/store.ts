/**
 * Storage of the whole-instance export and import (docs/export-import.md): every table that
 * makes an instance, read in one consistent snapshot, and rows written (inserted, or updated by
 * primary key) in one change-log commit with their entries. The tables and columns are the same
 * on both backends (src/db/pg/schema.ts mirrors src/db/schema.ts), so a row is the same plain
 * object (drizzle's property names, JSON columns parsed) whichever backend read it.
 *
 * What is not an instance's own state is left out: the change log and its queues (webhook
 * events and deliveries, change events), test sessions, revoked login tokens, evaluation
 * insights and staleness. `eventPosition` (where a plugin or an integration stands in this
 * database's change-event queue) is a position of this database: not exported; a row the
 * import creates starts at the queue's head, a row it updates keeps its own.
 */
import { and, asc, eq, getTableColumns } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx } from "../../changes/log";
import { sqliteTx, type SqliteChangeLog } from "../../changes/sqlite";
import type { Store } from "../../db/client";
import * as schema from "../../db/schema";
import { SqliteChangeEventStore } from "../change-events/store";

/** The tables of an instance, in an order where every row's references come before it. */
export const TABLES = [
  "settings",
  "users",
  "adminKeys",
  "projects",
  "environments",
  "segments",
  "flags",
  "flagStates",
  "schedules",
  "apiKeys",
  "webhooks",
  "plugins",
  "integrations",
  "pluginDownloads",
] as const;
export type TableName = (typeof TABLES)[number];
/** One row, by drizzle property name (`projectId`), JSON columns parsed. */
export type Row = Record<string, unknown>;
export type Tables = Record<TableName, Row[]>;

/** Each table's primary key (property names): rows are matched and ordered by it. */
export const PRIMARY_KEYS: Record<TableName, readonly string[]> = {
  settings: ["key"],
  users: ["id"],
  adminKeys: ["id"],
  projects: ["id"],
  environments: ["id"],
  segments: ["id"],
  flags: ["id"],
  flagStates: ["flagId", "environmentId"],
  schedules: ["id"],
  apiKeys: ["id"],
  webhooks: ["id"],
  plugins: ["id"],
  integrations: ["id"],
  pluginDownloads: ["packageName"],
};

/**
 * The settings that belong to the instance: the JWT secret generated at the first start (login
 * tokens and stream URLs stay valid) and the first start's mark (so the target does not
 * bootstrap again). Other settings are this database's bookkeeping (the change-event queue's
 * high water, when insights began).
 */
export const INSTANCE_SETTINGS: readonly string[] = ["jwt_secret", "bootstrapped_at"];

/**
 * Columns of this database only, never exported, never overwritten by an import: `eventPosition`
 * (see above) and, on PostgreSQL, a schedule's `claimedUntil` (a node's lease on applying it).
 */
export const LOCAL_COLUMNS: readonly string[] = ["eventPosition", "claimedUntil"];

/** What an import writes: per table, rows to insert and rows to update (by primary key), written in `TABLES` order. */
export type Upserts = Partial<Record<TableName, { insert: Row[]; update: Row[] }>>;

/** What `write`'s plan returns: its result, the rows to write and the change-log entries describing them. */
export interface Planned<T> {
  result: T;
  upserts: Upserts;
  changes: readonly ChangeDraft[];
}

export interface TransferStore {
  /** Every table's rows (without the local columns), in primary-key order, from one consistent snapshot. */
  snapshot(): Promise<Tables>;
  /**
   * One commit: reads every table in its transaction, hands them to `plan`, inserts and updates
   * the rows it asks for (an inserted row's local columns start at this database's values) and
   * appends its changes. `plan` throws to refuse: nothing is written.
   */
  write<T>(author: Author, plan: (current: Tables) => Planned<T>): Promise<T>;
}

/** `row` without the local columns. */
export function exported(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) if (!LOCAL_COLUMNS.includes(k)) out[k] = v;
  return out;
}

/** The table named `name` in a dialect's schema module (the table names are its export names, the same in both). */
export const tableIn = <S>(schemaModule: S, name: TableName) => schemaModule[name as keyof S];


/** A table's columns by property name (either dialect's drizzle table). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const columnsOf = (table: any): Record<string, any> => getTableColumns(table);

/** The condition "this row's primary key" on `table`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const byPrimaryKey = (table: any, name: TableName, row: Row) => and(...PRIMARY_KEYS[name].map((k) => eq(columnsOf(table)[k], row[k])))!;

/** The columns to order a table by: its primary key. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const primaryKeyOrder = (table: any, name: TableName) => PRIMARY_KEYS[name].map((k) => asc(columnsOf(table)[k]));

export class SqliteTransferStore implements TransferStore {
  constructor(private readonly log: SqliteChangeLog) {}

  async snapshot(): Promise<Tables> {
    // One deferred (read) transaction: on WAL, a snapshot; a running server's writes commit
    // before it or after it, never within, and are not blocked.
    return this.log.store.sqlite.transaction(() => readAll(this.log.store, exported)).deferred();
  }

  write<T>(author: Author, plan: (current: Tables) => Planned<T>): Promise<T> {
    return this.log.commit(author, async (tx: Tx) => {
      const store = sqliteTx(tx);
      const { result, upserts, changes } = plan(readAll(store, (r) => r));
      const head = new SqliteChangeEventStore(store.sqlite);
      for (const name of TABLES) {
        const table = tableIn(schema, name) as SQLiteTable;
        const { insert = [], update = [] } = upserts[name] ?? {};
        for (const row of update) store.db.update(table).set(exported(row)).where(byPrimaryKey(table, name, row)).run();
        for (const row of insert) store.db.insert(table).values(await withLocalColumns(table, row, () => head.latest())).run();
      }
      return { result, changes };
    });
  }
}

function readAll(store: Store, map: (row: Row) => Row): Tables {
  const out = {} as Tables;
  for (const name of TABLES) {
    const table = tableIn(schema, name) as SQLiteTable;
    out[name] = store.db.select().from(table).orderBy(...primaryKeyOrder(table, name)).all().map(map);
  }
  return instanceOnly(out);
}

/** `tables` with only the instance's own settings. */
export function instanceOnly(tables: Tables): Tables {
  return { ...tables, settings: tables.settings.filter((r) => INSTANCE_SETTINGS.includes(r.key as string)) };
}

/** `row` for an insert: a plugin's or integration's `eventPosition` at this database's change-event queue head; the other local columns at their defaults. */
export async function withLocalColumns(table: unknown, row: Row, head: () => Promise<number>): Promise<Row> {
  return "eventPosition" in columnsOf(table) ? { ...exported(row), eventPosition: await head() } : exported(row);
}
