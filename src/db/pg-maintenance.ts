/**
 * Database-wide operations on PostgreSQL (`Maintenance`, sqlite-maintenance.ts): whether the
 * database answers and how big it is (health, `/metrics`), the planner's upkeep, and the schema's
 * state, and the lock that keeps a periodic job on one node at a time. A copy is `pg_dump`'s
 * job, not ours: `backup` says so (docs/scaling.md, Backups).
 */
import type { SQL } from "bun";
import { OperatorError } from "../lib/errors";
import type { SchemaStatus } from "./migrate";
import { pgSchemaStatus } from "./pg/migrate";
import type { Maintenance } from "./sqlite-maintenance";

/** What `flagsvc backup` says on PostgreSQL. */
export const PG_BACKUP =
  "flagsvc backup copies a SQLite database; on PostgreSQL use its own tools: pg_dump --format=custom --file=flagsvc.dump \"$SVC_DATABASE_URL\" (restore with pg_restore), or your provider's snapshots";

/**
 * The first key of the jobs' advisory locks ("flag"): the two-key form, a key space apart from
 * the single bigint keys of the migrations and the write lock; the second key is the job's
 * name hashed.
 */
const JOB_LOCKS = 0x666c6167;

export class PgMaintenance implements Maintenance {
  constructor(private readonly sql: SQL) {}

  /**
   * Runs `task` unless another node runs the job `name` now (Backend.exclusive): a session-level
   * `pg_try_advisory_lock` on a connection reserved from the pool for the run, released after
   * it (and by PostgreSQL if the node dies). Resolves true when it ran, false when skipped.
   */
  async exclusive(name: string, task: () => unknown): Promise<boolean> {
    const conn = await this.sql.reserve();
    try {
      const [row] = await conn`SELECT pg_try_advisory_lock(${JOB_LOCKS}::int, hashtext(${name})) AS ok`;
      if (row?.ok !== true) return false;
      try {
        await task();
      } finally {
        await conn`SELECT pg_advisory_unlock(${JOB_LOCKS}::int, hashtext(${name}))`;
      }
      return true;
    } finally {
      conn.release();
    }
  }

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
