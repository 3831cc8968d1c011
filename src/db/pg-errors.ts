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

/**
 * Bun's driver codes for a connection it could not open or lost, and the SQLSTATEs of a server
 * that is going away or not accepting connections yet (class 08: connection exception; 57P01-03:
 * shut down by an administrator, a crash, starting up).
 */
const UNREACHABLE = /^(ERR_POSTGRES_(CONNECTION_(CLOSED|REFUSED|TIMEOUT)|IDLE_TIMEOUT|LIFETIME_TIMEOUT|TLS_UPGRADE_FAILED)|08\w{3}|57P0[123]|ECONNREFUSED|ECONNRESET|ETIMEDOUT)$/;

/** True when `e` (or an error it wraps) says the database cannot be reached now, rather than that a statement failed. */
export function databaseUnreachable(e: unknown): boolean {
  for (let err = e, depth = 0; err instanceof Error && depth < 4; err = err.cause, depth++) {
    for (const field of ["errno", "code"] as const) {
      const code = (err as { [k in typeof field]?: unknown })[field];
      if (typeof code === "string" && UNREACHABLE.test(code)) return true;
    }
  }
  return false;
}

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
