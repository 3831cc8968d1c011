/**
 * The sender (decisions §10): attempts pending deliveries that are due, signs and POSTs them
 * through the outbound guard, records each attempt, and schedules retries.
 *
 * - Due: `status = pending AND next_attempt_at <= now` and the webhook enabled. The database is
 *   the queue: nothing about a delivery lives only in memory, so a restart (or kill -9) loses
 *   nothing. An attempt cut short by a crash left its row pending and due: it is attempted
 *   again after start (at-least-once; receivers dedupe by event id).
 * - `kick()` runs a pass on the next turn of the event loop: after a write that queued
 *   deliveries commits, when the next pending delivery comes due (a timer, set by each pass over
 *   everything and each stored retry), and every second from a croner job; a finished attempt
 *   runs another while deliveries were left waiting for room.
 * - Bounds: at most MAX_IN_FLIGHT attempts overall and PER_WEBHOOK_IN_FLIGHT per webhook, so
 *   one slow receiver cannot hold up the others; a delivery in flight is never started again.
 *   A pass looks at the webhooks that may have work (a write's, those an attempt left room
 *   in; all enabled ones on the every-second pass) in turn, one index seek each.
 * - An attempt: POST of the event's stored payload text, 2xx within SVC_WEBHOOK_TIMEOUT_MS is
 *   success, anything else (3xx included: redirects are not followed) a failure. After a failure
 *   the next attempt is due SVC_WEBHOOK_RETRY_DELAYS[attempts - 1] seconds later; the failure of
 *   retry 4 (the 5th attempt) marks the delivery failed for good.
 * - Outcomes are stored together, one transaction FLUSH_AFTER_MS after the first of them (one
 *   commit per attempt would cost more than the attempt). An attempt that ends frees its room
 *   at once, but its delivery stays held until the outcome is stored, so no pass can start it
 *   twice. A crash before the store leaves it pending: it is sent again (at-least-once).
 * - stop(): no new attempts; outcomes already known are stored, attempts in flight are aborted
 *   and stay pending.
 *
 * The queue is a `DeliveryQueue` (store.ts), on the sender's own connection (the background
 * thread's, in the server). Passes run one at a time: a pass asked for while one runs follows it.
 */
