/**
 * The main thread's side of the integrations thread (worker.ts): starts it, passes on what the
 * feed hands over (one message each), writes its log lines, and starts it again if it dies
 * (evaluation batches posted meanwhile are lost; change events are rows, which the next one
 * reads from each integration's stored position).
 *
 * Flow control: at most MAX_BATCHES_IN_FLIGHT batches of evaluation records are posted and not
 * yet taken by the worker (it runs at SCHED_IDLE, so on a saturated core it may not run for a
 * while). Beyond that a batch is dropped here, without a copy, and its records are counted; the
 * counts go to the worker as soon as it takes a batch again, so that the integrations' `failed`
 * shows them.
 */
import type { Config } from "../../config";
import type { LogRecord, Logger } from "../../lib/log";
import { workerUrl } from "../../lib/worker-url";
import type { IntegrationSink } from "./sender";

const WORKER_URL = workerUrl(import.meta.url, "modules/integrations/worker.ts");
const RESTART_AFTER_MS = 1000;
const STOP_TIMEOUT_MS = 3000;
export const MAX_BATCHES_IN_FLIGHT = 16;

export type ToIntegrations =
  | { kind: "start"; file: string; config: Config }
  | { kind: "reload" }
  | { kind: "evaluations"; projectId: string; batch: string }
  /** `count` of the project's records were dropped here (flow control). */
  | { kind: "dropped"; projectId: string; count: number }
  | { kind: "events"; projectId: string }
  | { kind: "stop" };

export type FromIntegrations = { kind: "log"; record: LogRecord } | { kind: "took" } | { kind: "stopped" };

export class IntegrationThread implements IntegrationSink {
  private worker: Worker | undefined;
  private inFlight = 0;
  private readonly dropped = new Map<string, number>();
  private stopping: Promise<void> | undefined;
  private onStopped: (() => void) | undefined;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly deps: { file: string; config: Config; log: Logger }) {
    this.spawn();
  }

  reload(): void {
    this.post({ kind: "reload" });
  }

  evaluations(projectId: string, batch: string, count: number): void {
    if (!this.worker || this.stopping) return;
    if (this.inFlight >= MAX_BATCHES_IN_FLIGHT) {
      this.dropped.set(projectId, (this.dropped.get(projectId) ?? 0) + count);
      return;
    }
    this.inFlight++;
    this.post({ kind: "evaluations", projectId, batch });
  }

  eventsCommitted(projectId: string): void {
    this.post({ kind: "events", projectId });
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
        worker.postMessage({ kind: "stop" } satisfies ToIntegrations);
      });
      clearTimeout(timer);
      this.worker = undefined;
      worker.terminate();
    })());
  }

  private post(message: ToIntegrations): void {
    if (!this.stopping) this.worker?.postMessage(message);
  }

  private spawn(): void {
    const { config, file, log } = this.deps;
    const worker = new Worker(WORKER_URL, { smol: true });
    this.worker = worker;
    this.inFlight = 0;
    worker.onmessage = (event: MessageEvent<FromIntegrations>) => {
      const message = event.data;
      if (message.kind === "took") {
        this.inFlight = Math.max(0, this.inFlight - 1);
        for (const [projectId, count] of this.dropped) this.post({ kind: "dropped", projectId, count });
        this.dropped.clear();
      }
      else if (message.kind === "log") log[message.record.level](message.record.msg, message.record.fields);
      else this.onStopped?.();
    };
    worker.addEventListener("error", (event) => log.error("integrations thread failed", { error: (event as ErrorEvent).message }));
    worker.addEventListener("close", () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.stopping) return this.onStopped?.();
      log.error(`integrations thread ended unexpectedly; starting it again in ${RESTART_AFTER_MS / 1000} s`);
      this.restartTimer = setTimeout(() => this.spawn(), RESTART_AFTER_MS);
    });
    worker.postMessage({ kind: "start", file, config } satisfies ToIntegrations);
  }
}
