/**
 * The PostgreSQL connection of the backend: Bun's built-in `SQL` (a pool) and drizzle's
 * `bun-sql` over it, with the pg-core schema.
 */
import { SQL } from "bun";
import type { SQL as Query } from "drizzle-orm";
import type { PgDatabase } from "drizzle-orm/pg-core";
import { drizzle, type BunSQLDatabase } from "drizzle-orm/bun-sql";
import type { BunSQLQueryResultHKT } from "drizzle-orm/bun-sql/session";
import * as schema from "./schema";

export type PgDb = BunSQLDatabase<typeof schema>;
/** What queries run on: the pool (`PgDb`) or a transaction of it. */
export type PgQueries = PgDatabase<BunSQLQueryResultHKT, typeof schema>;

export interface PgStore {
  sql: SQL;
  db: PgDb;
}

/** `options`: what `new SQL(url, options)` takes beside the URL (TLS, pool size). */
export function openPg(url: string, options: Omit<SQL.PostgresOrMySQLOptions, "url"> = {}): PgStore {
  const sql = new SQL(url, options);
  return { sql, db: drizzle({ client: sql, schema }) };
}

/** Rows of a raw query, as Bun's driver returns them: what the stores' hand-written statements read. */
export async function rowsOf<T>(db: PgQueries, query: Query): Promise<T[]> {
  return (await db.execute(query)) as unknown as T[];
}