import { createHmac } from "node:crypto";
import type { Config } from "../../config";
import { iso, type Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { guardedFetch, OutboundBlockedError, OutboundPolicy } from "../../lib/outbound";
import { VERSION } from "../../version";
import { DELIVERY_OUTCOMES, Tally, type DeliveryOutcome } from "../metrics/counts";
import type { AttemptOutcome, ClaimedDelivery, DeliveryQueue, DeliveryTarget } from "./store";

export const MAX_IN_FLIGHT = 16;
export const PER_WEBHOOK_IN_FLIGHT = 4;
/** Outcomes are stored together, this long after the first of them is known. */
const FLUSH_AFTER_MS = 10;
/** Response bodies are read up to this much (to keep the connection reusable), then dropped. */
const BODY_READ_LIMIT = 64 * 1024;
const ERROR_MAX = 300;
export const USER_AGENT = `flagsvc-webhooks/${VERSION}`;

/** `sha256=` + lowercase hex HMAC-SHA256 of the body, keyed with the webhook's secret. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** Due deliveries fetched beyond the room there is, kept for the next passes. */
const PREFETCH = 64;

type DueRow = ClaimedDelivery & DeliveryTarget & { webhookId: string };

interface Held {
  webhookId: string;
  controller: AbortController;
  /** Resolves once the attempt's outcome is stored (or abandoned). */
  done: Promise<void>;
  release: () => void;
}

/**
 * The sender as the rest of the service uses it: a DeliveryDispatcher on the main thread
 * (tests, tools), or the same dispatcher on the background thread (the server,
 * src/background/thread.ts), where its SQLite and network work does not hold up requests.
 */
export interface Deliveries {
  /**
   * Deliveries came due (see DeliveryDispatcher.kick). On the background thread a kick with
   * webhooks returns a promise that settles once the sender has taken it: the write that
   * queued the deliveries answers then (flow control, see BackgroundThread.kick).
   */
  kick(webhookIds?: readonly string[]): void | Promise<void>;
  /** Attempts every due delivery and resolves once none is in flight (tests and tools). */
  drain(): Promise<void>;
  /** The daily retention clean-up (DeliveryQueue.prune), where the sender runs. */
  prune(): void | Promise<void>;
  /** No new attempts; outcomes already known are stored. */
  stop(): void | Promise<void>;
  /** Attempts whose outcome was stored since start, by outcome (`/metrics`). */
  storedOutcomes(): Readonly<Record<DeliveryOutcome, number>>;
}

class AttemptTimeout extends Error {}
class Stopped extends Error {}

export class DeliveryDispatcher implements Deliveries {
  /** Deliveries started and not settled yet (attempting, or outcome not stored): no pass starts these. */
  private readonly held = new Map<string, Held>();
  /** Attempts in progress, what the bounds count: overall, and per webhook with its held deliveries. */
  private attempting = 0;
  private readonly perWebhook = new Map<string, { attempting: number; held: number }>();
  private readonly policy: OutboundPolicy;
  private readonly delays: readonly number[];
  private readonly timeoutMs: number;
  /** Outcomes waiting to be stored, FLUSH_AFTER_MS at most: one transaction for many attempts. */
  private outcomes: AttemptOutcome[] = [];
  private scheduled = false;
  /** The pass under way (passes run one at a time), and whether another was asked for meanwhile. */
  private pumping: Promise<number> | null = null;
  private pumpAgain = false;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  /**
   * A pass when the next pending delivery comes due (`wakeAt`, ms), so that a retry runs when due
   * rather than at the next every-second pass (up to a second late: the attempt it follows began
   * on a whole second too). Set by each stored retry that comes earlier, and from the table by
   * every pass over everything (at start, every second, on a wake-up).
   */
  private wakeTimer: ReturnType<typeof setTimeout> | undefined;
  private wakeAt = Infinity;
  private stopped = false;
  /** Stored outcomes by kind (`/metrics`; on the background thread, reported to the main thread). */
  readonly stored = new Tally(DELIVERY_OUTCOMES);
  /**
   * Webhooks that may have due deliveries not yet started, in the order they are looked at:
   * those a write queued deliveries for, and those an attempt just left room in. `everything`:
   * any enabled webhook may (start-up, the every-second job, a webhook enabled again).
   */
  private readonly dirty = new Set<string>();
  private everything = true;
  /**
   * Per webhook, ids of due deliveries from its last due query, oldest first, that a pass takes
   * before it asks again (each is claimed, if still pending and due, before it starts).
   * Forgotten on every pass over everything, so retries that came due are found in order.
   */
  private readonly candidates = new Map<string, string[]>();

  constructor(private readonly deps: { queue: DeliveryQueue; clock: Clock; log: Logger; config: Config }) {
    this.policy = new OutboundPolicy(deps.config.outboundAllowedHosts);
    this.delays = deps.config.webhookRetryDelays;
    this.timeoutMs = deps.config.webhookTimeoutMs;
  }

  /** Attempts allowed in total: the first plus one per retry delay. */
  get maxAttempts(): number {
    return 1 + this.delays.length;
  }

  /**
   * Deliveries came due: a pass on the next turn of the event loop (kicks in one turn make one
   * pass). `webhookIds`: they are of these webhooks only (a write's deliveries; nothing to do
   * when empty); without it anything may be due (the clock moved, a start, a webhook enabled).
   */
  kick(webhookIds?: readonly string[]): void {
    if (webhookIds === undefined) this.everything = true;
    else if (webhookIds.length === 0) return;
    else for (const id of webhookIds) this.dirty.add(id);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump().catch((e) => this.deps.log.error("webhook pass failed", { error: e instanceof Error ? e.message : String(e) }));
    });
  }

  /**
   * Starts every due delivery there is room for, now, webhook by webhook (round robin: a
   * webhook looked at goes to the back of the line). Resolves with how many it started. While a
   * pass runs, a call asks for one more after it, and resolves with both.
   */
  pump(): Promise<number> {
    if (this.pumping) {
      this.pumpAgain = true;
      return this.pumping;
    }
    this.pumping = this.passes();
    return this.pumping;
  }

  private async passes(): Promise<number> {
    let started = 0;
    try {
      do {
        this.pumpAgain = false;
        started += await this.pass();
      } while (this.pumpAgain && !this.stopped);
    } finally {
      this.pumping = null;
    }
    return started;
  }

  private async pass(): Promise<number> {
    if (this.stopped) return 0;
    const { queue } = this.deps;
    const everything = this.everything;
    if (everything) {
      this.everything = false;
      this.candidates.clear();
      for (const id of await queue.enabledWebhooks()) this.dirty.add(id);
    }
    const now = iso(this.deps.clock.now());
    let started = 0;
    for (const webhookId of this.dirty) {
      if (this.stopped || this.attempting >= MAX_IN_FLIGHT) break; // the rest stay in line
      this.dirty.delete(webhookId); // an attempt of it that ends puts it back
      const counts = this.perWebhook.get(webhookId);
      let room = Math.min(PER_WEBHOOK_IN_FLIGHT - (counts?.attempting ?? 0), MAX_IN_FLIGHT - this.attempting);
      if (room <= 0) continue;
      let hook: DeliveryTarget | null | undefined;
      let ids = this.candidates.get(webhookId);
      let fresh = false;
      while (room > 0 && !this.stopped) {
        if (ids === undefined || ids.length === 0) {
          if (fresh) break; // all there is
          // Its held deliveries are pending (and maybe due) in the table still: ask for that many more.
          ids = await queue.due(webhookId, now, room + (this.perWebhook.get(webhookId)?.held ?? 0) + PREFETCH);
          this.candidates.set(webhookId, ids);
          fresh = true;
          continue;
        }
        const id = ids.shift()!;
        if (this.held.has(id)) continue;
        if ((hook ??= await queue.target(webhookId)) === null) break; // disabled
        const row = await queue.claim(id, now);
        if (row === null || this.held.has(id) || this.stopped) continue; // settled meanwhile
        this.start({ webhookId, ...hook, ...row });
        started++;
        if (--room === 0 && this.perWebhook.get(webhookId)!.attempting < PER_WEBHOOK_IN_FLIGHT) {
          this.dirty.add(webhookId); // cut short by the overall bound, not its own: next in line
        }
      }
    }
    if (everything) await this.wakeForNext();
    return started;
  }

  /**
   * Runs due deliveries now and waits until none is held, passing again while attempts
   * finish (a delivery whose next attempt is due at once is attempted again). For tests and
   * tools; the server relies on kick() and the every-second job.
   */
  async drain(): Promise<void> {
    for (;;) {
      this.everything = true;
      await this.pump();
      if (this.held.size === 0) return;
      await Promise.all([...this.held.values()].map((f) => f.done));
    }
  }

  storedOutcomes(): Readonly<Record<DeliveryOutcome, number>> {
    return this.stored.counts;
  }

  async prune(): Promise<void> {
    const removed = await this.deps.queue.prune(this.deps.clock.now());
    if (removed.deliveries + removed.events > 0) this.deps.log.info("old webhook deliveries removed", removed);
  }

  /**
   * No new attempts. Outcomes already known are stored; attempts in flight are aborted
   * unrecorded, so their deliveries stay pending and due.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    const flushing = this.flush();
    this.stopped = true;
    clearTimeout(this.wakeTimer);
    for (const f of this.held.values()) f.controller.abort(new Stopped("stopping"));
    await flushing;
  }

  private start(row: DueRow): void {
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const controller = new AbortController();
    this.held.set(row.id, { webhookId: row.webhookId, controller, done, release });
    const counts = this.perWebhook.get(row.webhookId);
    if (counts) {
      counts.attempting++;
      counts.held++;
    } else this.perWebhook.set(row.webhookId, { attempting: 1, held: 1 });
    this.attempting++;
    this.attempt(row, controller).then(
      (outcome) => this.attempted(row, outcome),
      (e) => {
        this.deps.log.error("webhook attempt failed unexpectedly", { delivery: row.id, error: e instanceof Error ? e.message : String(e) });
        this.attempted(row, null);
      },
    );
  }

  /**
   * The attempt is over: its room goes to the next delivery at once, while the delivery stays
   * held until its outcome is stored (null: abandoned, it stays pending as it is).
   */
  private attempted(row: DueRow, outcome: AttemptOutcome | null): void {
    this.attempting--;
    this.perWebhook.get(row.webhookId)!.attempting--;
    this.dirty.add(row.webhookId);
    if (outcome && !this.stopped) {
      this.outcomes.push(outcome);
      if (!this.flushTimer) this.flushTimer = setTimeout(() => void this.flush(), FLUSH_AFTER_MS);
    } else this.settle(row.id);
    this.schedule();
  }

  /** Stores the outcomes known so far (resolves once stored, or not: then logged). */
  private flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.stopped || this.outcomes.length === 0) return Promise.resolve();
    const batch = this.outcomes;
    this.outcomes = [];
    return this.store(batch);
  }

  private async store(batch: AttemptOutcome[]): Promise<void> {
    try {
      await this.deps.queue.record(batch);
      for (const o of batch) this.stored.add(o.status === "pending" ? "retried" : o.status);
    } catch (e) {
      // Not stored: the deliveries stay pending and due, and are attempted again.
      this.deps.log.error("webhook outcomes not stored", { deliveries: batch.length, error: e instanceof Error ? e.message : String(e) });
    }
    for (const o of batch) this.settle(o.id);
    this.schedule();
    let next = Infinity;
    for (const o of batch) if (o.nextAttemptAt !== null) next = Math.min(next, Date.parse(o.nextAttemptAt));
    this.wake(next);
  }

  /** A pass at `due` (ms), unless one comes earlier already. */
  private wake(due: number): void {
    if (this.stopped || due >= this.wakeAt) return;
    clearTimeout(this.wakeTimer);
    this.wakeAt = due;
    // At most an hour ahead (timers do not take any length): a later retry is the every-second pass's.
    const wait = Math.min(Math.max(0, due - this.deps.clock.now()), 3_600_000);
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      this.wakeAt = Infinity;
      this.kick();
    }, wait);
    this.wakeTimer.unref();
  }

  /** A wake-up for the next pending delivery that is not due yet, if any. */
  private async wakeForNext(): Promise<void> {
    if (this.stopped) return;
    const next = await this.deps.queue.nextDue(iso(this.deps.clock.now()));
    if (next) this.wake(Date.parse(next));
  }

  /** The delivery is no longer held: a pass may find it again (if still pending and due). */
  private settle(id: string): void {
    const entry = this.held.get(id);
    if (!entry) return;
    this.held.delete(id);
    const counts = this.perWebhook.get(entry.webhookId)!;
    if (--counts.held === 0) this.perWebhook.delete(entry.webhookId);
    entry.release();
  }

  /** One attempt; null when it was abandoned (stopping). */
  private async attempt(row: DueRow, controller: AbortController): Promise<AttemptOutcome | null> {
    const { clock, log } = this.deps;
    const startedAt = clock.now();
    const t0 = performance.now();
    const timer = setTimeout(() => controller.abort(new AttemptTimeout()), this.timeoutMs);
    let responseStatus: number | null = null;
    let error: string | null = null;
    try {
      const res = await guardedFetch(
        row.url,
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "x-service-event": row.event,
            "x-service-delivery": row.id,
            "x-service-signature": signature(row.secret, row.payload),
          },
          body: row.payload,
          signal: controller.signal,
        },
        this.policy,
      );
      responseStatus = res.status;
      if (res.status < 200 || res.status > 299) {
        error = res.status >= 300 && res.status < 400 ? `HTTP ${res.status}: redirects are not followed` : `HTTP ${res.status}`;
      }
      await discardBody(res);
    } catch (e) {
      if (responseStatus === null) error = this.describe(e, controller.signal);
    } finally {
      clearTimeout(timer);
    }
    if (this.stopped) return null;
    const durationMs = Math.round(performance.now() - t0);
    const attempts = row.attempts + 1;
    const ok = error === null;
    const failed = !ok && attempts >= this.maxAttempts;
    const nextAttemptAt = ok || failed ? null : iso(clock.now() + this.delays[attempts - 1]! * 1000);
    const fields = { delivery: row.id, webhook: row.webhookId, event: row.event, attempt: attempts, status: responseStatus, durationMs };
    if (ok) log.debug("webhook delivered", fields);
    else if (failed) log.warn("webhook delivery failed for good", { ...fields, error });
    else log.info("webhook attempt failed; will retry", { ...fields, error, nextAttemptAt });
    return {
      id: row.id,
      status: ok ? "succeeded" : failed ? "failed" : "pending",
      attempts,
      lastAttemptAt: iso(startedAt),
      nextAttemptAt,
      responseStatus,
      error,
      durationMs,
    };
  }

  private describe(e: unknown, signal: AbortSignal): string {
    let text: string;
    if (signal.aborted && signal.reason instanceof AttemptTimeout) text = `timed out after ${this.timeoutMs} ms`;
    else if (e instanceof OutboundBlockedError) text = e.message;
    else {
      const err = e as NodeJS.ErrnoException;
      text = err?.code === "ConnectionRefused" || err?.code === "ECONNREFUSED" ? "connection refused" : err?.code ? `${err.code}: ${err.message}` : String(err?.message ?? e);
    }
    return text.length > ERROR_MAX ? `${text.slice(0, ERROR_MAX - 1)}…` : text;
  }
}

/** Reads a small response body to its end (the connection can then be reused); cancels a large one. */
async function discardBody(res: Response): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  let read = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
      if (read > BODY_READ_LIMIT) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // The status decided the attempt; a body cut short changes nothing.
  }
}
