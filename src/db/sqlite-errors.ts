/**
 * Constraint errors of SQLite, mapped to what the stores decide on (docs/architecture.md,
 * Storage): by the extended result code bun:sqlite puts on its error (`code`, e.g.
 * "SQLITE_CONSTRAINT_UNIQUE"), never by the message text. A PostgreSQL backend maps its
 * SQLSTATE (23505, 23503, 23514, 23502) to the same kinds.
 */
export type ConstraintKind = "unique" | "foreign_key" | "check" | "not_null";

export interface Constraint {
  kind: ConstraintKind;
  /** The driver's own code, for logs. */
  code: string;
}

const KINDS: Record<string, ConstraintKind> = {
  SQLITE_CONSTRAINT_UNIQUE: "unique",
  SQLITE_CONSTRAINT_PRIMARYKEY: "unique",
  SQLITE_CONSTRAINT_FOREIGNKEY: "foreign_key",
  SQLITE_CONSTRAINT_CHECK: "check",
  SQLITE_CONSTRAINT_NOTNULL: "not_null",
};

/** The constraint `e` (or an error it wraps, as drizzle's query errors do) violated; null for any other error. */
export function constraintOf(e: unknown): Constraint | null {
  for (let err = e, depth = 0; err instanceof Error && depth < 4; err = err.cause, depth++) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && code in KINDS) return { kind: KINDS[code]!, code };
  }
  return null;
}
