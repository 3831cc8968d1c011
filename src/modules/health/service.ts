import type { Database } from "bun:sqlite";

/** True when the database answers a query. */
export function databaseAnswers(sqlite: Pick<Database, "query">): boolean {
  try {
    return sqlite.query("SELECT 1 AS ok").get() !== null;
  } catch {
    return false;
  }
}
