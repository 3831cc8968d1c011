/**
 * Nodes that agree (docs/scaling.md): the commits of the other nodes on one PostgreSQL, published
 * on this node's bus (bus.ts) as if they were its own, so that its evaluation snapshot,
 * credentials, test sessions and streams follow every write within about a second.
 *
 * - Every commit sends `NOTIFY flagsvc_changes, '<its last position>'` (pg.ts). The feed LISTENs
 *   on a dedicated connection (Bun's `sql.listen`); a notification above the last position seen
 *   makes it read the log after that position.
 * - Notifications are lost while that connection is down (Bun reconnects it and LISTENs again),
 *   and may be lost otherwise: once a second the feed compares the log's last position with the
 *   last it has seen (the revision check), and it reads on at once after every reconnect.
 * - It publishes one commit at a time, in position order, each commit's entries together (told
 *   by their transaction: PgAuditStore.commitsAfter), and skips this node's own commits, which
 *   the change log published itself when they committed (read-your-writes): the change log
 *   knows them before their COMMIT, so the feed can never take one for another node's.
 * - Reads are one at a time; a notification that comes during one makes another follow it.
 *
 * - The bus hears every commit in position order, this node's own included: once the feed has
 *   started, the change log publishes an own commit only after the feed has published every
 *   other node's commit before it (`through`). Otherwise a late publication of an older commit
 *   could undo a newer one (another node deletes flag `x`, this node creates `x` again: the
 *   deletion published after the creation would remove the new flag from the snapshot).
 */
import type { SQL } from "bun";
import type { Logger } from "../lib/log";
import type { PgAuditStore } from "../modules/audit/pg-store";
import type { ChangeBus } from "./bus";
import { CHANGES_CHANNEL, type PgChangeLog } from "./pg";
import { listenChecked } from "./pg-listen";

/** How often the feed compares the log's last position with its own (ms). */
export const REVISION_CHECK_MS = 1000;
/** Rows read at a time when catching up. */
const BATCH = 500;

export interface PgChangeFeedDeps {
  sql: SQL;
  audit: PgAuditStore;
  changeLog: PgChangeLog;
  bus: ChangeBus;
  log?: Logger;
  checkEveryMs?: number;
}

export class PgChangeFeed {
  private last = 0;
  private readonly own: ReturnType<PgChangeLog["ownCommits"]>;
  private listener: Awaited<ReturnType<typeof listenChecked>> | null = null;
  /** The read under way, and whether another must follow it. */
  private reading: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(private readonly deps: PgChangeFeedDeps) {
    this.own = deps.changeLog.ownCommits();
  }

  /** The last position this node has published or passed. */
  get position(): number {
    return this.last;
  }

  /**
   * Listens from `from` on: the log's position read before the state the subscribers hold was
   * loaded (a commit in between is then published once more, which they take as a no-op,
   * rather than lost).
   */
  async start(from: number): Promise<void> {
    this.last = from;
    this.stopped = false;
    this.listener = await listenChecked(this.deps.sql, CHANGES_CHANNEL, {
      heard: (payload) => {
        if (Number(payload) > this.last) this.read();
      },
      // After a reconnect: what was sent meanwhile is lost, read on from the last seen.
      resync: () => this.read(),
      check: () => void this.check(),
      everyMs: this.deps.checkEveryMs ?? REVISION_CHECK_MS,
    });
    this.own.order((first) => this.through(first));
    // Anything committed between `from` and the LISTEN.
    this.read();
  }

  /** Stops listening and checking; resolves once a read under way is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.own.order(null);
    const listener = this.listener;
    this.listener = null;
    await listener?.stop();
    await this.reading;
  }

  /**
   * Resolves once every commit before `first` (this node's own commit, committed: so are all
   * before it) is published or passed. Without waiting when the feed is already there; else
   * one read, which runs until the log has nothing more (a failed read is logged, and the own
   * commit is published anyway).
   */
  private async through(first: number): Promise<void> {
    if (this.last >= first - 1 || this.stopped) return;
    this.read();
    await this.reading;
  }

  /** The revision check: reads on when the log has gone past the last position seen. */
  private async check(): Promise<void> {
    if (this.reading) return;
    try {
      if ((await this.deps.audit.position()) > this.last) this.read();
    } catch (e) {
      this.failed(e);
    }
  }

  /** Reads and publishes everything after the last position seen (then again, if asked meanwhile). */
  private read(): void {
    if (this.stopped) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        await this.drain();
      } while (this.again && !this.stopped);
    })()
      .catch((e) => this.failed(e))
      .finally(() => {
        this.reading = null;
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      const commits = await this.deps.audit.commitsAfter(this.last, BATCH);
      if (commits.length === 0) return;
      for (const entries of commits) {
        if (this.stopped) return;
        const last = entries.at(-1)!.position;
        if (!this.own.has(entries[0]!.position)) await this.deps.bus.publish(entries);
        this.last = last;
        this.own.passed(last);
      }
    }
  }

  private failed(e: unknown): void {
    // The next notification or revision check reads on from the last position published.
    this.deps.log?.warn("change feed: reading the change log failed", { error: e instanceof Error ? e.message : String(e) });
  }
}
