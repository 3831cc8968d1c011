/** Orderings on PostgreSQL that match SQLite's. */
import { sql, type SQL } from "drizzle-orm";

/**
 * A text column in byte order (`COLLATE "C"`), as SQLite's default BINARY collation orders it,
 * whatever the database's locale: lists by key come back in the same order on both.
 */
export const byteOrder = (column: unknown): SQL => sql`${column} COLLATE "C"`;
