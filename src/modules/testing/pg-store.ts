/**
 * `TestSessionStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * Test data: no change-log entry. Every write is announced to the other nodes instead
 * (pg-sync.ts): in its transaction it moves the one revision counter (test_session_revision)
 * and sends `NOTIFY flagsvc_test_sessions, '<revision> <session id>'`, delivered at its commit.
 */
import { and, eq, gt, lte, sql } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { sessionOverrides, testSessionRevision, testSessions } from "../../db/pg/schema";
import type { Override } from "../../evaluation/types";
import { iso } from "../../lib/clock";
import type { SessionRow, StoredSession, TestSessionStore } from "./store";

/** The channel of the test-session writes: `<revision> <session id>`. */
export const TEST_SESSIONS_CHANNEL = "flagsvc_test_sessions";

export class PgTestSessionStore implements TestSessionStore {
  /** The revisions of this node's own writes, known before their commit: its sync skips them (they are applied here already). */
  readonly own = new Set<number>();

  constructor(private readonly db: PgQueries) {}

  /**
   * `write` and its announcement in one transaction. The counter's row lock orders the writes
   * of every node: revisions commit, and their notifications arrive, in revision order.
   */
  private async announced(sessionId: string, write: (db: PgQueries) => Promise<unknown>): Promise<void> {
    let revision: number | undefined;
    try {
      await this.db.transaction(async (tx) => {
        await write(tx);
        const [row] = await tx
          .insert(testSessionRevision)
          .values({ id: 1, revision: 1 })
          .onConflictDoUpdate({ target: testSessionRevision.id, set: { revision: sql`${testSessionRevision.revision} + 1` } })
          .returning({ revision: testSessionRevision.revision });
        revision = row!.revision;
        this.own.add(revision);
        await tx.execute(sql`SELECT pg_notify(${TEST_SESSIONS_CHANNEL}, ${`${revision} ${sessionId}`})`);
      });
    } catch (e) {
      if (revision !== undefined) this.own.delete(revision); // rolled back: another node's write will take this revision
      throw e;
    }
  }

  /** The last revision committed (0: no write yet). */
  async revision(): Promise<number> {
    const [row] = await this.db.select({ revision: testSessionRevision.revision }).from(testSessionRevision).where(eq(testSessionRevision.id, 1));
    return row?.revision ?? 0;
  }

  async create(session: SessionRow): Promise<void> {
    await this.announced(session.id, (db) => db.insert(testSessions).values(session));
  }

  async remove(sessionId: string): Promise<void> {
    await this.announced(sessionId, (db) => db.delete(testSessions).where(eq(testSessions.id, sessionId))); // overrides cascade
  }

  async putOverrides(sessionId: string, overrides: readonly [string, Override][], updatedAt: string): Promise<void> {
    if (overrides.length === 0) return;
    // One statement; a key given twice keeps its last value, as the SQLite loop does.
    const last = new Map(overrides);
    await this.announced(sessionId, (db) =>
      db
        .insert(sessionOverrides)
        .values([...last].map(([flagKey, value]) => ({ sessionId, flagKey, value, updatedAt })))
        .onConflictDoUpdate({ target: [sessionOverrides.sessionId, sessionOverrides.flagKey], set: { value: sql`excluded.value`, updatedAt } }),
    );
  }

  async removeOverride(sessionId: string, flagKey: string): Promise<void> {
    await this.announced(sessionId, (db) => db.delete(sessionOverrides).where(and(eq(sessionOverrides.sessionId, sessionId), eq(sessionOverrides.flagKey, flagKey))));
  }

  /** Expired sessions are ignored by every node from their expiry on: their removal is not announced (each node drops them from memory itself). */
  async removeExpired(now: number): Promise<number> {
    return (await this.db.delete(testSessions).where(lte(testSessions.expiresAt, iso(now))).returning({ id: testSessions.id })).length;
  }

  async session(id: string): Promise<StoredSession | undefined> {
    const [row] = await this.db.select().from(testSessions).where(eq(testSessions.id, id));
    if (row === undefined) return undefined;
    const overrides = await this.db.select({ flagKey: sessionOverrides.flagKey, value: sessionOverrides.value }).from(sessionOverrides).where(eq(sessionOverrides.sessionId, id)).orderBy(sessionOverrides.flagKey);
    return { ...row, overrides: overrides.map((o) => [o.flagKey, o.value] as [string, Override]) };
  }

  async live(now: number): Promise<StoredSession[]> {
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
