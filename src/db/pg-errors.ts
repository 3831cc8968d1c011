/**
 * Constraint errors of PostgreSQL, mapped to the same kinds as SQLite's (sqlite-errors.ts): by
 * the SQLSTATE the server sent (Bun's `SQL.PostgresError` carries it in `errno`; postgres-js and
 * others in `code`), never by the message text.
 */
import type { Constraint, ConstraintKind } from "./sqlite-errors";

const KINDS: Record<string, ConstraintKind> = {
  "23505": "unique",
  "23503": "foreign_key",
  "23514": "check",
  "23502": "not_null",
};

/** The constraint `e` (or an error it wraps, as drizzle's query errors do) violated; null for any other error. */
export function pgConstraintOf(e: unknown): Constraint | null {
  for (let err = e, depth = 0; err instanceof Error && depth < 4; err = err.cause, depth++) {
    for (const field of ["errno", "code"] as const) {
      const code = (err as { [k in typeof field]?: unknown })[field];
      if (typeof code === "string" && code in KINDS) return { kind: KINDS[code]!, code };
    }
  }
  return null;
}
