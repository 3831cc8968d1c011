/**
 * The change log on SQLite (log.ts). Writers are serialised twice: in this process by a queue
 * (one write transaction at a time on the connection, whatever its callback awaits), and
 * between processes by `BEGIN IMMEDIATE` (the CLI and the background thread write the same
 * file). So the order of `position` is the order of commit, and publishing in the queue's
 * order keeps it.
 */
import type { Database } from "bun:sqlite";
import type { Store } from "../db/client";
import { constraintOf } from "../db/sqlite-errors";
import { iso, type Clock } from "../lib/clock";
import { sortableId } from "../lib/ids";
import type { ChangeBus } from "./bus";
import type { Author, ChangeDraft, ChangeEntry } from "./entry";
import { createThrough, type ChangeLog, type Effect, type Participant, type Tx, type Written } from "./log";

export type { Participant, Written } from "./log";

const INSERT_SQL = `INSERT INTO change_log
  (id, at, actor_type, actor_id, actor_label, request_id, project_id, project_slug, environment, resource_type, resource_id, resource_key, action, changes)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)`;

/** The SQLite store a transaction handle stands for (on SQLite, the connection itself, inside its transaction). */
export const sqliteTx = (tx: Tx): Store => tx as unknown as Store;

export class SqliteChangeLog implements ChangeLog {
  private readonly participants: Participant[] = [];
  /** The write under way (or the last one): the next waits for it. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    readonly store: Store,
    private readonly bus: ChangeBus,
    private readonly clock: Clock,
  ) {}

  get sqlite(): Database {
    return this.store.sqlite;
  }

  participate(p: Participant): void {
    this.participants.push(p);
  }

  commit<T>(author: Author, write: (tx: Tx) => Promise<Written<T>>): Promise<T> {
    const run = this.tail.then(() => this.transact(author, write));
    this.tail = run.catch(() => undefined);
    return run.then(async ({ result, entries, effects }) => {
      if (entries.length > 0) await this.bus.publish(entries);
      for (const effect of effects) await effect();
      return result;
    });
  }

  create(author: Author, insert: (tx: Tx) => Promise<void>, change: ChangeDraft): Promise<boolean> {
    return createThrough(this, constraintOf, author, insert, change);
  }

  /** One transaction: the write, its entries, the participants; committed, or rolled back on any throw. */
  private async transact<T>(author: Author, write: (tx: Tx) => Promise<Written<T>>): Promise<{ result: T; entries: ChangeEntry[]; effects: Effect[] }> {
    const { sqlite } = this.store;
    if (sqlite.inTransaction) throw new Error("change log: commit() inside a transaction");
    sqlite.run("BEGIN IMMEDIATE");
    try {
      const tx = this.store as unknown as Tx;
      const { result, changes } = await write(tx);
      const entries = this.append(author, changes);
      const effects: Effect[] = [];
      if (entries.length > 0) {
        for (const p of this.participants) {
          const effect = await p(tx, entries);
          if (effect) effects.push(effect);
        }
      }
      sqlite.run("COMMIT");
      return { result, entries, effects };
    } catch (e) {
      if (sqlite.inTransaction) sqlite.run("ROLLBACK");
      throw e;
    }
  }

  private append(author: Author, changes: readonly ChangeDraft[]): ChangeEntry[] {
    if (changes.length === 0) return [];
    const ms = this.clock.now();
    const at = iso(ms);
    const insert = this.store.sqlite.query(INSERT_SQL);
    const { actor, requestId } = author;
    return changes.map((c) => {
      const id = sortableId("aud", ms);
      const { lastInsertRowid } = insert.run(
        id,
        at,
        actor.type,
        actor.id,
        actor.label,
        requestId,
        c.project?.id ?? null,
        c.project?.slug ?? null,
        c.environment,
        c.resource.type,
        c.resource.id,
        c.resource.key,
        c.action,
        JSON.stringify(c.changes),
      );
      return { position: Number(lastInsertRowid), id, at, actor, requestId, ...c };
    });
  }
}
