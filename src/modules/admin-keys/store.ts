/**
 * All SQL of admin keys, behind `AdminKeyStore` (asynchronous at its boundary, synchronous
 * SQLite inside). Writes go through the change log with their entries.
 */
import { asc, count, eq, getTableColumns } from "drizzle-orm";
import { nextSeq } from "../../db/client";
import type { Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type SqliteChangeLog } from "../../changes/sqlite";
import type { Tx } from "../../changes/log";
import type { Store } from "../../db/client";
import { adminKeys } from "../../db/schema";
import type { SqliteUserStore } from "../users/store";

export interface AdminKeyRecord {
  id: string;
  name: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** A stored admin key: the record and the SHA-256 of its secret. */
export interface StoredAdminKey extends AdminKeyRecord {
  keyHash: string;
}

/** What a key's deletion weighs: how many keys there are, and how many admin users. */
export interface Remaining {
  keys: number;
  adminUsers: number;
}

export interface AdminKeyStore {
  /** Oldest first, then in the order they were added. */
  list(): Promise<AdminKeyRecord[]>;
  /** `tx`: read inside that transaction. */
  count(tx?: Tx): Promise<number>;
  /** Inside a commit (the first start's bootstrap): the row alone; that commit appends the entry. */
  insert(tx: Tx, key: StoredAdminKey): Promise<void>;
  /** A new key, unless its hash is already stored (false). */
  create(author: Author, key: StoredAdminKey, change: ChangeDraft): Promise<boolean>;
  remove(author: Author, id: string, decide: (current: StoredAdminKey | undefined, remaining: Remaining) => ChangeDraft): Promise<void>;
}

export class SqliteAdminKeyStore implements AdminKeyStore {
  /** `users`: the admin users counted in a deletion's transaction. */
  constructor(
    private readonly log: SqliteChangeLog,
    private readonly users: SqliteUserStore,
  ) {}

  async list(): Promise<AdminKeyRecord[]> {
    return this.log.store.db
      .select({ id: adminKeys.id, name: adminKeys.name, keyPrefix: adminKeys.keyPrefix, createdAt: adminKeys.createdAt, lastUsedAt: adminKeys.lastUsedAt })
      .from(adminKeys)
      .orderBy(asc(adminKeys.createdAt), asc(adminKeys.seq))
      .all();
  }

  async count(tx?: Tx): Promise<number> {
    return this.countOn(tx ? sqliteTx(tx) : this.log.store);
  }

  private countOn(store: Store): number {
    return store.db.select({ n: count() }).from(adminKeys).get()!.n;
  }

  create(author: Author, key: StoredAdminKey, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, key), change);
  }

  async insert(tx: Tx, key: StoredAdminKey): Promise<void> {
    sqliteTx(tx).db.insert(adminKeys).values({ ...key, seq: nextSeq(adminKeys) }).run();
  }

  remove(author: Author, id: string, decide: (current: StoredAdminKey | undefined, remaining: Remaining) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const { db } = this.log.store;
      const { seq: _, ...columns } = getTableColumns(adminKeys);
      const current = db.select(columns).from(adminKeys).where(eq(adminKeys.id, id)).get();
      const change = decide(current, { keys: this.countOn(this.log.store), adminUsers: this.users.adminsNow() });
      db.delete(adminKeys).where(eq(adminKeys.id, id)).run();
      return { result: undefined, changes: [change] };
    });
  }
}
