/**
 * The main thread's side of the integrations thread (worker.ts, kept running by
 * lib/supervised-worker.ts): passes on what the feed hands over, one message each (evaluation
 * batches posted while it is down are lost; change events are rows, which the next one reads
 * from each integration's stored position).
 *
 * Flow control: at most MAX_BATCHES_IN_FLIGHT batches of evaluation records are posted and not
 * yet taken by the worker (it runs at SCHED_IDLE, so on a saturated core it may not run for a
 * while). Beyond that a batch is dropped here, without a copy, and its records are counted; the
 * counts go to the worker as soon as it takes a batch again, so that the integrations' `failed`
 * shows them.
 */
import type { Config } from "../../config";
import type { Logger } from "../../lib/log";
import { SupervisedWorker, type WorkerReport } from "../../lib/supervised-worker";
import { workerUrl } from "../../lib/worker-url";
import type { IntegrationSink } from "./sender";

const WORKER_URL = workerUrl(import.meta.url, "modules/integrations/worker.ts");
export const MAX_BATCHES_IN_FLIGHT = 16;

export type ToIntegrations =
  /** `node`: this process's node id, the holder of the leases the thread takes (integrations' change events). */
  | { kind: "start"; file: string; config: Config; node: string }
  | { kind: "reload" }
  | { kind: "evaluations"; projectId: string; batch: string }
  /** `count` of the project's records were dropped here (flow control). */
  | { kind: "dropped"; projectId: string; count: number }
  | { kind: "events"; projectId: string }
  | { kind: "stop" };

export type FromIntegrations = WorkerReport | { kind: "took" };

export class IntegrationThread implements IntegrationSink {
  private readonly thread: SupervisedWorker<ToIntegrations, FromIntegrations>;
  private inFlight = 0;
  private readonly dropped = new Map<string, number>();

  constructor(deps: { file: string; config: Config; log: Logger; node: string }) {
    const { file, config, log, node } = deps;
    this.thread = new SupervisedWorker<ToIntegrations, FromIntegrations>({
      url: WORKER_URL,
      name: "integrations thread",
      log,
      start: () => {
        this.inFlight = 0;
        return [{ kind: "start", file, config, node }];
      },
      receive: () => {
        // "took": a batch handed to the sender; what was dropped meanwhile is counted there now.
        this.inFlight = Math.max(0, this.inFlight - 1);
        for (const [projectId, count] of this.dropped) this.thread.post({ kind: "dropped", projectId, count });
        this.dropped.clear();
      },
    });
  }

  /** The thread is up (the health detail). */
  get running(): boolean {
    return this.thread.running;
  }

  reload(): void {
    this.thread.post({ kind: "reload" });
  }

  accepts(): boolean {
    return this.thread.running && this.inFlight < MAX_BATCHES_IN_FLIGHT;
  }

  evaluations(projectId: string, batch: string, count: number): void {
    if (!this.accepts()) return this.missed(projectId, count);
    this.inFlight++;
    this.thread.post({ kind: "evaluations", projectId, batch });
  }

  /** A batch dropped (flow control), unbuilt or here: counted, and the count sent when the thread takes a batch again. */
  missed(projectId: string, count: number): void {
    if (this.thread.running) this.dropped.set(projectId, (this.dropped.get(projectId) ?? 0) + count);
  }

  eventsCommitted(projectId: string): void {
    this.thread.post({ kind: "events", projectId });
  }

  /** Asks the worker to store what it counted and close its connection, then ends it (3 s at most). */
  stop(): Promise<void> {
    return this.thread.stop();
  }
}
