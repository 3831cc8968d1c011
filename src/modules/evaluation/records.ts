/**
 * The evaluation-record stream: what plugins' `onEvaluations` (and the integrations) receive,
 * taken off the evaluation path. Per project with subscribers, a buffer of the evaluations'
 * results; it is flushed as one JSON text
 * `[{ flagKey, environment, enabled, variant, reason, ruleId, userId, evaluatedAt }, ...]`
 * when it holds `MAX_BATCH` records or `FLUSH_AFTER_MS` after its first, built once and shared
 * by every subscriber of the project.
 *
 * Hot path: `wants` is one map lookup (nothing else happens for a project nobody subscribes
 * to); `add` keeps references (the result object, the environment's slug, the user id) in a
 * flat array, so an evaluation allocates nothing for it beyond the array's growth; the records
 * are built at the flush. Consumers must not block: the plugin host posts the text to workers.
 */
import type { EvaluationResult } from "../../evaluation/types";

export const MAX_BATCH = 500;
export const FLUSH_AFTER_MS = 1000;

export type RecordConsumer = (batchJson: string, count: number) => void;

interface ProjectStream {
  consumers: Set<RecordConsumer>;
  /** result, environment, userId; result, environment, userId; ... */
  pending: (EvaluationResult | string | null)[];
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** Values per buffered evaluation in `pending`. */
const STRIDE = 3;

export class EvaluationRecords {
  private readonly streams = new Map<string, ProjectStream>();

  constructor(private readonly onConsumerError: (error: unknown) => void = () => {}) {}

  /** Whether anyone reads `projectId`'s records: when not, an evaluation skips `add` entirely. */
  wants(projectId: string): boolean {
    return this.streams.has(projectId);
  }

  add(projectId: string, environment: string, result: EvaluationResult, userId: string | null): void {
    const stream = this.streams.get(projectId);
    if (!stream) return;
    const pending = stream.pending;
    pending.push(result, environment, userId);
    if (pending.length === STRIDE) stream.timer = setTimeout(() => this.flush(stream), FLUSH_AFTER_MS).unref();
    else if (pending.length >= MAX_BATCH * STRIDE) this.flush(stream);
  }

  /** `consumer` receives each batch of `projectId`'s records from now on; returns its unsubscribe. */
  subscribe(projectId: string, consumer: RecordConsumer): () => void {
    let stream = this.streams.get(projectId);
    if (!stream) this.streams.set(projectId, (stream = { consumers: new Set(), pending: [], timer: undefined }));
    stream.consumers.add(consumer);
    return () => {
      stream.consumers.delete(consumer);
      if (stream.consumers.size > 0 || this.streams.get(projectId) !== stream) return;
      // The last reader left: what it did not get yet is nobody's.
      clearTimeout(stream.timer);
      this.streams.delete(projectId);
    };
  }

  /** Drops every buffer and subscription (shutdown). */
  stop(): void {
    for (const stream of this.streams.values()) clearTimeout(stream.timer);
    this.streams.clear();
  }

  private flush(stream: ProjectStream): void {
    clearTimeout(stream.timer);
    stream.timer = undefined;
    const pending = stream.pending;
    if (pending.length === 0) return;
    stream.pending = [];
    const count = pending.length / STRIDE;
    const records = new Array(count);
    for (let i = 0; i < count; i++) {
      const r = pending[i * STRIDE] as EvaluationResult;
      records[i] = {
        flagKey: r.flagKey,
        environment: pending[i * STRIDE + 1],
        enabled: r.enabled,
        variant: r.variant,
        reason: r.reason,
        ruleId: r.ruleId,
        userId: pending[i * STRIDE + 2],
        evaluatedAt: r.evaluatedAt,
      };
    }
    const json = JSON.stringify(records);
    for (const consumer of stream.consumers) {
      try {
        consumer(json, count);
      } catch (e) {
        this.onConsumerError(e);
      }
    }
  }
}
