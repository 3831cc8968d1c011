/**
 * The backend the configuration asks for: PostgreSQL when `SVC_DATABASE_URL` is set (shared by
 * every node: docs/scaling.md), else SQLite in the data dir, as ever.
 */
import type { ChangeBus } from "../changes/bus";
import type { Config } from "../config";
import type { Clock } from "../lib/clock";
import type { Logger } from "../lib/log";
import type { Backend } from "./backend";
import { postgresOptions } from "./database-url";
import { openPostgresBackend } from "./pg-backend";
import { openSqliteBackend } from "./sqlite-backend";
import { claimLeaseMs } from "../modules/webhooks/pg-store";

export async function openBackend(config: Config, bus: ChangeBus, clock: Clock, log?: Logger): Promise<Backend> {
  if (config.databaseUrl === undefined) return openSqliteBackend(config, bus, clock);
  const { url, ...options } = postgresOptions(config);
  return openPostgresBackend(url, options, bus, clock, log, claimLeaseMs(config.webhookTimeoutMs));
}
