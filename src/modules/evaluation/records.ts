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
 * are built at the flush. Readers must not block: the plugin host posts the text to workers.
 *
 * Under load most batches cannot be taken (a plugin still busy with the last one, the
 * integrations thread's queue full): a reader says so by `ready()`, and is told the batch's count
 * by `missed` instead. A batch no reader of its project is ready for is never built: records
 * dropped at the flush cost their three pushes and nothing else.
 *
 * And while the request thread is busy (`busy`: on a CPU 80 % of the time or more; server.ts
 * passes lib/scheduling's gauge), each reader takes at most one batch every
 * `BUSY_INTERVAL_MS`: the rest are missed. A reader's work, even at the lowest CPU priority,
 * costs a saturated server throughput (its thread's wake-ups and cache traffic beside the
 * request thread, its outbound requests, its memory); at that load the readers get a sample of
 * the records, and each one counts what it missed.
 */
import type { EvaluationResult } from "../../evaluation/types";

export const MAX_BATCH = 500;
export const FLUSH_AFTER_MS = 1000;
/** While the request thread is busy: at most one batch per reader this often. */
export const BUSY_INTERVAL_MS = 1000;

/** A reader of a project's records. */
export interface RecordReader {
  /** One batch: its JSON text (the same string for every reader of the flush) and its record count. */
  take(batchJson: string, count: number): void;
  /** Whether it takes a batch now (absent: always). */
  ready?(): boolean;
  /** A batch it was not ready for: its record count. */
  missed?(count: number): void;
}

interface ProjectStream {
  /** Each reader, and when it last took a batch (performance.now()). */
  readers: Map<RecordReader, number>;
  /** result, environment, userId; result, environment, userId; ... */
  pending: (EvaluationResult | string | null)[];
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** Values per buffered evaluation in `pending`. */
const STRIDE = 3;

export class EvaluationRecords {
  private readonly streams = new Map<string, ProjectStream>();

  constructor(
    private readonly onReaderError: (error: unknown) => void = () => {},
    /** Whether the request thread is busy (default: never). */
    private readonly busy: () => boolean = () => false,
  ) {}

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

  /** `reader` (or a function that takes every batch) gets each batch of `projectId`'s records from now on; returns its unsubscribe. */
  subscribe(projectId: string, reader: RecordReader | RecordReader["take"]): () => void {
    const r: RecordReader = typeof reader === "function" ? { take: reader } : reader;
    let stream = this.streams.get(projectId);
    if (!stream) this.streams.set(projectId, (stream = { readers: new Map(), pending: [], timer: undefined }));
    stream.readers.set(r, Number.NEGATIVE_INFINITY);
    return () => {
      stream.readers.delete(r);
      if (stream.readers.size > 0 || this.streams.get(projectId) !== stream) return;
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
    let json: string | undefined;
    const now = performance.now();
    const sampled = this.busy();
    for (const [reader, tookAt] of stream.readers) {
      try {
        if ((sampled && now - tookAt < BUSY_INTERVAL_MS) || (reader.ready && !reader.ready())) reader.missed?.(count);
        else {
          stream.readers.set(reader, now);
          reader.take((json ??= batchJson(pending, count)), count);
        }
      } catch (e) {
        this.onReaderError(e);
      }
    }
  }
}

/** The records of a flush as one JSON text. */
function batchJson(pending: readonly (EvaluationResult | string | null)[], count: number): string {
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
  return JSON.stringify(records);
}
