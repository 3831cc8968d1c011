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
 * Requests counted in the window that started at `window` (ms), under the limit of `kind`; the
 * limit and its `X-RateLimit-Limit` value are set when the window turns, so a request reads
 * nothing but its meter.
 */
export class Meter {
  window = -1;
  count = 0;
  limit = 0;
  limitText = "";
  constructor(readonly kind: RateLimitKind) {}
}

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

  /** Counts one request on `meter` (a credential's own); allowed while `count <= limit`. */
  hit(meter: Meter, now = this.clock.now()): Readonly<Meter> {
    this.advance(now);
    if (meter.window !== this.windowStart) {
      meter.window = this.windowStart;
      meter.count = 0;
      meter.limit = this.limits[meter.kind];
      meter.limitText = this.limitTexts[meter.kind];
    }
    meter.count++;
    return meter;
  }

  /** `hit` for a caller without a meter of its own, named by `name` (`ip:10.0.0.1`, a user id). */
  hitNamed(kind: RateLimitKind, name: string, now = this.clock.now()): Readonly<Meter> {
    this.advance(now);
    let meter = this.meters.get(name);
    if (meter === undefined) this.meters.set(name, (meter = new Meter(kind)));
    return this.hit(meter, now);
  }

  /** Seconds until the current window ends, at least 1 (`Retry-After` of a refused request). */
  retryAfter(now = this.clock.now()): number {
    return Math.max(1, Math.ceil((this.windowStart + WINDOW_MS - now) / 1000));
  }

  /** Callers without a meter of their own counted in the current window (for tests). */
  size(): number {
    return this.meters.size;
  }

  /** Starts the window `now` falls in, when it is not the current one. */
  private advance(now: number): void {
    if (now - this.windowStart < WINDOW_MS && now >= this.windowStart) return;
    this.windowStart = now - (now % WINDOW_MS);
    this.meters = new Map();
    this.resetText = String((this.windowStart + WINDOW_MS) / 1000);
  }
}
