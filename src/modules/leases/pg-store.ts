/** `LeaseStore` on PostgreSQL (store.ts has the interface): one statement each, by the database's clock. */
import { sql } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { rowsOf } from "../../db/pg/client";
import type { LeaseStore } from "./store";

/** Now in ms since the epoch, by the database's clock (clock_timestamp: not the transaction's start). */
const NOW_MS = sql.raw("(extract(epoch from clock_timestamp()) * 1000)::bigint");

export class PgLeaseStore implements LeaseStore {
  constructor(private readonly db: PgQueries) {}

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    // Atomic: a row that is free, lapsed or this holder's is (re)written; another holder's live lease is left, and nothing returns.
    const rows = await rowsOf<{ holder: string }>(
      this.db,
      sql`INSERT INTO leases (name, holder, expires_at) VALUES (${name}, ${holder}, ${NOW_MS} + ${ttlMs})
          ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
          WHERE leases.expires_at < ${NOW_MS} OR leases.holder = excluded.holder
          RETURNING holder`,
    );
    return rows.length > 0;
  }

  async renew(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const rows = await rowsOf(this.db, sql`UPDATE leases SET expires_at = ${NOW_MS} + ${ttlMs} WHERE name = ${name} AND holder = ${holder} RETURNING name`);
    return rows.length > 0;
  }

  async release(name: string, holder: string): Promise<void> {
    await this.db.execute(sql`DELETE FROM leases WHERE name = ${name} AND holder = ${holder}`);
  }

  async holder(name: string): Promise<string | null> {
    const [row] = await rowsOf<{ holder: string }>(this.db, sql`SELECT holder FROM leases WHERE name = ${name} AND expires_at >= ${NOW_MS}`);
    return row?.holder ?? null;
  }
}
