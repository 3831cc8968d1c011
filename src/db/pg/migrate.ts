/**
 * Applies the PostgreSQL backend's embedded migrations (src/db/pg/migrations), keeping drizzle's
 * bookkeeping table `__drizzle_migrations` (hash, created_at) as SQLite's migrate.ts does.
 * Nodes that start together do not race: the whole check-and-apply runs on one connection under
 * a session advisory lock, so the second node waits, then finds nothing pending. The pending
 * migrations apply in one transaction (PostgreSQL's DDL is transactional): all or none.
 * A database holding a migration this binary does not know is refused before anything is written.
 */
import type { SQL } from "bun";
import type { MigrationMeta } from "drizzle-orm/migrator";
import { embeddedMigrations, SchemaTooNewError, type SchemaStatus } from "../migrate";
import * as folder from "./migrations";

const MIGRATIONS_TABLE = "__drizzle_migrations";
/** The advisory lock's key: any fixed 64-bit number that nothing else of ours takes ("flagsvc" + 1). */
const MIGRATION_LOCK = 0x666c6167737663_01n;

export const PG_MIGRATIONS: readonly MigrationMeta[] = embeddedMigrations(folder, "db:generate:pg");

/** Applied, pending and unknown migrations of the database (no lock: a read). */
export async function pgSchemaStatus(sql: SQL, migrations: readonly MigrationMeta[] = PG_MIGRATIONS): Promise<SchemaStatus> {
  const [{ present }] = await sql`SELECT to_regclass(${MIGRATIONS_TABLE}) IS NOT NULL AS present`;
  const hashes: string[] = present ? (await sql.unsafe(`SELECT hash FROM ${MIGRATIONS_TABLE}`)).map((r: { hash: string }) => r.hash) : [];
  const known = new Set(migrations.map((m) => m.hash));
  const applied = new Set(hashes);
  return { applied: hashes.length, pending: migrations.filter((m) => !applied.has(m.hash)).length, unknown: hashes.filter((h) => !known.has(h)).length };
}

/** Brings the schema up to date; returns how many migrations ran (0: it was up to date). */
export async function migratePg(sql: SQL, migrations: readonly MigrationMeta[] = PG_MIGRATIONS): Promise<number> {
  const conn = await sql.reserve();
  try {
    await conn`SELECT pg_advisory_lock(${MIGRATION_LOCK.toString()}::bigint)`;
    try {
      await conn.unsafe(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
      const rows: { hash: string }[] = await conn.unsafe(`SELECT hash FROM ${MIGRATIONS_TABLE}`);
      const applied = new Set(rows.map((r) => r.hash));
      const known = new Set(migrations.map((m) => m.hash));
      const unknown = [...applied].filter((h) => !known.has(h)).length;
      if (unknown > 0) throw new SchemaTooNewError(unknown);
      const pending = migrations.filter((m) => !applied.has(m.hash));
      if (pending.length === 0) return 0;
      await conn.begin(async (tx) => {
        for (const m of pending) {
          for (const statement of m.sql) if (statement.trim() !== "") await tx.unsafe(statement);
          await tx`INSERT INTO __drizzle_migrations (hash, created_at) VALUES (${m.hash}, ${m.folderMillis})`;
        }
      });
      return pending.length;
    } finally {
      await conn`SELECT pg_advisory_unlock(${MIGRATION_LOCK.toString()}::bigint)`;
    }
  } finally {
    await conn.release();
  }
}
