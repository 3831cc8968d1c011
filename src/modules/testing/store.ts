/**
 * All SQL of test sessions and their overrides, behind `TestSessionStore`: asynchronous at its
 * boundary (a PostgreSQL implementation stands behind the same interface), synchronous SQLite
 * inside. Test data written at pipeline speed: no change-log entry (docs/decisions.md, Testing
 * API), so the writes are plain transactions, not the change log's commits.
 */
import { and, eq, gt, lte } from "drizzle-orm";
import { transaction, type Store } from "../../db/client";
import { sessionOverrides, testSessions } from "../../db/schema";
import type { Override } from "../../evaluation/types";
import { iso } from "../../lib/clock";

/** A session as stored. */
export interface SessionRow {
  id: string;
  token: string;
  projectId: string;
  label: string | null;
  createdAt: string;
  expiresAt: string;
}

export interface TestSessionStore {
  create(session: SessionRow): Promise<void>;
  /** The session and its overrides (cascade). */
  remove(sessionId: string): Promise<void>;
  /** Each override set, replacing any earlier value of its key, all in one transaction. */
  putOverrides(sessionId: string, overrides: readonly [string, Override][], updatedAt: string): Promise<void>;
  removeOverride(sessionId: string, flagKey: string): Promise<void>;
  /** Sessions expired at `now` (`expiresAt <= now`), with their overrides; returns how many. */
  removeExpired(now: number): Promise<number>;
  /** Start-up (and a node's resynchronisation): the sessions not yet expired at `now`, each with its overrides. */
  live(now: number): Promise<StoredSession[]>;
  /** One session with its overrides, unless it is gone (another node's write, to apply here). */
  session(id: string): Promise<StoredSession | undefined>;
}

/** A session with its overrides, as loaded. */
export type StoredSession = SessionRow & { overrides: [string, Override][] };

export class SqliteTestSessionStore implements TestSessionStore {
  constructor(private readonly store: Store) {}

  async create(session: SessionRow): Promise<void> {
    this.store.db.insert(testSessions).values(session).run();
  }

  async remove(sessionId: string): Promise<void> {
    this.store.db.delete(testSessions).where(eq(testSessions.id, sessionId)).run(); // overrides cascade
  }

  async putOverrides(sessionId: string, overrides: readonly [string, Override][], updatedAt: string): Promise<void> {
    const { db } = this.store;
    transaction(this.store, () => {
      for (const [flagKey, value] of overrides) {
        db.insert(sessionOverrides)
          .values({ sessionId, flagKey, value, updatedAt })
          .onConflictDoUpdate({ target: [sessionOverrides.sessionId, sessionOverrides.flagKey], set: { value, updatedAt } })
          .run();
      }
    });
  }

  async removeOverride(sessionId: string, flagKey: string): Promise<void> {
    this.store.db
      .delete(sessionOverrides)
      .where(and(eq(sessionOverrides.sessionId, sessionId), eq(sessionOverrides.flagKey, flagKey)))
      .run();
  }

  async removeExpired(now: number): Promise<number> {
    return this.store.db.delete(testSessions).where(lte(testSessions.expiresAt, iso(now))).returning({ id: testSessions.id }).all().length;
  }

  async session(id: string): Promise<StoredSession | undefined> {
    const { db } = this.store;
    const row = db.select().from(testSessions).where(eq(testSessions.id, id)).get();
    if (row === undefined) return undefined;
    const overrides = db.select({ flagKey: sessionOverrides.flagKey, value: sessionOverrides.value }).from(sessionOverrides).where(eq(sessionOverrides.sessionId, id)).orderBy(sessionOverrides.flagKey).all();
    return { ...row, overrides: overrides.map((o) => [o.flagKey, o.value] as [string, Override]) };
  }

  async live(now: number): Promise<StoredSession[]> {
    const { db } = this.store;
    const live = new Map(db.select().from(testSessions).where(gt(testSessions.expiresAt, iso(now))).all().map((row) => [row.id, { ...row, overrides: [] as [string, Override][] }]));
    for (const row of db.select().from(sessionOverrides).all()) live.get(row.sessionId)?.overrides.push([row.flagKey, row.value]);
    return [...live.values()];
  }
}
