/**
 * The sender (decisions §10): attempts pending deliveries that are due, signs and POSTs them
 * through the outbound guard, records each attempt, and schedules retries.
 *
 * - Due: `status = pending AND next_attempt_at <= now` and the webhook enabled. The database is
 *   the queue: nothing about a delivery lives only in memory, so a restart (or kill -9) loses
 *   nothing. An attempt cut short by a crash left its row pending and due: it is attempted
 *   again after start (at-least-once; receivers dedupe by event id).
 * - `kick()` (after a write that queued deliveries commits, and every second from a croner job
 *   for retries that come due) runs a pass on the next turn of the event loop; a finished
 *   attempt runs another while deliveries were left waiting for room.
 * - Bounds: at most MAX_IN_FLIGHT attempts overall and PER_WEBHOOK_IN_FLIGHT per webhook, so
 *   one slow receiver cannot hold up the others; a delivery in flight is never started again.
 * - An attempt: POST of the event's stored payload text, 2xx within SVC_WEBHOOK_TIMEOUT_MS is
 *   success, anything else (3xx included: redirects are not followed) a failure. After a failure
 *   the next attempt is due SVC_WEBHOOK_RETRY_DELAYS[attempts - 1] seconds later; the failure of
 *   retry 4 (the 5th attempt) marks the delivery failed for good.
 * - Outcomes are stored in one transaction per turn of the event loop; a delivery counts as in
 *   flight until its outcome is stored, so no pass can start it twice.
 * - stop(): no new attempts; outcomes already known are stored, attempts in flight are aborted
 *   and stay pending.
 */
