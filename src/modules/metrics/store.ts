/**
 * All SQL of `/metrics` and the health detail: aggregate reads over other features' tables, run
 * at scrape time (never per request), each a count or a sum on an index or a small table.
 */
import type { Database } from "bun:sqlite";

/** Deliveries waiting for an attempt (first or retry), walked per webhook on (webhook_id, status, next_attempt_at). */
const PENDING_DELIVERIES_SQL = `SELECT count(*) AS n FROM webhooks w
  JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.status = 'pending'`;
const QUEUED_CHANGE_EVENTS_SQL = "SELECT count(*) AS n FROM change_events";
const CHANGE_LOG_POSITION_SQL = "SELECT coalesce(max(position), 0) AS n FROM change_log";
const PLUGINS_BY_STATUS_SQL = "SELECT status, count(*) AS n FROM plugins GROUP BY status";
const INTEGRATION_EVENTS_SQL = "SELECT type, sum(sent) AS sent, sum(failed) AS failed FROM integrations GROUP BY type";

export interface MetricsStore {
  /** Webhook deliveries still to be attempted. */
  pendingDeliveries(): Promise<number>;
  /** Change events queued for plugins and integrations (not yet pruned). */
  queuedChangeEvents(): Promise<number>;
  /** The change log's newest position (0: empty). */
  changeLogPosition(): Promise<number>;
  /** Installed plugins by status. */
  pluginsByStatus(): Promise<{ status: string; n: number }[]>;
  /** Events the integrations of each connector type sent (accepted by the vendor) and failed, as stored. */
  integrationEvents(): Promise<{ type: string; sent: number; failed: number }[]>;
}

export class SqliteMetricsStore implements MetricsStore {
  constructor(private readonly sqlite: Database) {}

  async pendingDeliveries(): Promise<number> {
    return this.count(PENDING_DELIVERIES_SQL);
  }

  async queuedChangeEvents(): Promise<number> {
    return this.count(QUEUED_CHANGE_EVENTS_SQL);
  }

  async changeLogPosition(): Promise<number> {
    return this.count(CHANGE_LOG_POSITION_SQL);
  }

  async pluginsByStatus(): Promise<{ status: string; n: number }[]> {
    return this.sqlite.query<{ status: string; n: number }, []>(PLUGINS_BY_STATUS_SQL).all();
  }

  async integrationEvents(): Promise<{ type: string; sent: number; failed: number }[]> {
    return this.sqlite.query<{ type: string; sent: number; failed: number }, []>(INTEGRATION_EVENTS_SQL).all();
  }

  private count(sql: string): number {
    return this.sqlite.query<{ n: number }, []>(sql).get()!.n;
  }
}
