/**
 * The insights flusher (docs/insights.md): every SVC_INSIGHTS_FLUSH_SECONDS, and once more at a
 * graceful stop, it drains every evaluation counter of the snapshot (src/evaluation/counts.ts)
 * and writes what they counted since the last flush in one transaction, added to the current
 * hour's bucket, with each counter's last production evaluation. Evaluation itself never
 * writes: a kill -9 loses at most one interval. A failed write gives the increments back to
 * their counters (`undrain`): the next flush writes them.
 */
import type { Snapshot } from "../../evaluation/snapshot";
import type { FlagCounter } from "../../evaluation/counts";
import type { Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { HOUR_MS, type CounterBatch, type InsightsStore } from "./store";

export class InsightsFlusher {
  /** The last evaluation already written, per counter: written again only when it moved. */
  private readonly written = new WeakMap<FlagCounter, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  /** PostgreSQL: the last flush's write while it is under way (a close waits for it before closing the pool). */
  private writing: Promise<void> | undefined;

  constructor(
    private readonly deps: { snapshot: Pick<Snapshot, "labelledCounters">; store: Pick<InsightsStore, "writeNow">; clock: Clock; log: Logger },
  ) {}

  /** Flushes every `seconds` until `stop` (the timer does not keep the process alive). */
  start(seconds: number): void {
    this.stop();
    this.timer = setInterval(() => this.flushLogged(), seconds * 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One flush; how many counters had something to write. Throws when the write fails (the counts are kept for the next one). */
  flush(): number {
    const batch: (CounterBatch & { counter: FlagCounter })[] = [];
    for (const { counter } of this.deps.snapshot.labelledCounters()) {
      const cells = counter.drain();
      const lastAt = counter.lastAt > (this.written.get(counter) ?? 0) ? counter.lastAt : 0;
      if (cells.length === 0 && lastAt === 0) continue;
      batch.push({ counter, projectId: counter.projectId, environmentId: counter.environmentId, flagKey: counter.flagKey, cells, lastAt });
    }
    if (batch.length === 0) return 0;
    const now = this.deps.clock.now();
    const giveBack = () => {
      for (const b of batch) b.counter.undrain(b.cells);
    };
    const done = () => {
      for (const b of batch) if (b.lastAt > 0) this.written.set(b.counter, b.lastAt);
    };
    let writing: void | Promise<void>;
    try {
      writing = this.deps.store.writeNow(now - (now % HOUR_MS), batch);
    } catch (e) {
      giveBack();
      throw e;
    }
    // PostgreSQL's write is asynchronous: a failure gives the counts back and is logged.
    if (writing) {
      // Settled once the writes before it are too: `pending` covers every write under way.
      const before = this.writing;
      const settled: Promise<void> = writing.then(done, (e: unknown) => (giveBack(), this.logFailure(e))).then(() => before).finally(() => {
        if (this.writing === settled) this.writing = undefined;
      });
      this.writing = settled;
    } else done();
    return batch.length;
  }

  /** The writes under way, if any (only PostgreSQL's are asynchronous); it never rejects. */
  get pending(): Promise<void> | undefined {
    return this.writing;
  }

  /** A flush whose failure is logged, not thrown (the timer's, the stop's). */
  flushLogged(): void {
    try {
      this.flush();
    } catch (e) {
      this.logFailure(e);
    }
  }

  private logFailure(e: unknown): void {
    this.deps.log.error("insights: the evaluation counts could not be written; kept for the next flush", { error: e instanceof Error ? e.message : String(e) });
  }
}
