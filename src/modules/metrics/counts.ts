/**
 * The counting primitives other modules call for `/metrics` (docs/metrics.md): a `Tally` is a
 * fixed set of named counts, numbers in a plain object, read at scrape time. Adding is one
 * property increment: no allocation, no prom-client call.
 */
export class Tally<K extends string> {
  readonly counts: Record<K, number>;

  constructor(readonly keys: readonly K[]) {
    this.counts = Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
  }

  add(key: K, n = 1): void {
    this.counts[key] += n;
  }

  /** Adds another tally's counts (a worker's, reported to the main thread). */
  addAll(counts: Readonly<Record<K, number>>): void {
    for (const k of this.keys) this.counts[k] += counts[k] ?? 0;
  }
}

/** Why a login was refused (flagsvc_login_refused_total{cause}). */
export const LOGIN_REFUSALS = ["bad_credentials", "locked_out", "busy"] as const;
export type LoginRefusal = (typeof LOGIN_REFUSALS)[number];

/** How a webhook delivery attempt ended, once stored (flagsvc_webhook_deliveries_total{outcome}). */
export const DELIVERY_OUTCOMES = ["succeeded", "retried", "failed"] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];
