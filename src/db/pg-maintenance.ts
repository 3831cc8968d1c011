/**
 * Database-wide operations on PostgreSQL (`Maintenance`, sqlite-maintenance.ts): whether the
 * database answers and how big it is (health, `/metrics`), the planner's upkeep, and the schema's
 * state. A copy is `pg_dump`'s job, not ours: `backup` says so (docs/scaling.md, Backups).
 */
import type { SQL } from "bun";
import { OperatorError } from "../lib/errors";
import type { SchemaStatus } from "./migrate";
import { pgSchemaStatus } from "./pg/migrate";
import type { Maintenance } from "./sqlite-maintenance";

/** What `flagsvc backup` says on PostgreSQL. */
export const PG_BACKUP =
  "flagsvc backup copies a SQLite database; on PostgreSQL use its own tools: pg_dump --format=custom --file=flagsvc.dump \"$SVC_DATABASE_URL\" (restore with pg_restore), or your provider's snapshots";

export class PgMaintenance implements Maintenance {
  constructor(private readonly sql: SQL) {}

  async answers(): Promise<boolean> {
    try {
      const [row] = await this.sql`SELECT 1 AS ok`;
      return row?.ok === 1;
    } catch {
      return false;
    }
  }

  async bytes(): Promise<number> {
    const [row] = await this.sql`SELECT pg_database_size(current_database())::bigint AS bytes`;
    return Number(row.bytes);
  }

  /** Fresh planner statistics (autovacuum keeps them too; this is the same upkeep SQLite's `optimize` does). */
  async optimize(): Promise<void> {
    await this.sql`ANALYZE`;
  }

  async backup(_target: string): Promise<void> {
    throw new OperatorError(PG_BACKUP);
  }

  /** PostgreSQL checks pages as it reads them (and `amcheck` is an extension we do not assume): nothing to report. */
  async integrityCheck(): Promise<string> {
    return "ok";
  }

  schemaStatus(): Promise<SchemaStatus> {
    return pgSchemaStatus(this.sql);
  }
}
