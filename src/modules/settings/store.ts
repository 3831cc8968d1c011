/**
 * The instance's own settings (table `settings`: a key, a text value): the first start's mark,
 * the generated JWT secret. Written rarely, never by a request.
 */
import { eq } from "drizzle-orm";
import type { Tx } from "../../changes/log";
import { sqliteTx } from "../../changes/sqlite";
import type { Store } from "../../db/client";
import { settings } from "../../db/schema";

export interface SettingsStore {
  /** `tx`: read inside that transaction. */
  get(key: string, tx?: Tx): Promise<string | undefined>;
  /** Stores `value` unless the key has one, and answers the value stored (the first writer's, when two race). */
  putIfAbsent(key: string, value: string, at: string, tx?: Tx): Promise<string>;
}

export class SqliteSettingsStore implements SettingsStore {
  constructor(private readonly store: Store) {}

  async get(key: string, tx?: Tx): Promise<string | undefined> {
    return this.on(tx).db.select({ value: settings.value }).from(settings).where(eq(settings.key, key)).get()?.value;
  }

  async putIfAbsent(key: string, value: string, at: string, tx?: Tx): Promise<string> {
    const { db } = this.on(tx);
    db.insert(settings).values({ key, value, updatedAt: at }).onConflictDoNothing().run();
    return db.select({ value: settings.value }).from(settings).where(eq(settings.key, key)).get()!.value;
  }

  private on(tx: Tx | undefined): Store {
    return tx ? sqliteTx(tx) : this.store;
  }
}
