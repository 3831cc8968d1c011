/**
 * All SQL of the failed-login lockout (decisions §4, service.ts), behind `LoginFailureStore`: the
 * failures of each email in the database, so that every node sharing it counts the same ones
 * (docs/scaling.md). Login is not a hot path: one read before the password check, one upsert
 * for the attempt, one delete after a success.
 */
import { eq, lte, sql, type Column } from "drizzle-orm";
import type { Store } from "../../db/client";
import { loginFailures } from "../../db/schema";

/** The failures counted for an email in its current window: the first one's time, how many. */
export interface LoginFailures {
  firstAt: string;
  count: number;
}

export interface LoginFailureStore {
  /** The failures of `email`, whatever their age (the caller compares `firstAt` with its window). */
  get(email: string): Promise<LoginFailures | undefined>;
  /**
   * Counts one failure at `at`, atomically: a window that began at or before `cutoff` has ended,
   * so the count starts again at 1 from `at`. Returns the count with this failure.
   */
  fail(email: string, at: string, cutoff: string): Promise<LoginFailures>;
  /** A success: the email's count is gone. */
  clear(email: string): Promise<void>;
  /** Removes the windows that began at or before `cutoff`; returns how many. */
  prune(cutoff: string): Promise<number>;
}

/** The upsert's SET, the same on both dialects (each expression reads the row as it was). */
export function failureSet(t: { firstAt: Column; count: Column }, at: string, cutoff: string) {
  return {
    count: sql`CASE WHEN ${t.firstAt} <= ${cutoff} THEN 1 ELSE ${t.count} + 1 END`,
    firstAt: sql`CASE WHEN ${t.firstAt} <= ${cutoff} THEN ${at} ELSE ${t.firstAt} END`,
  };
}

export class SqliteLoginFailureStore implements LoginFailureStore {
  constructor(private readonly store: Store) {}

  async get(email: string): Promise<LoginFailures | undefined> {
    return this.store.db.select({ firstAt: loginFailures.firstAt, count: loginFailures.count }).from(loginFailures).where(eq(loginFailures.email, email)).get();
  }

  async fail(email: string, at: string, cutoff: string): Promise<LoginFailures> {
    return this.store.db
      .insert(loginFailures)
      .values({ email, firstAt: at, count: 1 })
      .onConflictDoUpdate({ target: loginFailures.email, set: failureSet(loginFailures, at, cutoff) })
      .returning({ firstAt: loginFailures.firstAt, count: loginFailures.count })
      .get()!;
  }

  async clear(email: string): Promise<void> {
    this.store.db.delete(loginFailures).where(eq(loginFailures.email, email)).run();
  }

  async prune(cutoff: string): Promise<number> {
    return this.store.db.delete(loginFailures).where(lte(loginFailures.firstAt, cutoff)).returning({ email: loginFailures.email }).all().length;
  }
}
