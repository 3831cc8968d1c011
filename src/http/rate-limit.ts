/**
 * Fixed 60-second windows per credential (decisions §13), in memory. A key's counter (`Meter`)
 * lives on its credential record, so counting a key's request is two field writes; callers
 * without one (client addresses, login tokens) get a meter from a map that is dropped whole
 * when the window turns, so memory holds only the callers of the last minute. Every request
 * passes here: `hit` allocates nothing for keys and hands back ready-made header values.
 */
import { RATE_LIMIT_KINDS, type RateLimitKind } from "../config";
import type { Clock } from "../lib/clock";

const WINDOW_MS = 60_000;

/** Requests counted in the window that started at `window` (ms). */
export interface Meter {
  window: number;
  count: number;
}

export const newMeter = (): Meter => ({ window: -1, count: 0 });

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
  private meters = new Map<string, Meter>();
  private readonly limitTexts: Record<RateLimitKind, string>;
  /** Reused by every call: read it before the next `hit`. */
  private readonly state: RateLimitState = { limit: 0, limitText: "", remaining: 0, reset: 0, resetText: "", retryAfter: 0, allowed: true };

  constructor(
    private readonly limits: Readonly<Record<RateLimitKind, number>>,
    private readonly clock: Clock,
  ) {
    this.limitTexts = Object.fromEntries(RATE_LIMIT_KINDS.map((k) => [k, String(limits[k])])) as Record<RateLimitKind, string>;
  }

  /**
   * Counts one request under the limit of `kind`: on a credential's own meter, or on the
   * meter of a caller named by `key` (e.g. `ip:10.0.0.1`, a user id).
   */
  hit(kind: RateLimitKind, caller: Meter | string, now = this.clock.now()): Readonly<RateLimitState> {
    const state = this.state;
    if (now - this.windowStart >= WINDOW_MS || now < this.windowStart) {
      this.windowStart = now - (now % WINDOW_MS);
      this.meters = new Map();
      state.reset = (this.windowStart + WINDOW_MS) / 1000;
      state.resetText = String(state.reset);
    }
    let meter: Meter;
    if (typeof caller === "string") {
      meter = this.meters.get(caller) ?? newMeter();
      if (meter.window < 0) this.meters.set(caller, meter);
    } else meter = caller;
    if (meter.window !== this.windowStart) {
      meter.window = this.windowStart;
      meter.count = 0;
    }
    const count = ++meter.count;
    const limit = this.limits[kind];
    state.limit = limit;
    state.limitText = this.limitTexts[kind];
    state.remaining = count >= limit ? 0 : limit - count;
    state.allowed = count <= limit;
    if (!state.allowed) state.retryAfter = Math.max(1, Math.ceil((this.windowStart + WINDOW_MS - now) / 1000));
    return state;
  }

  /** Callers without a meter of their own counted in the current window (for tests). */
  size(): number {
    return this.meters.size;
  }
}
