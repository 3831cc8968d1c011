/** `SettingsStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { eq } from "drizzle-orm";
import type { Tx } from "../../changes/log";
import { pgTx } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { settings } from "../../db/pg/schema";
import type { SettingsStore } from "./store";

export class PgSettingsStore implements SettingsStore {
  constructor(private readonly db: PgQueries) {}

  async get(key: string, tx?: Tx): Promise<string | undefined> {
    const [row] = await this.on(tx).select({ value: settings.value }).from(settings).where(eq(settings.key, key));
    return row?.value;
  }

  async putIfAbsent(key: string, value: string, at: string, tx?: Tx): Promise<string> {
    const db = this.on(tx);
    // Two nodes racing: the loser's insert does nothing (the unique key waits for the winner's commit), then reads its value.
    await db.insert(settings).values({ key, value, updatedAt: at }).onConflictDoNothing();
    return (await this.get(key, tx))!;
  }

  private on(tx: Tx | undefined): PgQueries {
    return tx ? pgTx(tx) : this.db;
  }
}
