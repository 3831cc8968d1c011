/**
 * Fixed 60-second windows per credential (decisions §13), in memory. A key's counter (`Meter`)
 * lives on its credential record, so counting a key's request is a field write; callers
 * without one (client addresses, login tokens) get a meter from a map that is dropped whole
 * when the window turns, so memory holds only the callers of the last minute. Every request
 * passes here: `hit` allocates nothing for keys, and reads and writes only the meter (hot data
 * in few objects: on a busy server, every other object touched costs a likely cache miss).
 */
import { RATE_LIMIT_KINDS, type RateLimitKind } from "../config";
import type { Clock } from "../lib/clock";

const WINDOW_MS = 60_000;

/**
 * Requests counted in the window that started at `window` (ms), and the limit they count
 * against with its `X-RateLimit-Limit` value (set when the window turns, so a request reads
 * nothing but its meter).
 */
export interface Meter {
  window: number;
  count: number;
  limit: number;
  limitText: string;
}

export const newMeter = (): Meter => ({ window: -1, count: 0, limit: 0, limitText: "" });

export class RateLimiter {
  private windowStart = -1;
  private meters = new Map<string, Meter>();
  private readonly limitTexts: Record<RateLimitKind, string>;
  /** `X-RateLimit-Reset` of the current window: Unix seconds of its end, formatted once. */
  resetText = "";

  constructor(
    private readonly limits: Readonly<Record<RateLimitKind, number>>,
    private readonly clock: Clock,
  ) {
    this.limitTexts = Object.fromEntries(RATE_LIMIT_KINDS.map((k) => [k, String(limits[k])])) as Record<RateLimitKind, string>;
  }

  /**
   * Counts one request under the limit of `kind`: on a credential's own meter, or on the
   * meter of a caller named by `key` (e.g. `ip:10.0.0.1`, a user id). Returns that meter:
   * allowed while `count <= limit`.
   */
  hit(kind: RateLimitKind, caller: Meter | string, now = this.clock.now()): Readonly<Meter> {
    if (now - this.windowStart >= WINDOW_MS || now < this.windowStart) {
      this.windowStart = now - (now % WINDOW_MS);
      this.meters = new Map();
      this.resetText = String((this.windowStart + WINDOW_MS) / 1000);
    }
    let meter: Meter;
    if (typeof caller === "string") {
      meter = this.meters.get(caller) ?? newMeter();
      if (meter.window < 0) this.meters.set(caller, meter);
    } else meter = caller;
    if (meter.window !== this.windowStart) {
      meter.window = this.windowStart;
      meter.count = 0;
      meter.limit = this.limits[kind];
      meter.limitText = this.limitTexts[kind];
    }
    meter.count++;
    return meter;
  }

  /** Seconds until the current window ends, at least 1 (`Retry-After` of a refused request). */
  retryAfter(now = this.clock.now()): number {
    return Math.max(1, Math.ceil((this.windowStart + WINDOW_MS - now) / 1000));
  }

  /** Callers without a meter of their own counted in the current window (for tests). */
  size(): number {
    return this.meters.size;
  }
}
