/**
 * The change log, as every backend provides it (docs/architecture.md, Storage): every store's
 * writes go through `commit`, which runs the write and appends its entries in one transaction
 * (never a change without its entry, nor the reverse), lets the participants derive their rows
 * from the entries in that same transaction, and once it has committed publishes the entries
 * (bus.ts), in commit order, then runs the effects the participants returned.
 *
 * `Tx` is the backend's transaction handle, opaque to everyone but that backend's stores: they
 * read and write through it inside `write` (and a participant's rows are bound to it), and
 * nothing outside the transaction sees its rows before the commit.
 */
import type { Constraint } from "../db/sqlite-errors";
import type { Author, ChangeDraft, ChangeEntry } from "./entry";

declare const TRANSACTION: unique symbol;
/** A transaction of some backend: only that backend's stores know what is inside. */
export type Tx = { readonly [TRANSACTION]: true };

/** What a write returns to `commit`: its result and the changes it made (none: nothing is appended). */
export interface Written<T> {
  result: T;
  changes: readonly ChangeDraft[];
}

/** What a participant leaves to do once the transaction has committed (wake a sender, say). */
export type Effect = () => void | Promise<void>;

/**
 * Runs inside the write's transaction with its entries (the webhook outbox, the change-event
 * queue, the schedules): writes its own rows through `tx`, and returns its after-commit effect,
 * if any. It keeps nothing between the transaction and the effect: the effect carries it.
 */
export type Participant = (tx: Tx, entries: readonly ChangeEntry[]) => Promise<Effect | undefined>;

export interface ChangeLog {
  participate(p: Participant): void;
  /**
   * Runs `write` in a transaction, appends the changes it returns, runs the participants, commits,
   * then publishes the entries and runs the participants' effects (the snapshot holds the change
   * before a webhook about it is sent). `write` throws to refuse: nothing is
   * stored, nothing appended. Never called from inside another commit's `write`.
   */
  commit<T>(author: Author, write: (tx: Tx) => Promise<Written<T>>): Promise<T>;
  /**
   * A create: `insert` and its entry in one commit, unless a unique constraint refuses the row
   * (a taken key, slug, email or name): then false, and nothing is stored.
   */
  create(author: Author, insert: (tx: Tx) => Promise<void>, change: ChangeDraft): Promise<boolean>;
}

/**
 * `create` of every backend, in terms of its `commit`: the insert and its entry, or false when
 * the backend's `constraintOf` says a unique constraint refused the row.
 */
export async function createThrough(
  log: Pick<ChangeLog, "commit">,
  constraintOf: (e: unknown) => Constraint | null,
  author: Author,
  insert: (tx: Tx) => Promise<void>,
  change: ChangeDraft,
): Promise<boolean> {
  try {
    return await log.commit(author, async (tx) => {
      await insert(tx);
      return { result: true, changes: [change] };
    });
  } catch (e) {
    if (constraintOf(e)?.kind === "unique") return false;
    throw e;
  }
}
