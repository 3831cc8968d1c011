/** Messages between the main thread (thread.ts) and the background thread (worker.ts). */
import type { Config } from "../config";
import type { LogRecord } from "../lib/log";
import type { DeliveryOutcome } from "../modules/metrics/counts";

export type ToWorker =
  /** First message: the database file (migrated already) and the configuration. */
  | { kind: "start"; file: string; config: Config }
  /** `id`: answer with `kicked` once taken. */
  | { kind: "kick"; webhookIds?: readonly string[]; id?: number }
  | { kind: "drain"; id: number }
  | { kind: "prune" }
  /** The audit log's daily retention clean-up (SVC_AUDIT_RETENTION_DAYS). */
  | { kind: "prune-audit-log" }
  | { kind: "stop" };

export type FromWorker =
  /** The worker's connection is open: the main connection leaves checkpoints to it. */
  | { kind: "ready" }
  | { kind: "log"; record: LogRecord }
  | { kind: "kicked"; id: number }
  | { kind: "drained"; id: number }
  /** The webhook outcomes this worker has stored since it started (sent each second when they moved). */
  | { kind: "outcomes"; counts: Record<DeliveryOutcome, number> }
  /** Known outcomes stored, the connection closed: the worker may be terminated. */
  | { kind: "stopped" };
