/**
 * Fixed 60-second windows per credential (decisions §13), in memory: one counter per key in
 * the current window; when the window turns, the old map is dropped whole, so memory holds
 * only the callers of the last minute.
 */
import type { RateLimitKind } from "../config";
import type { Clock } from "../lib/clock";

const WINDOW_MS = 60_000;

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix seconds at which the window ends. */
  reset: number;
  /** Seconds until then (at least 1). */
  retryAfter: number;
  allowed: boolean;
}

export class RateLimiter {
  private windowStart = -1;
  private counts = new Map<string, number>();

  constructor(
    private readonly limits: Readonly<Record<RateLimitKind, number>>,
    private readonly clock: Clock,
  ) {}

  /** Counts one request of `key` (e.g. `key_abc`, `ip:10.0.0.1`) under the limit of `kind`. */
  hit(kind: RateLimitKind, key: string): RateLimitState {
    const now = this.clock.now();
    const windowStart = now - (now % WINDOW_MS);
    if (windowStart !== this.windowStart) {
      this.windowStart = windowStart;
      this.counts = new Map();
    }
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    const limit = this.limits[kind];
    const end = windowStart + WINDOW_MS;
    return {
      limit,
      remaining: Math.max(0, limit - count),
      reset: end / 1000,
      retryAfter: Math.max(1, Math.ceil((end - now) / 1000)),
      allowed: count <= limit,
    };
  }

  /** Callers counted in the current window (for tests and metrics). */
  size(): number {
    return this.counts.size;
  }
}
