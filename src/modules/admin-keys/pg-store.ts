/** `AdminKeyStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { asc, count, eq, getTableColumns } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { adminKeys } from "../../db/pg/schema";
import type { PgUserStore } from "../users/pg-store";
import type { AdminKeyRecord, AdminKeyStore, Remaining, StoredAdminKey } from "./store";

const { seq: _seq, ...STORED } = getTableColumns(adminKeys);

export class PgAdminKeyStore implements AdminKeyStore {
  /** `users`: the admin users counted in a deletion's transaction. */
  constructor(
    private readonly log: PgChangeLog,
    private readonly users: PgUserStore,
  ) {}

  list(): Promise<AdminKeyRecord[]> {
    return this.log.db
      .select({ id: adminKeys.id, name: adminKeys.name, keyPrefix: adminKeys.keyPrefix, createdAt: adminKeys.createdAt, lastUsedAt: adminKeys.lastUsedAt })
      .from(adminKeys)
      .orderBy(asc(adminKeys.createdAt), asc(adminKeys.seq));
  }

  count(tx?: Tx): Promise<number> {
    return this.countOn(tx ? pgTx(tx) : this.log.db);
  }

  private async countOn(db: PgQueries): Promise<number> {
    const [row] = await db.select({ n: count() }).from(adminKeys);
    return row!.n;
  }

  create(author: Author, key: StoredAdminKey, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, key), change);
  }

  async insert(tx: Tx, key: StoredAdminKey): Promise<void> {
    await pgTx(tx).insert(adminKeys).values(key);
  }

  remove(author: Author, id: string, decide: (current: StoredAdminKey | undefined, remaining: Remaining) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const [current] = await db.select(STORED).from(adminKeys).where(eq(adminKeys.id, id));
      const change = decide(current, { keys: await this.countOn(db), adminUsers: await this.users.admins(db) });
      await db.delete(adminKeys).where(eq(adminKeys.id, id));
      return { result: undefined, changes: [change] };
    });
  }
}
