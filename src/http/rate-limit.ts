/**
 * Fixed 60-second windows per credential (decisions §13), in memory: one counter per key in
 * the current window; when the window turns, the old map is dropped whole, so memory holds
 * only the callers of the last minute. Every request passes here: `hit` allocates nothing
 * and hands back ready-made header values.
 */
import { RATE_LIMIT_KINDS, type RateLimitKind } from "../config";
import type { Clock } from "../lib/clock";

const WINDOW_MS = 60_000;

export interface RateLimitState {
  limit: number;
  /** `X-RateLimit-Limit`, formatted once per kind. */
  limitText: string;
  remaining: number;
  /** Unix seconds at which the window ends. */
  reset: number;
  /** `X-RateLimit-Reset`, formatted once per window. */
  resetText: string;
  /** Seconds until then (at least 1); set only when `allowed` is false. */
  retryAfter: number;
  allowed: boolean;
}

export class RateLimiter {
  private windowStart = -1;
  private counts = new Map<string, number>();
  private readonly limitTexts: Record<RateLimitKind, string>;
  /** Reused by every call: read it before the next `hit`. */
  private readonly state: RateLimitState = { limit: 0, limitText: "", remaining: 0, reset: 0, resetText: "", retryAfter: 0, allowed: true };

  constructor(
    private readonly limits: Readonly<Record<RateLimitKind, number>>,
    private readonly clock: Clock,
  ) {
    this.limitTexts = Object.fromEntries(RATE_LIMIT_KINDS.map((k) => [k, String(limits[k])])) as Record<RateLimitKind, string>;
  }

  /** Counts one request of `key` (e.g. `key_abc`, `ip:10.0.0.1`) under the limit of `kind`. */
  hit(kind: RateLimitKind, key: string, now = this.clock.now()): Readonly<RateLimitState> {
    const state = this.state;
    if (now - this.windowStart >= WINDOW_MS || now < this.windowStart) {
      this.windowStart = now - (now % WINDOW_MS);
      this.counts = new Map();
      state.reset = (this.windowStart + WINDOW_MS) / 1000;
      state.resetText = String(state.reset);
    }
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    const limit = this.limits[kind];
    state.limit = limit;
    state.limitText = this.limitTexts[kind];
    state.remaining = count >= limit ? 0 : limit - count;
    state.allowed = count <= limit;
    if (!state.allowed) state.retryAfter = Math.max(1, Math.ceil((this.windowStart + WINDOW_MS - now) / 1000));
    return state;
  }

  /** Callers counted in the current window (for tests and metrics). */
  size(): number {
    return this.counts.size;
  }
}
