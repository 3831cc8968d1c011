/**
 * The change log on SQLite: every store's writes go through `commit`, which runs the write and
 * appends its entries in one transaction (never a change without its entry, nor the reverse),
 * lets the in-transaction participants (the webhook outbox) derive their rows from the entries
 * in that same transaction, and publishes the entries once committed (bus.ts).
 *
 * SQLite serialises writers (`BEGIN IMMEDIATE`), so the order of `position` is the order of
 * commit, and publishing right after the commit, in the same synchronous turn, keeps that order.
 */
import type { Database } from "bun:sqlite";
import { isUniqueViolation, transaction, type Store } from "../db/client";
import { iso, type Clock } from "../lib/clock";
import { sortableId } from "../lib/ids";
import type { ChangeBus } from "./bus";
import type { Author, ChangeDraft, ChangeEntry } from "./entry";

/** What a write returns to `commit`: its result and the changes it made (none: nothing is appended). */
export interface Written<T> {
  result: T;
  changes: readonly ChangeDraft[];
}

/** Runs inside the write's transaction with its entries (the outbox: events and deliveries). */
export type Participant = (entries: readonly ChangeEntry[]) => void;

const INSERT_SQL = `INSERT INTO change_log
  (id, at, actor_type, actor_id, actor_label, request_id, project_id, project_slug, environment, resource_type, resource_id, resource_key, action, changes)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)`;

export class SqliteChangeLog {
  private readonly participants: Participant[] = [];

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

  /**
   * Runs `write` in a transaction, appends the changes it returns, then publishes them. `write`
   * throws to refuse (nothing is stored, nothing appended). Not inside another transaction:
   * its entries would be published before that one commits.
   */
  async commit<T>(author: Author, write: () => Written<T>): Promise<T> {
    if (this.store.sqlite.inTransaction) throw new Error("change log: commit() inside a transaction");
    const { result, entries } = transaction(this.store, () => {
      const { result, changes } = write();
      const entries = this.append(author, changes);
      if (entries.length > 0) for (const p of this.participants) p(entries);
      return { result, entries };
    });
    if (entries.length > 0) await this.bus.publish(entries);
    return result;
  }

  /**
   * A create: `insert` and its entry in one commit, unless a unique constraint refuses the row
   * (a taken key, slug, email or name): then false, and nothing is stored.
   */
  async create(author: Author, insert: () => void, change: ChangeDraft): Promise<boolean> {
    try {
      return await this.commit(author, () => {
        insert();
        return { result: true, changes: [change] };
      });
    } catch (e) {
      if (isUniqueViolation(e)) return false;
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