import { createHmac } from "node:crypto";
import type { Config } from "../../config";
import type { Store } from "../../db/client";
import { iso, type Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { guardedFetch, OutboundBlockedError, OutboundPolicy } from "../../lib/outbound";
import { VERSION } from "../../version";

export const MAX_IN_FLIGHT = 16;
export const PER_WEBHOOK_IN_FLIGHT = 4;
/** Response bodies are read up to this much (to keep the connection reusable), then dropped. */
const BODY_READ_LIMIT = 64 * 1024;
const ERROR_MAX = 300;
export const USER_AGENT = `flagsvc-webhooks/${VERSION}`;

/** `sha256=` + lowercase hex HMAC-SHA256 of the body, keyed with the webhook's secret. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/**
 * Due deliveries with what an attempt needs, oldest due first (the due index, in order), leaving
 * out those in flight (?3) and those of webhooks already at their bound (?2), so that a webhook
 * with a long backlog cannot crowd the others out of the answer.
 */
const DUE_SQL = `
  SELECT d.id, d.webhook_id AS webhookId, d.attempts, e.event, e.payload, w.url, w.secret
  FROM webhook_deliveries d
  JOIN webhooks w ON w.id = d.webhook_id
  JOIN webhook_events e ON e.id = d.event_id
  WHERE d.status = 'pending' AND d.next_attempt_at <= ?1 AND w.enabled = 1
    AND d.webhook_id NOT IN (SELECT value FROM json_each(?2))
    AND d.id NOT IN (SELECT value FROM json_each(?3))
  ORDER BY d.next_attempt_at
  LIMIT ?4`;

/** The same, for the given webhooks only (?2): those that were at their bound and have room again. */
const DUE_OF_SQL = DUE_SQL.replace("d.webhook_id NOT IN", "d.webhook_id IN");

/** An attempt's outcome; `status = 'pending'` in the condition: never undo a deletion's cascade or revive a row. */
const RECORD_SQL = `
  UPDATE webhook_deliveries
  SET status = ?1, attempts = ?2, last_attempt_at = ?3, next_attempt_at = ?4, response_status = ?5, error = ?6, duration_ms = ?7
  WHERE id = ?8 AND status = 'pending'`;

interface DueRow {
  id: string;
  webhookId: string;
  attempts: number;
  event: string;
  payload: string;
  url: string;
  secret: string;
}

type Outcome = [status: string, attempts: number, lastAttemptAt: string, nextAttemptAt: string | null, responseStatus: number | null, error: string | null, durationMs: number, id: string];

interface InFlight {
  webhookId: string;
  controller: AbortController;
  /** Resolves once the attempt's outcome is stored (or abandoned). */
  done: Promise<void>;
  release: () => void;
}

class AttemptTimeout extends Error {}
class Stopped extends Error {}

export class DeliveryDispatcher {
  private readonly inFlight = new Map<string, InFlight>();
  private readonly perWebhook = new Map<string, number>();
  private readonly policy: OutboundPolicy;
  private readonly delays: readonly number[];
  private readonly timeoutMs: number;
  /** Outcomes waiting to be stored: one transaction per turn of the event loop, not one per attempt. */
  private outcomes: Outcome[] = [];
  private scheduled = false;
  private flushScheduled = false;
  private stopped = false;
  /**
   * What the last passes learnt, so that a pass does not scan a backlog it cannot start: when
   * `othersDone`, every due delivery is in flight or belongs to a webhook of `waiting` (those
   * that were at their bound); a finished attempt of such a webhook looks for its next
   * deliveries only. A write (kick), the every-second job and drain() forget it.
   */
  private othersDone = false;
  private readonly waiting = new Set<string>();

  constructor(private readonly deps: Store & { clock: Clock; log: Logger; config: Config }) {
    this.policy = new OutboundPolicy(deps.config.outboundAllowedHosts);
    this.delays = deps.config.webhookRetryDelays;
    this.timeoutMs = deps.config.webhookTimeoutMs;
  }

  /** Attempts allowed in total: the first plus one per retry delay. */
  get maxAttempts(): number {
    return 1 + this.delays.length;
  }

  /** Ids of the deliveries being attempted right now. */
  inFlightIds(): string[] {
    return [...this.inFlight.keys()];
  }

  /**
   * Deliveries came due: a pass on the next turn of the event loop (kicks in one turn make one
   * pass). `webhookIds`: they are of these webhooks only (a write's deliveries; nothing to do
   * when empty); without it anything may be due (the clock moved, a start, a webhook enabled).
   */
  kick(webhookIds?: readonly string[]): void {
    if (webhookIds === undefined) this.othersDone = false;
    else if (webhookIds.length === 0) return;
    else for (const id of webhookIds) this.waiting.add(id);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  /** Starts every due delivery there is room for, now. Returns how many it started. */
  pump(): number {
    if (this.stopped) return 0;
    const now = iso(this.deps.clock.now());
    const full = () => [...this.perWebhook].filter(([, n]) => n >= PER_WEBHOOK_IN_FLIGHT).map(([id]) => id);
    let started = 0;
    for (;;) {
      const room = MAX_IN_FLIGHT - this.inFlight.size;
      if (room <= 0) break;
      const inFlight = JSON.stringify([...this.inFlight.keys()]);
      let of: string[] | undefined;
      let rows: DueRow[];
      if (!this.othersDone) {
        rows = this.deps.sqlite.query<DueRow, [string, string, string, number]>(DUE_SQL).all(now, JSON.stringify(full()), inFlight, room);
      } else {
        of = [...this.waiting].filter((id) => (this.perWebhook.get(id) ?? 0) < PER_WEBHOOK_IN_FLIGHT);
        if (of.length === 0) break;
        rows = this.deps.sqlite.query<DueRow, [string, string, string, number]>(DUE_OF_SQL).all(now, JSON.stringify(of), inFlight, room);
      }
      // The first row's webhook had room when asked for: every round starts at least one.
      for (const row of rows) {
        if ((this.perWebhook.get(row.webhookId) ?? 0) >= PER_WEBHOOK_IN_FLIGHT) continue;
        this.start(row);
        started++;
      }
      if (rows.length === room) continue; // cut by the limit: there may be more
      // The answer held all there was: what is left is in flight or of webhooks at their bound.
      if (of) {
        for (const id of of) if ((this.perWebhook.get(id) ?? 0) < PER_WEBHOOK_IN_FLIGHT) this.waiting.delete(id);
      } else {
        this.othersDone = true;
      }
      for (const id of full()) this.waiting.add(id);
      break;
    }
    return started;
  }

  /**
   * Runs due deliveries now and waits until none is in flight, passing again while attempts
   * finish (a delivery whose next attempt is due at once is attempted again). For tests and
   * tools; the server relies on kick() and the every-second job.
   */
  async drain(): Promise<void> {
    for (;;) {
      this.othersDone = false;
      this.pump();
      if (this.inFlight.size === 0) return;
      await Promise.all([...this.inFlight.values()].map((f) => f.done));
    }
  }

  /**
   * No new attempts. Outcomes already known are stored; attempts in flight are aborted
   * unrecorded, so their deliveries stay pending and due.
   */
  stop(): void {
    if (this.stopped) return;
    this.flush();
    this.stopped = true;
    for (const f of this.inFlight.values()) f.controller.abort(new Stopped("stopping"));
  }

  private start(row: DueRow): void {
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const controller = new AbortController();
    this.inFlight.set(row.id, { webhookId: row.webhookId, controller, done, release });
    this.perWebhook.set(row.webhookId, (this.perWebhook.get(row.webhookId) ?? 0) + 1);
    this.attempt(row, controller).then(
      (outcome) => {
        if (outcome && !this.stopped) this.store(outcome);
        else if (this.finish(row.id)) this.schedule();
      },
      (e) => {
        this.deps.log.error("webhook attempt failed unexpectedly", { delivery: row.id, error: e instanceof Error ? e.message : String(e) });
        if (this.finish(row.id)) this.schedule();
      },
    );
  }

  /** The delivery stays "in flight" until its outcome is stored, so no pass can start it again. */
  private store(outcome: Outcome): void {
    this.outcomes.push(outcome);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.stopped || this.outcomes.length === 0) return;
    const batch = this.outcomes;
    this.outcomes = [];
    try {
      const record = this.deps.sqlite.query(RECORD_SQL);
      this.deps.sqlite.transaction(() => {
        for (const o of batch) record.run(...o);
      })();
    } catch (e) {
      // Not stored: the deliveries stay pending and due, and are attempted again.
      this.deps.log.error("webhook outcomes not stored", { deliveries: batch.length, error: e instanceof Error ? e.message : String(e) });
    }
    let more = false;
    for (const o of batch) more = this.finish(o[7]) || more;
    if (more) this.pump();
  }

  /** The attempt is over. Returns whether a pass may find deliveries for the room it left. */
  private finish(id: string): boolean {
    const entry = this.inFlight.get(id);
    if (!entry) return false;
    this.inFlight.delete(id);
    const n = (this.perWebhook.get(entry.webhookId) ?? 1) - 1;
    if (n === 0) this.perWebhook.delete(entry.webhookId);
    else this.perWebhook.set(entry.webhookId, n);
    entry.release();
    return !this.othersDone || this.waiting.has(entry.webhookId);
  }

  /** One attempt; null when it was abandoned (stopping). */
  private async attempt(row: DueRow, controller: AbortController): Promise<Outcome | null> {
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
    return [ok ? "succeeded" : failed ? "failed" : "pending", attempts, iso(startedAt), nextAttemptAt, responseStatus, error, durationMs, row.id];
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
