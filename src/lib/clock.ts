/** The one source of time. Tests inject a fixed or steppable clock; production uses the system clock. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock whose reading may be a little old (`coarseClock`). */
export interface CoarseClock extends Clock {
  /** Forgets the reading: the next `now()` reads the source. */
  expire(): void;
}

/**
 * `source`, read at most once per `resolutionMs`: the time every request's admission needs
 * (rate-limit window, a key's last use, a rotated key's grace end), where a reading a few
 * milliseconds old is as good and a clock read per request is not free (~40 ns, a visible share
 * of a trivial route). The first call after the reading expired reads `source` and arms one
 * timer (unref'd) to expire it: an idle process wakes for nothing. A blocked event loop delays
 * the expiry, so a reading is at most `resolutionMs` plus the longest block old. A resolution
 * of 0 reads `source` every time (an injected test clock).
 */
export function coarseClock(source: Clock, resolutionMs: number): CoarseClock {
  let value = 0;
  let fresh = false;
  const expire = () => {
    fresh = false;
  };
  return {
    now() {
      if (!fresh) {
        value = source.now();
        if (resolutionMs > 0) {
          fresh = true;
          setTimeout(expire, resolutionMs).unref();
        }
      }
      return value;
    },
    expire,
  };
}

/** ISO 8601 UTC with milliseconds: `2026-11-22T10:00:00.000Z` (decisions §2). */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
