/**
 * The change log on PostgreSQL (log.ts), on Bun's `SQL` with drizzle `bun-sql`.
 *
 * PostgreSQL does not serialise writers as SQLite does, and the stores read, decide, then write
 * (the last admin, a taken slug, what a deletion takes with it). So every commit first takes a
 * transaction-level advisory lock (`pg_advisory_xact_lock`, released by its commit or rollback):
 * writers are serialised across every node, the reads inside a write see every earlier commit,
 * and `position` (an identity, taken in the transaction) is the order of commit everywhere, so a
 * reader of "everything after N" never misses a position that commits later. Readers are never
 * blocked. Within this process commits also queue (as on SQLite: in call order, and no pool
 * connection is held waiting for the lock), and the entries are published in that order.
 *
 * Each commit with entries also sends `NOTIFY flagsvc_changes, '<last position>'` in its
 * transaction (delivered on commit): how the other nodes hear of it.
 */
import { sql } from "drizzle-orm";
import type { PgStore, PgQueries } from "../db/pg/client";
import { changeLog } from "../db/pg/schema";
import { pgConstraintOf } from "../db/pg-errors";
import { iso, type Clock } from "../lib/clock";
import { sortableId } from "../lib/ids";
import type { ChangeBus } from "./bus";
import type { Author, ChangeDraft, ChangeEntry } from "./entry";
import { createThrough, type ChangeLog, type Effect, type Participant, type Tx, type Written } from "./log";

/** The channel every commit notifies, with its last position as the payload. */
export const CHANGES_CHANNEL = "flagsvc_changes";
/** Change-log rows per INSERT: 14 parameters each, well under PostgreSQL's 65,535 a statement. */
const ENTRIES_PER_INSERT = 1000;
/** The advisory lock every write transaction takes ("flagsvc" + 2; the migrations take + 1). */
const WRITE_LOCK = 0x666c6167737663_02n.toString();

/** The PostgreSQL transaction a handle stands for (drizzle's, inside `commit`). */
export const pgTx = (tx: Tx): PgQueries => tx as unknown as PgQueries;

export class PgChangeLog implements ChangeLog {
  private readonly participants: Participant[] = [];
  /** The write under way (or the last one): the next waits for it. */
  private tail: Promise<unknown> = Promise.resolve();
  /** The last publication: the next waits for it, so entries are published in position order. */
  private publication: Promise<unknown> = Promise.resolve();
  /**
   * The first position of each of this node's commits the change feed (pg-feed.ts) has not yet
   * passed: null until a feed asks for them. Filled inside the transaction, before its COMMIT
   * (so before its notification is delivered and before any node can read its rows): the feed
   * can never see one of this node's commits before knowing it is its own.
   */
  private own: Set<number> | null = null;
  /**
   * Set by a running change feed: resolves once every other node's commit before `first` is
   * published on this node's bus, so that this node's own commit is published after them.
   */
  private before: ((first: number) => Promise<void>) | null = null;

  constructor(
    readonly store: PgStore,
    private readonly bus: ChangeBus,
    private readonly clock: Clock,
  ) {}

  /** The pool, for reads outside a commit. */
  get db(): PgQueries {
    return this.store.db;
  }

  participate(p: Participant): void {
    this.participants.push(p);
  }

  commit<T>(author: Author, write: (tx: Tx) => Promise<Written<T>>): Promise<T> {
    const run = this.tail.then(() => this.transact(author, write));
    this.tail = run.catch(() => undefined);
    return run.then(async ({ result, entries, effects }) => {
      if (entries.length > 0) {
        const published = this.publication.then(async () => {
          await this.before?.(entries[0]!.position);
          return this.bus.publish(entries);
        });
        this.publication = published.catch(() => undefined);
        await published;
      }
      for (const effect of effects) await effect();
      return result;
    });
  }

  /**
   * This node's commits, as the change feed needs them: which it must not publish again, and
   * forgetting those it has passed. `before` is how the feed keeps this node's bus in position
   * order: each own commit is published once the feed has published the commits before it
   * (null: the feed stopped).
   */
  ownCommits(): { has(first: number): boolean; passed(position: number): void; order(before: ((first: number) => Promise<void>) | null): void } {
    const own = (this.own ??= new Set());
    return {
      order: (before) => (this.before = before),
      has: (first) => own.has(first),
      passed: (position) => {
        for (const p of own) if (p <= position) own.delete(p);
      },
    };
  }

  create(author: Author, insert: (tx: Tx) => Promise<void>, change: ChangeDraft): Promise<boolean> {
    return createThrough(this, pgConstraintOf, author, insert, change);
  }

  /** One transaction under the write lock: the write, its entries, the participants, the notification. */
  private async transact<T>(author: Author, write: (tx: Tx) => Promise<Written<T>>): Promise<{ result: T; entries: ChangeEntry[]; effects: Effect[] }> {
    let first: number | undefined;
    try {
      return await this.store.db.transaction(async (db) => {
        await db.execute(sql`SELECT pg_advisory_xact_lock(${WRITE_LOCK}::bigint)`);
        const tx = db as unknown as Tx;
        const { result, changes } = await write(tx);
        const entries = await this.append(db, author, changes);
        first = entries[0]?.position;
        if (first !== undefined) this.own?.add(first);
        const effects: Effect[] = [];
        if (entries.length > 0) {
          for (const p of this.participants) {
            const effect = await p(tx, entries);
            if (effect) effects.push(effect);
          }
          await db.execute(sql`SELECT pg_notify(${CHANGES_CHANNEL}, ${String(entries.at(-1)!.position)})`);
        }
        return { result, entries, effects };
      });
    } catch (e) {
      // Rolled back: its positions are never committed (an identity does not hand them out again).
      if (first !== undefined) this.own?.delete(first);
      throw e;
    }
  }

  private async append(db: PgQueries, author: Author, changes: readonly ChangeDraft[]): Promise<ChangeEntry[]> {
    if (changes.length === 0) return [];
    const ms = this.clock.now();
    const at = iso(ms);
    const { actor, requestId } = author;
    const drafts = changes.map((c) => ({ id: sortableId("aud", ms), c }));
    const positions: number[] = [];
    // PostgreSQL takes at most 65,535 parameters a statement (14 a row): a large write (an import)
    // is inserted in chunks, in order, within the one transaction.
    for (let from = 0; from < drafts.length; from += ENTRIES_PER_INSERT) {
      const rows = await db
        .insert(changeLog)
        .values(
          drafts.slice(from, from + ENTRIES_PER_INSERT).map(({ id, c }) => ({
            id,
            at,
            actorType: actor.type,
            actorId: actor.id,
            actorLabel: actor.label,
            requestId,
            projectId: c.project?.id ?? null,
            projectSlug: c.project?.slug ?? null,
            environment: c.environment,
            resourceType: c.resource.type,
            resourceId: c.resource.id,
            resourceKey: c.resource.key,
            action: c.action,
            changes: c.changes,
          })),
        )
        .returning({ position: changeLog.position });
      // The identity numbers the rows in the order of VALUES.
      positions.push(...rows.map((r) => r.position).sort((a, b) => a - b));
    }
    return drafts.map(({ id, c }, i) => ({ position: positions[i]!, id, at, actor, requestId, ...c }));
  }
}
