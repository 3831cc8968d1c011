/**
 * Request counts for `/metrics` (flagsvc_http_requests_total, flagsvc_http_request_duration_seconds):
 * plain typed arrays per slot (method × route template), written on every request by the
 * pipeline (pipeline.ts) and the hot routes (native.ts) and read only at scrape time
 * (src/modules/metrics/). A hot route takes its slot once, when compiled; an Elysia route looks
 * its slot up by the matched template (two Map reads, no allocation). A request that matched no
 * route is counted under one route label, `UNMATCHED`: the raw path never becomes a label.
 *
 * `record` is a few array writes: no allocation, no prom-client call (docs/metrics.md).
 */

/** The route label of a request that matched no route (404, 405). */
export const UNMATCHED = "unmatched";
/** Methods counted by name; any other is counted as `OTHER`. */
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
/** Upper bounds of the duration histogram's buckets, in seconds (`+Inf` is implicit). */
export const DURATION_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const BUCKETS = DURATION_BUCKETS.length + 1;
/** Distinct status codes counted apart, per process; any further one shares the last column. */
const STATUS_COLUMNS = 32;

/** One method × route: its label values. */
export interface RequestSlot {
  method: string;
  route: string;
}

export class RequestCounts {
  private readonly slots: RequestSlot[] = [];
  private readonly byMethod = new Map<string, Map<string, number>>();
  /** Status code -> its column + 1 (0: not seen yet). */
  private readonly statusColumn = new Uint8Array(600);
  private readonly statuses: number[] = [];
  /** slots × STATUS_COLUMNS request counts. */
  private counts = new Float64Array(0);
  /** slots × BUCKETS counts of durations (per bucket, not cumulative), and their sums. */
  private buckets = new Float64Array(0);
  private sums = new Float64Array(0);

  /** The slot of `method` on `route` (a template, or UNMATCHED); made on first use. */
  slot(method: string, route: string): number {
    const m = METHODS.has(method) ? method : "OTHER";
    let routes = this.byMethod.get(m);
    if (routes === undefined) this.byMethod.set(m, (routes = new Map()));
    const slot = routes.get(route);
    return slot ?? this.add(routes, m, route);
  }

  /** One answered request: its slot, status and duration in seconds. */
  record(slot: number, status: number, seconds: number): void {
    let column = status >= 0 && status < 600 ? this.statusColumn[status]! - 1 : STATUS_COLUMNS - 1;
    if (column < 0) column = this.column(status);
    this.counts[slot * STATUS_COLUMNS + column]! += 1;
    let b = 0;
    while (b < BUCKETS - 1 && seconds > DURATION_BUCKETS[b]!) b++;
    this.buckets[slot * BUCKETS + b]! += 1;
    this.sums[slot]! += seconds;
  }

  /** Every slot with requests: label values, counts by status, cumulative buckets (`+Inf` last), sum. */
  *series(): Generator<{ slot: RequestSlot; byStatus: [number, number][]; cumulative: number[]; sum: number }> {
    for (let s = 0; s < this.slots.length; s++) {
      const byStatus: [number, number][] = [];
      for (let c = 0; c < this.statuses.length; c++) {
        const n = this.counts[s * STATUS_COLUMNS + c]!;
        if (n > 0) byStatus.push([this.statuses[c]!, n]);
      }
      if (byStatus.length === 0) continue;
      const cumulative: number[] = [];
      let total = 0;
      for (let b = 0; b < BUCKETS; b++) cumulative.push((total += this.buckets[s * BUCKETS + b]!));
      yield { slot: this.slots[s]!, byStatus, cumulative, sum: this.sums[s]! };
    }
  }

  private add(routes: Map<string, number>, method: string, route: string): number {
    const slot = this.slots.length;
    this.slots.push({ method, route });
    routes.set(route, slot);
    this.counts = grown(this.counts, this.slots.length * STATUS_COLUMNS);
    this.buckets = grown(this.buckets, this.slots.length * BUCKETS);
    this.sums = grown(this.sums, this.slots.length);
    return slot;
  }

  private column(status: number): number {
    if (this.statuses.length >= STATUS_COLUMNS) return STATUS_COLUMNS - 1;
    this.statuses.push(status);
    this.statusColumn[status] = this.statuses.length;
    return this.statuses.length - 1;
  }
}

function grown(array: Float64Array, length: number): Float64Array<ArrayBuffer> {
  const next = new Float64Array(length);
  next.set(array);
  return next;
}
