import type { AppContext } from "../../context";

/** True when the database answers a query. */
export function databaseAnswers(ctx: AppContext): boolean {
  try {
    return ctx.sqlite.query("SELECT 1 AS ok").get() !== null;
  } catch {
    return false;
  }
}
