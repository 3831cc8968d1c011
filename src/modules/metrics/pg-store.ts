/** `MetricsStore` on PostgreSQL (store.ts has the interface and the SQLite implementation); counts and sums as float8 (bigint arrives as text). */
import { sql, type SQL } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { rowsOf } from "../../db/pg/client";
import type { MetricsStore } from "./store";

export class PgMetricsStore implements MetricsStore {
  constructor(private readonly db: PgQueries) {}

  pendingDeliveries(): Promise<number> {
    return this.count(sql`SELECT count(*)::float8 AS n FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.status = 'pending'`);
  }

  queuedChangeEvents(): Promise<number> {
    return this.count(sql`SELECT count(*)::float8 AS n FROM change_events`);
  }

  changeLogPosition(): Promise<number> {
    return this.count(sql`SELECT coalesce(max(position), 0)::float8 AS n FROM change_log`);
  }

  pluginsByStatus(): Promise<{ status: string; n: number }[]> {
    return rowsOf(this.db, sql`SELECT status, count(*)::float8 AS n FROM plugins GROUP BY status`);
  }

  integrationEvents(): Promise<{ type: string; sent: number; failed: number }[]> {
    return rowsOf(this.db, sql`SELECT type, sum(sent)::float8 AS sent, sum(failed)::float8 AS failed FROM integrations GROUP BY type`);
  }

  private async count(query: SQL): Promise<number> {
    const [row] = await rowsOf<{ n: number }>(this.db, query);
    return row!.n;
  }
}
