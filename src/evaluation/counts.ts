/**
 * Evaluation counts: what `/metrics` exports (flagsvc_evaluations_total) and what insights
 * flush to the database (docs/insights.md). One counter per flag per environment, held by the
 * snapshot beside the compiled flag (src/evaluation/snapshot.ts), so that a deleted flag's
 * counter goes with it and its labels (project and environment slugs, flag key) come from the
 * snapshot, never from a request.
 *
 * The hot path is `add`: a short scan of the variant labels seen (strings the engine hands out,
 * compared by identity first), one array increment and one number stored. No allocation but
 * when a variant label is seen for the first time. Counts are cumulative since the process
 * started (a Prometheus counter); a reader that wants increments (the insights flusher) keeps
 * what it read last and subtracts (`FlagCounter.drain`).
 */
import { REASONS, type EvaluationResult, type Reason } from "./types";

/** The label of a boolean flag's answer, and of any flag's answer without a variant. */
export const ON = "on";
export const OFF = "off";

const REASON_COUNT = REASONS.length;
const REASON_INDEX: Readonly<Record<Reason, number>> = Object.fromEntries(REASONS.map((r, i) => [r, i])) as Record<Reason, number>;

/** One non-zero cell of a counter: how many evaluations served `variant` for `reason`. */
export interface CountCell {
  variant: string;
  reason: Reason;
  count: number;
}

export class FlagCounter {
  /** The variant label of each row, in the order first seen: a variant key, or on/off. */
  private labels: string[] = [];
  /** rows × REASON_COUNT, cumulative since start. */
  private counts = new Float64Array(0);
  /** What the last `drain` read, same layout (grown with `counts`). */
  private drained = new Float64Array(0);
  /** When the last evaluation that was not a test-session override happened (ms); 0: never since start. */
  lastAt = 0;

  constructor(
    readonly projectId: string,
    readonly environmentId: string,
    readonly flagKey: string,
  ) {}

  /** Counts one evaluation of this flag here. `now`: the request's clock (ms). */
  add(result: EvaluationResult, now: number): void {
    const label = result.variant ?? (result.enabled ? ON : OFF);
    const labels = this.labels;
    let row = 0;
    while (row < labels.length && labels[row] !== label) row++;
    if (row === labels.length) this.grow(label);
    const reason = REASON_INDEX[result.reason];
    this.counts[row * REASON_COUNT + reason]! += 1;
    if (reason !== 0) this.lastAt = now; // 0: TEST_OVERRIDE, which is not traffic
  }

  /** Every non-zero cumulative cell. */
  cells(): CountCell[] {
    return this.read(this.counts, null);
  }

  /** The cells counted since the last drain (and marks them read). */
  drain(): CountCell[] {
    const cells = this.read(this.counts, this.drained);
    this.drained.set(this.counts);
    return cells;
  }

  /** The cells counted since the last drain, left unread (insights show them before they are flushed). */
  pending(): CountCell[] {
    return this.read(this.counts, this.drained);
  }

  /** Gives back what a drain took but could not store (a failed flush): the next drain has it again. */
  undrain(cells: readonly CountCell[]): void {
    for (const { variant, reason, count } of cells) {
      const row = this.labels.indexOf(variant);
      if (row >= 0) this.drained[row * REASON_COUNT + REASON_INDEX[reason]]! -= count;
    }
  }

  private read(counts: Float64Array, minus: Float64Array | null): CountCell[] {
    const out: CountCell[] = [];
    for (let row = 0; row < this.labels.length; row++) {
      for (let r = 0; r < REASON_COUNT; r++) {
        const i = row * REASON_COUNT + r;
        const count = counts[i]! - (minus === null ? 0 : minus[i]!);
        if (count > 0) out.push({ variant: this.labels[row]!, reason: REASONS[r]!, count });
      }
    }
    return out;
  }

  private grow(label: string): void {
    this.labels.push(label);
    const counts = new Float64Array(this.labels.length * REASON_COUNT);
    counts.set(this.counts);
    const drained = new Float64Array(counts.length);
    drained.set(this.drained);
    this.counts = counts;
    this.drained = drained;
  }
}
