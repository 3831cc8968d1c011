/** The one source of time. Tests inject a fixed or steppable clock; production uses the system clock. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** ISO 8601 UTC with milliseconds: `2026-11-22T10:00:00.000Z` (decisions §2). */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
