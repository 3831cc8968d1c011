/**
 * The whole-instance transfer on PostgreSQL (store.ts): the snapshot is one repeatable-read,
 * read-only transaction (nodes may keep writing); the import is one change-log commit, whose
 * entries every running node hears through the change feed. The `seq` identities are moved past
 * the rows the import gave a `seq`, so that rows created later sort after them.
 */
import { getTableName, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";
import type { Author } from "../../changes/entry";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import * as schema from "../../db/pg/schema";
import { PgChangeEventStore } from "../change-events/pg-store";
import { byPrimaryKey, columnsOf, exported, instanceOnly, primaryKeyOrder, TABLES, tableIn, withLocalColumns, type Planned, type Tables, type TransferStore } from "./store";


export class PgTransferStore implements TransferStore {
  constructor(private readonly log: PgChangeLog) {}

  snapshot(): Promise<Tables> {
    return this.log.db.transaction(async (db) => readAll(db, true), { isolationLevel: "repeatable read", accessMode: "read only" });
  }

  write<T>(author: Author, plan: (current: Tables) => Planned<T>): Promise<T> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const { result, upserts, changes } = plan(await readAll(db, false));
      const head = new PgChangeEventStore(db);
      for (const name of TABLES) {
        const table = tableIn(schema, name) as PgTable;
        const { insert = [], update = [] } = upserts[name] ?? {};
        for (const row of update) await db.update(table).set(exported(row)).where(byPrimaryKey(table, name, row));
        for (const row of insert) await db.insert(table).values(await withLocalColumns(table, row, () => head.latest()));
        if (insert.length + update.length > 0 && "seq" in columnsOf(table)) {
          const t = getTableName(table);
          await db.execute(sql.raw(`SELECT setval(pg_get_serial_sequence('"${t}"', 'seq'), (SELECT coalesce(max(seq), 0) + 1 FROM "${t}"), false)`));
        }
      }
      return { result, changes };
    });
  }
}

async function readAll(db: PgQueries, withoutLocal: boolean): Promise<Tables> {
  const out = {} as Tables;
  for (const name of TABLES) {
    const table = tableIn(schema, name) as PgTable;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const rows = (await db.select().from(table as any).orderBy(...primaryKeyOrder(table, name))) as Record<string, unknown>[];
    out[name] = withoutLocal ? rows.map(exported) : rows;
  }
  return instanceOnly(out);
}
