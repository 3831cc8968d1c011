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
import { workerUrl } from "../lib/worker-url";
import type { Database } from "bun:sqlite";
import type { Config } from "../config";
import type { Logger } from "../lib/log";
import type { Deliveries } from "../modules/webhooks/dispatcher";
import type { FromWorker, ToWorker } from "./protocol";

const WORKER_URL = workerUrl(import.meta.url, "background/worker.ts");
const RESTART_AFTER_MS = 1000;
const STOP_TIMEOUT_MS = 3000;
/** A write waits this long at most for the worker to take its kick (it never should). */
const KICK_WAIT_MS = 2000;
/** SQLite's default: a checkpoint once the WAL holds this many pages. */
const AUTO_CHECKPOINT_PAGES = 1000;

export interface BackgroundDeps {
  sqlite: Database;
  /** The database file the main connection has open (migrated). */
  file: string;
  config: Config;
  log: Logger;
}

export class BackgroundThread implements Deliveries {
  private worker: Worker | undefined;
  /** Requests (kicks that wait, drains) by id, until the worker answers or ends. */
  private readonly waiting = new Map<number, () => void>();
  private nextRequest = 0;
  private stopping: Promise<void> | undefined;
  private onStopped: (() => void) | undefined;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly deps: BackgroundDeps) {
    this.spawn();
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
    if (webhookIds === undefined) return this.post({ kind: "kick" });
    if (webhookIds.length === 0 || !this.worker || this.stopping) return;
    return this.request((id) => ({ kind: "kick", webhookIds, id }), KICK_WAIT_MS);
  }

  drain(): Promise<void> {
    return this.request((id) => ({ kind: "drain", id }));
  }

  prune(): void {
    this.post({ kind: "prune" });
  }

  /** The audit log's retention clean-up, here off the request thread (modules/audit/retention.ts). */
  pruneAuditLog(): void {
    this.post({ kind: "prune-audit-log" });
  }

  /** Asks the worker to store what it knows and close its connection, then ends it (3 s at most). */
  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      clearTimeout(this.restartTimer);
      const worker = this.worker;
      if (!worker) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.onStopped = resolve;
        timer = setTimeout(resolve, STOP_TIMEOUT_MS);
        worker.postMessage({ kind: "stop" } satisfies ToWorker);
      });
      clearTimeout(timer);
      this.worker = undefined;
      worker.terminate();
      this.release();
    })());
  }

  /**
   * Posts a message that the worker answers with the same id (kicked, drained), waiting
   * `timeoutMs` at most; at once when there is no worker to answer.
   */
  private request(message: (id: number) => ToWorker, timeoutMs?: number): Promise<void> {
    if (!this.worker || this.stopping) return Promise.resolve();
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
      this.post(message(id));
    });
  }

  private post(message: ToWorker): void {
    // While a dead worker waits to be started again, kicks are dropped: the new one starts
    // with a pass over everything due.
    if (!this.stopping) this.worker?.postMessage(message);
  }

  private spawn(): void {
    const { config, file, log } = this.deps;
    // smol: a small heap is enough for sending webhooks, and it keeps the process lean.
    const worker = new Worker(WORKER_URL, { smol: true });
    this.worker = worker;
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.receive(event.data);
    worker.addEventListener("error", (event) => {
      log.error("background thread failed", { error: (event as ErrorEvent).message });
    });
    worker.addEventListener("close", () => this.ended(worker));
    worker.postMessage({ kind: "start", file, config } satisfies ToWorker);
    worker.postMessage({ kind: "kick" } satisfies ToWorker);
  }

  private receive(message: FromWorker): void {
    switch (message.kind) {
      case "ready":
        this.autoCheckpoint(0);
        return;
      case "log": {
        const { level, msg, fields } = message.record;
        this.deps.log[level](msg, fields);
        return;
      }
      case "kicked":
      case "drained":
        this.waiting.get(message.id)?.();
        return;
      case "stopped":
        this.onStopped?.();
        return;
    }
  }

  /** The worker ended: expected when stopping; otherwise checkpoints come back here and it is started again. */
  private ended(worker: Worker): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.release();
    if (this.stopping) {
      this.onStopped?.();
      return;
    }
    this.autoCheckpoint(AUTO_CHECKPOINT_PAGES);
    this.deps.log.error(`background thread ended unexpectedly; starting it again in ${RESTART_AFTER_MS / 1000} s`);
    this.restartTimer = setTimeout(() => this.spawn(), RESTART_AFTER_MS);
  }

  /** Nothing waits on a worker that is gone. */
  private release(): void {
    for (const done of [...this.waiting.values()]) done();
  }

  private autoCheckpoint(pages: number): void {
    try {
      this.deps.sqlite.run(`PRAGMA wal_autocheckpoint = ${pages}`);
    } catch {
      // The connection is closed: the process is stopping.
    }
  }
}
