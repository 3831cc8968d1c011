/**
 * `TestSessionStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * Test data: plain statements and one transaction for a batch of overrides, no change-log entry.
 */
import { and, eq, gt, lte, sql } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { sessionOverrides, testSessions } from "../../db/pg/schema";
import type { Override } from "../../evaluation/types";
import { iso } from "../../lib/clock";
import type { SessionRow, TestSessionStore } from "./store";

export class PgTestSessionStore implements TestSessionStore {
  constructor(private readonly db: PgQueries) {}

  async create(session: SessionRow): Promise<void> {
    await this.db.insert(testSessions).values(session);
  }

  async remove(sessionId: string): Promise<void> {
    await this.db.delete(testSessions).where(eq(testSessions.id, sessionId)); // overrides cascade
  }

  async putOverrides(sessionId: string, overrides: readonly [string, Override][], updatedAt: string): Promise<void> {
    if (overrides.length === 0) return;
    // One statement (one transaction); a key given twice keeps its last value, as the SQLite loop does.
    const last = new Map(overrides);
    await this.db
      .insert(sessionOverrides)
      .values([...last].map(([flagKey, value]) => ({ sessionId, flagKey, value, updatedAt })))
      .onConflictDoUpdate({ target: [sessionOverrides.sessionId, sessionOverrides.flagKey], set: { value: sql`excluded.value`, updatedAt } });
  }

  async removeOverride(sessionId: string, flagKey: string): Promise<void> {
    await this.db.delete(sessionOverrides).where(and(eq(sessionOverrides.sessionId, sessionId), eq(sessionOverrides.flagKey, flagKey)));
  }

  async removeExpired(now: number): Promise<number> {
    return (await this.db.delete(testSessions).where(lte(testSessions.expiresAt, iso(now))).returning({ id: testSessions.id })).length;
  }

  async live(now: number): Promise<(SessionRow & { overrides: [string, Override][] })[]> {
    const rows = await this.db.select().from(testSessions).where(gt(testSessions.expiresAt, iso(now)));
    const live = new Map(rows.map((row) => [row.id, { ...row, overrides: [] as [string, Override][] }]));
    if (live.size === 0) return [];
    const overrides = await this.db
      .select({ sessionId: sessionOverrides.sessionId, flagKey: sessionOverrides.flagKey, value: sessionOverrides.value })
      .from(sessionOverrides)
      .innerJoin(testSessions, eq(testSessions.id, sessionOverrides.sessionId))
      .where(gt(testSessions.expiresAt, iso(now)));
    for (const row of overrides) live.get(row.sessionId)?.overrides.push([row.flagKey, row.value]);
    return [...live.values()];
  }
}
