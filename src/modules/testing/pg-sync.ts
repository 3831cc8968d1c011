/**
 * Test sessions on several nodes (docs/scaling.md): the other nodes' test-session writes, applied
 * to this node's live sessions (live.ts) within about a second. Test data makes no change-log
 * entry (docs/decisions.md, Testing API), so it has a channel of its own:
 *
 * - Every write moves the revision counter in its transaction and notifies
 *   `flagsvc_test_sessions` with `<revision> <session id>` (pg-store.ts). The sync LISTENs and
 *   reloads that one session (or removes it when it is gone), one notification at a time, in
 *   revision order; this node's own writes are skipped (applied already: read-your-writes).
 * - A revision beyond the next one means notifications were lost: it reloads every live
 *   session. So it does after a reconnect of the listening connection, and when the revision
 *   check (once a second, like the change feed's) finds the counter past the last revision seen.
 */
import type { SQL } from "bun";
import { listenChecked } from "../../changes/pg-listen";
import type { Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import type { LiveSessions } from "./live";
import { TEST_SESSIONS_CHANNEL, type PgTestSessionStore } from "./pg-store";

/** How often the sync compares the revision counter with its own (ms). */
const REVISION_CHECK_MS = 1000;

export interface PgSessionSyncDeps {
  sql: SQL;
  store: PgTestSessionStore;
  clock: Clock;
  log?: Logger;
  checkEveryMs?: number;
}

export class PgSessionSync {
  private seen = 0;
  private live: LiveSessions | undefined;
  private listener: Awaited<ReturnType<typeof listenChecked>> | null = null;
  /** Every step (a notification, a check, a reload) runs after the previous one. */
  private queue: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly deps: PgSessionSyncDeps) {}

  /** The last revision applied or passed. */
  get revision(): number {
    return this.seen;
  }

  /** Follows the other nodes' writes into `live` from now on (reloading it whole once, so that nothing committed before is missed). */
  async start(live: LiveSessions): Promise<void> {
    this.live = live;
    this.stopped = false;
    this.listener = await listenChecked(this.deps.sql, TEST_SESSIONS_CHANNEL, {
      heard: (payload) => this.then(() => this.heard(payload)),
      // After a reconnect: what was sent meanwhile is lost.
      resync: () => this.then(() => this.reloadAll()),
      check: () => this.then(() => this.check()),
      everyMs: this.deps.checkEveryMs ?? REVISION_CHECK_MS,
    });
    this.then(() => this.reloadAll());
    await this.queue;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const listener = this.listener;
    this.listener = null;
    await listener?.stop();
    await this.queue;
  }

  private then(step: () => Promise<void>): void {
    this.queue = this.queue.then(async () => {
      if (this.stopped) return;
      try {
        await step();
      } catch (e) {
        // The revision check reloads what a failed step missed.
        this.deps.log?.warn("test sessions: applying another node's write failed", { error: e instanceof Error ? e.message : String(e) });
      }
    });
  }

  private async heard(payload: string): Promise<void> {
    const space = payload.indexOf(" ");
    const revision = Number(payload.slice(0, space));
    if (revision <= this.seen) return;
    if (revision > this.seen + 1) return this.reloadAll();
    this.seen = revision;
    if (this.deps.store.own.delete(revision)) return;
    const id = payload.slice(space + 1);
    const stored = await this.deps.store.session(id);
    if (stored === undefined) this.live!.remove(id);
    else this.live!.put(stored);
  }

  private async check(): Promise<void> {
    if ((await this.deps.store.revision()) > this.seen) await this.reloadAll();
  }

  private async reloadAll(): Promise<void> {
    const revision = await this.deps.store.revision();
    this.live!.replaceAll(await this.deps.store.live(this.deps.clock.now()));
    this.seen = Math.max(this.seen, revision);
    for (const own of this.deps.store.own) if (own <= revision) this.deps.store.own.delete(own);
  }
}
