/**
 * A worker thread the main thread keeps running (the background thread, the integrations
 * thread): started with its first messages, its log lines written to the main logger, started
 * again RESTART_AFTER_MS after it ends unexpectedly, and stopped by a `stop` message that it
 * answers with `stopped` once its work is stored (STOP_TIMEOUT_MS at most, then terminated).
 * A message posted while it is down or stopping is dropped: what such a thread works on lives
 * in the database, and the next one starts from there.
 */
import type { LogRecord, Logger } from "./log";

const RESTART_AFTER_MS = 1000;
const STOP_TIMEOUT_MS = 3000;

/** What every such worker sends besides its own messages. */
export type WorkerReport = { kind: "log"; record: LogRecord } | { kind: "stopped" };

export interface SupervisedWorkerOptions<To, From> {
  url: string;
  /** For log lines: "background thread". */
  name: string;
  log: Logger;
  /** The first messages of each start (the first and every restart). */
  start: () => To[];
  /** Every message of the worker but its log lines and `stopped`. */
  receive: (message: From) => void;
  /** After the worker ended, whether expected (stopping) or not, before any restart. */
  ended?: (expected: boolean) => void;
}

export class SupervisedWorker<To extends { kind: string }, From extends { kind: string }> {
  private worker: Worker | undefined;
  private stopping: Promise<void> | undefined;
  private onStopped: (() => void) | undefined;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly opts: SupervisedWorkerOptions<To, From>) {
    this.spawn();
  }

  /** Up and not stopping: a message posted now reaches it. */
  get running(): boolean {
    return this.worker !== undefined && this.stopping === undefined;
  }

  post(message: To): void {
    if (this.running) this.worker!.postMessage(message);
  }

  /** Asks the worker to store what it knows and close its connection, then ends it. */
  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      clearTimeout(this.restartTimer);
      const worker = this.worker;
      if (!worker) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.onStopped = resolve;
        timer = setTimeout(resolve, STOP_TIMEOUT_MS);
        worker.postMessage({ kind: "stop" });
      });
      clearTimeout(timer);
      this.worker = undefined;
      worker.terminate();
      this.opts.ended?.(true);
    })());
  }

  private spawn(): void {
    const { url, name, log, start, receive } = this.opts;
    // smol: a small heap is enough for these threads, and it keeps the process lean.
    const worker = new Worker(url, { smol: true });
    this.worker = worker;
    worker.onmessage = (event: MessageEvent<From | WorkerReport>) => {
      const message = event.data;
      if (message.kind === "log") {
        const { level, msg, fields } = (message as WorkerReport & { kind: "log" }).record;
        log[level](msg, fields);
      } else if (message.kind === "stopped") this.onStopped?.();
      else receive(message as From);
    };
    worker.addEventListener("error", (event) => log.error(`${name} failed`, { error: (event as ErrorEvent).message }));
    worker.addEventListener("close", () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.stopping) {
        this.onStopped?.();
        return;
      }
      this.opts.ended?.(false);
      log.error(`${name} ended unexpectedly; starting it again in ${RESTART_AFTER_MS / 1000} s`);
      this.restartTimer = setTimeout(() => this.spawn(), RESTART_AFTER_MS);
    });
    for (const message of start()) worker.postMessage(message);
  }
}
