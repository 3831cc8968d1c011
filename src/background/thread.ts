/**
 * The main thread's side of the background thread (worker.ts): starts it, hands it the
 * webhook kicks, writes its log lines, and starts it again if it dies. Implements the
 * `Deliveries` the services call, so a write's `ctx.deliveries.kick()` costs one message.
 *
 * While the worker runs, the main connection's automatic WAL checkpoints are off (the worker
 * checkpoints every second); while it is down, they are on again, so the WAL never grows
 * without bound. Deliveries are rows in the database: a worker that dies loses none, and the
 * one started after it picks up what is due.
 */
import { SupervisedWorker } from "../lib/supervised-worker";
import { workerUrl } from "../lib/worker-url";
import type { Config } from "../config";
import type { SqliteMaintenance } from "../db/sqlite-maintenance";
import type { Logger } from "../lib/log";
import type { Deliveries } from "../modules/webhooks/dispatcher";
import { DELIVERY_OUTCOMES, Tally, type DeliveryOutcome } from "../modules/metrics/counts";
import type { FromWorker, ToWorker } from "./protocol";

const WORKER_URL = workerUrl(import.meta.url, "background/worker.ts");
/** A write waits this long at most for the worker to take its kick (it never should). */
const KICK_WAIT_MS = 2000;
/** SQLite's default: a checkpoint once the WAL holds this many pages. */
const AUTO_CHECKPOINT_PAGES = 1000;

export interface BackgroundDeps {
  /** The main connection's checkpoints (off while the worker runs). */
  maintenance: Pick<SqliteMaintenance, "autoCheckpoint">;
  /** The database file the main connection has open (migrated). */
  file: string;
  config: Config;
  log: Logger;
}

export class BackgroundThread implements Deliveries {
  private readonly thread: SupervisedWorker<ToWorker, FromWorker>;
  /** Requests (kicks that wait, drains) by id, until the worker answers or ends. */
  private readonly waiting = new Map<number, () => void>();
  private nextRequest = 0;
  /** Webhook outcomes of the workers that ended, and the latest report of the running one. */
  private readonly ended = new Tally(DELIVERY_OUTCOMES);
  private current: Record<DeliveryOutcome, number> | null = null;

  constructor(private readonly deps: BackgroundDeps) {
    const { config, file, log } = deps;
    this.thread = new SupervisedWorker<ToWorker, FromWorker>({
      url: WORKER_URL,
      name: "background thread",
      log,
      // A new worker starts with a pass over everything due.
      start: () => {
        // A new worker counts from zero: what the last one reported is kept.
        if (this.current) this.ended.addAll(this.current);
        this.current = null;
        return [{ kind: "start", file, config }, { kind: "kick" }];
      },
      receive: (message) => {
        if (message.kind === "ready") this.autoCheckpoint(0);
        else if (message.kind === "outcomes") this.current = message.counts;
        else if (message.kind === "kicked" || message.kind === "drained") this.waiting.get(message.id)?.();
      },
      ended: (expected) => {
        // Nothing waits on a worker that is gone; while none runs, checkpoints come back here.
        for (const done of [...this.waiting.values()]) done();
        if (!expected) this.autoCheckpoint(AUTO_CHECKPOINT_PAGES);
      },
    });
  }

  /**
   * Flow control: a kick for a write's deliveries resolves when the worker has taken it (a
   * message there and back, well under a millisecond), so a writer that keeps writing waits
   * for the sender whenever the sender lags (a burst of changes on a busy machine) instead of
   * piling up deliveries whose first attempt comes ever later. A slow receiver does not slow
   * writes: the worker takes kicks whatever its attempts are doing. Without a worker (between
   * a crash and its restart) nothing waits: the rows are there for the next one.
   */
  kick(webhookIds?: readonly string[]): void | Promise<void> {
    if (webhookIds === undefined) return this.thread.post({ kind: "kick" });
    if (webhookIds.length === 0 || !this.thread.running) return;
    return this.request((id) => ({ kind: "kick", webhookIds, id }), KICK_WAIT_MS);
  }

  drain(): Promise<void> {
    return this.request((id) => ({ kind: "drain", id }));
  }

  storedOutcomes(): Readonly<Record<DeliveryOutcome, number>> {
    if (this.current === null) return this.ended.counts;
    const sum = new Tally(DELIVERY_OUTCOMES);
    sum.addAll(this.ended.counts);
    sum.addAll(this.current);
    return sum.counts;
  }

  prune(): void {
    this.thread.post({ kind: "prune" });
  }

  /** The audit log's retention clean-up, here off the request thread (modules/audit/retention.ts). */
  pruneAuditLog(): void {
    this.thread.post({ kind: "prune-audit-log" });
  }

  /** The thread is up (the health detail). */
  get running(): boolean {
    return this.thread.running;
  }

  /** Asks the worker to store what it knows and close its connection, then ends it (3 s at most). */
  stop(): Promise<void> {
    return this.thread.stop();
  }

  /**
   * Posts a message that the worker answers with the same id (kicked, drained), waiting
   * `timeoutMs` at most; at once when there is no worker to answer.
   */
  private request(message: (id: number) => ToWorker, timeoutMs?: number): Promise<void> {
    if (!this.thread.running) return Promise.resolve();
    const id = this.nextRequest++;
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve();
      };
      if (timeoutMs !== undefined) timer = setTimeout(done, timeoutMs);
      this.waiting.set(id, done);
      this.thread.post(message(id));
    });
  }

  private autoCheckpoint(pages: number): void {
    try {
      this.deps.maintenance.autoCheckpoint(pages);
    } catch {
      // The connection is closed: the process is stopping.
    }
  }
}
