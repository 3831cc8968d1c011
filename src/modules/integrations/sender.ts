/**
 * The integrations' sender (decisions §12): turns the evaluation-record stream and the
 * change-event queue into each vendor's requests (the connectors, ./connectors/), sends them
 * through the outbound guard, and keeps each integration's `stats` and queue position.
 *
 * Where it runs: in the server, on a thread of its own at the lowest CPU priority (thread.ts,
 * worker.ts), on that thread's own database connection, so nothing of it runs on a request;
 * tests run it in process. The request thread only hands it the shared JSON text of each batch
 * of evaluation records (feed.ts) and says when a project has new change events or its
 * integrations changed.
 *
 * Per enabled integration, a runner:
 * - Evaluations: the records of its project's batches wait in a buffer of at most
 *   MAX_PENDING_RECORDS (beyond it the oldest are dropped and counted in `failed`). They are
 *   turned into requests (split at the vendor's limits by the connector) when a slot is free,
 *   so a slow vendor gets fewer, larger requests; an `everySecond` connector (Datadog) gets
 *   them once a second. A request is tried at most EVALUATION_ATTEMPTS times.
 * - Changes: read from the queue after the integration's stored position, a batch at a time;
 *   the position is stored once every request of the batch is through (or given up for good),
 *   so a crash resends (at least once: the connectors' insert ids dedupe where the vendor
 *   offers them). A change request is retried until it goes through. The position is stored
 *   in one UPDATE with every counter gathered until then (the batch's `sent` among them), so a
 *   crash never keeps a position without the counts of what was sent before it.
 * - At most `connector.concurrency` (default 4) requests in flight; changes go first.
 * - Answers, as the connector reads them: `sent` counts accepted and rejected events (a
 *   partial failure is not resent whole; Amplitude's `remainder` is); `retry` waits
 *   Retry-After when the vendor said it (429: the whole integration holds until then), else an
 *   exponential backoff with jitter; `failed` gives the request up, and refused credentials
 *   (`credentials`: a 401/403, or the vendor's own way of saying so) also pause the
 *   integration (PAUSE_MS doubling to PAUSE_MAX_MS) instead of hammering the vendor.
 *   Network errors and time-outs are retried.
 * - `stats`: `sent` events the vendor accepted, `failed` events refused, given up or dropped,
 *   `lastError`, `lastSentAt` (the last accepted request); added to the row with each stored
 *   position, and at most STATS_FLUSH_MS after they were counted (runtime state: no change-log
 *   entry). A crash loses only counts of evaluations (they have no position) of that last moment.
 * - Secrets: an endpoint may echo the request (a proxy in `apiHost`, a misbehaving vendor). The
 *   vendor's answer is masked as it is read, before a connector takes an excerpt of it, and so
 *   is the message of a request that failed (it may carry the URL), before anything is clipped,
 *   stored or logged (lib/secret-text.ts: every form the config's secrets travel in, derived
 *   once when the runner starts). The sender's own texts carry no secret and are not masked.
 * - A disabled or deleted integration, or one whose config changed, is stopped at once: its
 *   requests in flight are aborted, nothing it held is sent (a new config starts a new runner).
 * - Several nodes (docs/scaling.md): every node runs a runner for each enabled integration and
 *   sends the evaluations of its own requests (each node its own records: none is sent twice,
 *   none is shipped between nodes). Change events are sent only by the node that holds the
 *   integration's lease `integration:<id>` (src/modules/leases/; granted at once on SQLite):
 *   when granted, the runner reads its stored position again (the last holder moved it) and
 *   goes on from there; when lost, it drops the change batch under way (its position not
 *   stored: the new holder sends it again, at least once) and reads no more changes.
 */
import type { Config } from "../../config";
import type { Clock } from "../../lib/clock";
import { iso } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { secretValues } from "../../lib/config-secrets";
import { guardedFetch, OutboundBlockedError, OutboundPolicy, readTextCapped } from "../../lib/outbound";
import { secretForms, secretMask } from "../../lib/secret-text";
import { VERSION } from "../../version";
import type { QueuedEvent } from "../change-events/store";
import type { LeaseKeeper } from "../leases/keeper";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./connectors/types";
import type { EnabledIntegration, IntegrationRuntimeStore, StatsDelta } from "./store";

export const USER_AGENT = `flagsvc-integrations/${VERSION}`;
export const REQUEST_TIMEOUT_MS = 10_000;
/** Evaluations waiting per integration while its vendor is slow or down; beyond, the oldest are dropped. */
export const MAX_PENDING_RECORDS = 20_000;
export const EVALUATION_ATTEMPTS = 5;
export const DEFAULT_CONCURRENCY = 4;
/** Change events read (and turned into requests) at a time. */
const CHANGES_PER_BATCH = 100;
const BACKOFF_BASE_MS = 1000;
const BACKOFF_MAX_MS = 5 * 60_000;
const PAUSE_MS = 60_000;
const PAUSE_MAX_MS = 15 * 60_000;
const STATS_FLUSH_MS = 250;
/** Every second: `everySecond` hand-overs, and a look at the change queue (a kick may have been missed). */
const TICK_MS = 1000;
const RESPONSE_MAX_BYTES = 1024 * 1024;
const ERROR_MAX = 500;

/** What the request thread tells the sender (in process, or posted to the integrations thread). */
export interface IntegrationSink {
  /** The enabled integrations or their configs changed (an API write, a deleted project): read them again. */
  reload(): void;
  /** A batch of `count` evaluation records of a project, as the stream's shared JSON text. */
  evaluations(projectId: string, batchJson: string, count: number): void;
  /** Whether `evaluations` would take a batch now (the records stream builds no batch that nobody takes); absent: always. */
  accepts?(): boolean;
  /** A batch of `count` records of a project that it did not take (it did not accept then). */
  missed?(projectId: string, count: number): void;
  /** New rows in the change-event queue for this project. */
  eventsCommitted(projectId: string): void;
  /** Stops sending; what was counted is stored (requests in flight are aborted: their changes stay queued). */
  stop(): void | Promise<void>;
}

/** Whether an integration with this connector and config sends evaluations. */
export function takesEvaluations(connector: Connector | undefined, config: Record<string, unknown>): boolean {
  return connector?.evaluations !== undefined && config.trackEvaluations !== false;
}

export interface SenderDeps {
  /** The enabled integrations, the change-event queue, the stats (on the sender's own connection). */
  store: IntegrationRuntimeStore;
  /** For `lastSentAt` only: waits, retries and Datadog's seconds run on real time (Date.now). */
  clock: Clock;
  log: Logger;
  config: Pick<Config, "outboundAllowedHosts">;
  connectors: Readonly<Record<string, Connector>>;
  /** Which integrations' change events this node sends: those whose lease it holds. */
  leases: Pick<LeaseKeeper, "want" | "drop">;
  /** Jitter source (tests: fixed). */
  random?: () => number;
}

interface Job {
  request: VendorRequest;
  attempts: number;
  dueAt: number;
  /** The change batch it belongs to; null for evaluations. */
  batch: ChangeBatch | null;
}

interface ChangeBatch {
  /** The position stored once every job of the batch is settled. */
  last: number;
  open: number;
}

interface Runner {
  row: EnabledIntegration;
  connector: Connector;
  config: Record<string, unknown>;
  /** Masks the config's secrets in a text from outside (built once, when the runner starts). */
  mask: (text: string) => string;
  controller: AbortController;
  stopped: boolean;
  /** This node holds the integration's lease: it sends its change events. */
  leased: boolean;
  limit: number;
  inFlight: number;
  records: EvaluationRecord[];
  changeJobs: Job[];
  evaluationJobs: Job[];
  /** The change batch under way (null: none; the next is read when it settles). */
  batch: ChangeBatch | null;
  /** The next change batch is being read; `readAgain`: new events were committed meanwhile. */
  reading: boolean;
  readAgain: boolean;
  position: number;
  /** No request starts before this (a 429's Retry-After, a 401's pause). */
  holdUntil: number;
  pauseMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  timerAt: number;
  stats: StatsDelta;
}

/** Who made a change, from the queue's actor column (older rows carry none). */
function actorOf(text: string): FlagChangeEvent["actor"] {
  const a = JSON.parse(text) as Partial<FlagChangeEvent["actor"]>;
  return typeof a.id === "string" ? { type: String(a.type), id: a.id, label: String(a.label ?? a.id) } : { type: "system", id: "system", label: "flagsvc" };
}

function changeEventOf(row: QueuedEvent): FlagChangeEvent {
  return { ...(JSON.parse(row.payload) as Omit<FlagChangeEvent, "actor">), actor: actorOf(row.actor) };
}

function noStats(): StatsDelta {
  return { sent: 0, failed: 0, lastError: null, lastSentAt: null };
}

/** Counters a write did not store, back with those gathered since (the newer error and time win). */
function keep(r: Runner, unstored: StatsDelta): void {
  r.stats = {
    sent: unstored.sent + r.stats.sent,
    failed: unstored.failed + r.stats.failed,
    lastError: r.stats.lastError ?? unstored.lastError,
    lastSentAt: r.stats.lastSentAt ?? unstored.lastSentAt,
  };
}

function clip(text: string): string {
  return text.length > ERROR_MAX ? `${text.slice(0, ERROR_MAX - 1)}…` : text;
}

/** The lease under which an integration's change events are sent. */
export const integrationLease = (id: string) => `integration:${id}`;

export class IntegrationSender implements IntegrationSink {
  private readonly runners = new Map<string, Runner>();
  private readonly policy: OutboundPolicy;
  private readonly random: () => number;
  /** Reloads run one at a time, in order. */
  private reloading: Promise<void> = Promise.resolve();
  private readonly tick: ReturnType<typeof setInterval>;
  private statsTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;

  constructor(private readonly deps: SenderDeps) {
    this.policy = new OutboundPolicy(deps.config.outboundAllowedHosts);
    this.random = deps.random ?? Math.random;
    this.tick = setInterval(() => this.everySecond(), TICK_MS);
    this.reload();
  }

  reload(): void {
    this.reloading = this.reloading
      .then(() => this.reread())
      .catch((e) => this.deps.log.warn("integrations: reading the enabled integrations failed", { error: String(e) }));
  }

  private async reread(): Promise<void> {
    if (this.closed) return;
    const rows = await this.deps.store.enabled();
    if (this.closed) return;
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      const running = this.runners.get(row.id);
      if (running && running.row.config === row.config) continue;
      const connector = this.deps.connectors[row.type];
      // A new config: a new runner under the same lease (held or not).
      if (running) void this.stopRunner(running, connector !== undefined);
      if (!connector) continue;
      const runner = this.startRunner(row, connector);
      this.runners.set(row.id, runner);
      this.deps.leases.want(integrationLease(row.id), { gained: () => this.gained(runner), lost: () => this.lost(runner) });
    }
    for (const runner of this.runners.values()) if (!seen.has(runner.row.id)) void this.stopRunner(runner);
  }

  /** The lease granted: changes are sent from the stored position (the last holder may have moved it). */
  private gained(r: Runner): void {
    if (r.stopped || r.leased) return;
    this.deps.store.positionOf(r.row.id).then(
      (position) => {
        if (r.stopped || r.leased) return;
        r.position = Math.max(r.position, position);
        r.leased = true;
        this.pullChanges(r);
      },
      (e) => {
        // Not sending changes without knowing where they stand: the lease is let go, and tried for again at the keeper's next tick.
        this.deps.log.warn("integrations: reading the position failed", { integration: r.row.id, error: String(e) });
        void this.deps.leases.drop(integrationLease(r.row.id)).then(() => {
          if (!r.stopped) this.deps.leases.want(integrationLease(r.row.id), { gained: () => this.gained(r), lost: () => this.lost(r) });
        });
      },
    );
  }

  /** The lease lost (another node sends the changes now): the batch under way is dropped unstored. */
  private lost(r: Runner): void {
    r.leased = false;
    r.batch = null;
    r.changeJobs = [];
  }

  evaluations(projectId: string, batchJson: string): void {
    let records: EvaluationRecord[] | undefined;
    for (const r of this.runners.values()) {
      if (r.row.projectId !== projectId || !takesEvaluations(r.connector, r.config)) continue;
      records ??= JSON.parse(batchJson) as EvaluationRecord[];
      for (const record of records) r.records.push(record);
      const over = r.records.length - MAX_PENDING_RECORDS;
      if (over > 0) {
        r.records.splice(0, over);
        this.count(r, { failed: over, error: `${over} evaluations dropped: ${r.connector.name} is not keeping up (at most ${MAX_PENDING_RECORDS} wait)` });
      }
      if (!r.connector.everySecond) this.pump(r);
    }
  }

  eventsCommitted(projectId: string): void {
    for (const r of this.runners.values()) if (r.row.projectId === projectId) this.pullChanges(r);
  }

  /** `count` of the project's records were dropped before they got here (the thread's flow control): counted as failed. */
  dropped(projectId: string, count: number): void {
    for (const r of this.runners.values()) {
      if (r.row.projectId === projectId && takesEvaluations(r.connector, r.config)) {
        this.count(r, { failed: count, error: `${count} evaluations dropped: the integrations thread is not keeping up (the server is saturated)` });
      }
    }
  }

  /** Stops every runner (requests in flight aborted: their changes stay queued), stores the stats and releases the leases. */
  async stop(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.tick);
    const flushes = [...this.runners.values()].map((r) => this.stopRunner(r));
    await Promise.all([...flushes, this.flushStats()]);
  }

  private startRunner(row: EnabledIntegration, connector: Connector): Runner {
    const config = JSON.parse(row.config) as Record<string, unknown>;
    return {
      row,
      connector,
      config,
      mask: secretMask(secretForms(secretValues(connector, config))),
      controller: new AbortController(),
      stopped: false,
      leased: false,
      limit: connector.concurrency ?? DEFAULT_CONCURRENCY,
      inFlight: 0,
      records: [],
      changeJobs: [],
      evaluationJobs: [],
      batch: null,
      reading: false,
      readAgain: false,
      position: row.position,
      holdUntil: 0,
      pauseMs: PAUSE_MS,
      timer: undefined,
      timerAt: 0,
      stats: noStats(),
    };
  }

  /** `keepLease`: a new runner of the integration takes the lease over (a new config). */
  private async stopRunner(r: Runner, keepLease = false): Promise<void> {
    r.stopped = true;
    r.controller.abort();
    clearTimeout(r.timer);
    r.records = [];
    r.changeJobs = [];
    r.evaluationJobs = [];
    this.runners.delete(r.row.id);
    await this.flushStats(r);
    if (!keepLease) await this.deps.leases.drop(integrationLease(r.row.id));
  }

  private everySecond(): void {
    for (const r of this.runners.values()) {
      if (r.connector.everySecond && r.records.length > 0 && Date.now() >= r.holdUntil) this.build(r);
      this.pullChanges(r);
      this.pump(r);
    }
  }

  /** The next change batch, when none is under way (one read at a time). */
  private pullChanges(r: Runner): void {
    if (r.stopped || !r.leased || r.batch !== null) return;
    if (r.reading) {
      r.readAgain = true;
      return;
    }
    r.reading = true;
    r.readAgain = false;
    this.deps.store.eventsAfter(r.row.projectId, r.position, CHANGES_PER_BATCH).then(
      (rows) => {
        r.reading = false;
        this.took(r, rows);
        if (r.readAgain) this.pullChanges(r);
      },
      (e) => {
        r.reading = false;
        this.deps.log.warn("integrations: reading the change queue failed; retrying in a second", { integration: r.row.id, error: String(e) });
      },
    );
  }

  /** A change batch read: its requests queued (none: the position moves past it and the next is read). */
  private took(r: Runner, rows: QueuedEvent[]): void {
    if (r.stopped || !r.leased || r.batch !== null || rows.length === 0) return;
    const last = rows[rows.length - 1]!.position;
    const wanted = r.connector.changes && r.config.trackChanges !== false;
    const requests = wanted ? r.connector.changes!(rows.map(changeEventOf), r.config) : [];
    if (requests.length === 0) {
      this.moveTo(r, last);
      this.pullChanges(r);
      return;
    }
    const batch: ChangeBatch = { last, open: requests.length };
    r.batch = batch;
    const now = Date.now();
    for (const request of requests) r.changeJobs.push({ request, attempts: 0, dueAt: now, batch });
    this.pump(r);
  }

  /** Stores the position together with everything counted so far (what was sent before it included), in one write. */
  private moveTo(r: Runner, position: number): void {
    r.position = position;
    const stats = r.stats;
    r.stats = noStats();
    this.deps.store.addStats(r.row.id, stats, position).catch((e) => {
      // Neither was stored: the counters wait for the next flush, and after a crash these changes are sent again.
      keep(r, stats);
      this.deps.log.warn("integrations: storing the position failed", { integration: r.row.id, error: String(e) });
    });
  }

  /** The runner's buffered records as requests (all of them: the connector splits at the vendor's limits). */
  private build(r: Runner): void {
    const records = r.records;
    r.records = [];
    const now = Date.now();
    for (const request of r.connector.evaluations!(records, r.config, now)) r.evaluationJobs.push({ request, attempts: 0, dueAt: now, batch: null });
  }

  /** Starts what may start now; sets the runner's timer for what comes due later. */
  private pump(r: Runner): void {
    if (r.stopped) return;
    const now = Date.now();
    if (now < r.holdUntil) return this.wakeAt(r, r.holdUntil);
    // New evaluation requests only when nothing older waits and a slot is free: a backlog stays records.
    if (!r.connector.everySecond && r.records.length > 0 && r.evaluationJobs.length === 0 && r.inFlight < r.limit) this.build(r);
    let next = Infinity;
    for (const queue of [r.changeJobs, r.evaluationJobs]) {
      // One at a time (Slack): strictly in order, the head only.
      for (let i = 0; i < queue.length && r.inFlight < r.limit && (r.limit > 1 || i === 0); ) {
        const job = queue[i]!;
        if (job.dueAt > now) {
          next = Math.min(next, job.dueAt);
          i++;
          continue;
        }
        queue.splice(i, 1);
        void this.send(r, job);
      }
      if (r.inFlight >= r.limit) return;
    }
    if (next !== Infinity) this.wakeAt(r, next);
  }

  private wakeAt(r: Runner, at: number): void {
    if (r.timer !== undefined && r.timerAt <= at) return;
    clearTimeout(r.timer);
    r.timerAt = at;
    r.timer = setTimeout(() => {
      r.timer = undefined;
      this.pump(r);
    }, Math.max(0, at - Date.now()));
  }

  private async send(r: Runner, job: Job): Promise<void> {
    r.inFlight++;
    job.attempts++;
    const { request } = job;
    let response: VendorResponse | null = null;
    let error: string | null = null;
    let blocked = false;
    const signal = AbortSignal.any([r.controller.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);
    try {
      const res = await guardedFetch(
        request.url,
        { method: request.method, headers: { "user-agent": USER_AGENT, ...request.headers }, body: request.method === "GET" ? undefined : request.body, signal },
        this.policy,
      );
      // Masked before the connector reads it: its excerpts are cut, and a cut could leave part of a secret.
      const body = r.mask((await readTextCapped(res, RESPONSE_MAX_BYTES)) ?? "");
      response = { status: res.status, headers: res.headers.toJSON(), body };
    } catch (e) {
      blocked = e instanceof OutboundBlockedError;
      // A failure's message may carry the URL (a Slack webhook's path is its secret).
      error = r.mask(
        blocked
          ? `outbound request refused: ${(e as Error).message}`
          : signal.aborted && !r.controller.signal.aborted
            ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`
            : `request failed: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    r.inFlight--;
    if (r.stopped) return;
    // A change request of a batch dropped meanwhile (the lease lost): the new holder sends it.
    if (job.batch && job.batch !== r.batch) return this.pump(r);
    const now = Date.now();
    if (response === null) {
      if (blocked) this.pause(r, job, error!, now);
      else this.retry(r, job, error!, null, now);
    } else {
      let outcome: Outcome;
      let rest: VendorRequest | null = null;
      try {
        outcome = r.connector.outcome(request, response);
        if (outcome.kind === "sent") rest = r.connector.remainder?.(request, response) ?? null;
      } catch (e) {
        outcome = { kind: "failed", error: r.mask(`could not read ${r.connector.name}'s answer (HTTP ${response.status}): ${e instanceof Error ? e.message : String(e)}`) };
      }
      switch (outcome.kind) {
        case "sent": {
          r.pauseMs = PAUSE_MS;
          this.count(r, { sent: outcome.accepted, failed: outcome.rejected, error: outcome.error, at: outcome.accepted > 0 ? iso(this.deps.clock.now()) : null });
          if (rest) (job.batch ? r.changeJobs : r.evaluationJobs).unshift({ ...job, request: rest, dueAt: now });
          else this.settle(r, job);
          break;
        }
        case "retry":
          this.retry(r, job, outcome.error, outcome.retryAfterMs, now, response.status === 429);
          break;
        case "failed":
          if (outcome.credentials) this.pause(r, job, outcome.error, now);
          else {
            this.count(r, { failed: request.events, error: outcome.error });
            this.settle(r, job);
          }
          break;
      }
    }
    this.pump(r);
  }

  /** A job through (or given up): a change batch with no job left stores its position and the next is read. */
  private settle(r: Runner, job: Job): void {
    const batch = job.batch;
    // A batch dropped meanwhile (the lease lost) stores nothing.
    if (!batch || --batch.open > 0 || r.batch !== batch) return;
    r.batch = null;
    this.moveTo(r, batch.last);
    this.pullChanges(r);
  }

  private retry(r: Runner, job: Job, error: string, retryAfterMs: number | null, now: number, holdAll = false): void {
    if (!job.batch && job.attempts >= EVALUATION_ATTEMPTS) {
      this.count(r, { failed: job.request.events, error: `${error} (given up after ${job.attempts} attempts)` });
      return;
    }
    this.count(r, { error });
    const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (job.attempts - 1));
    const wait = retryAfterMs ?? backoff / 2 + (this.random() * backoff) / 2;
    job.dueAt = now + wait;
    if (holdAll) r.holdUntil = Math.max(r.holdUntil, job.dueAt);
    (job.batch ? r.changeJobs : r.evaluationJobs).unshift(job);
  }

  /**
   * Bad credentials (or a host the outbound setting refuses): the integration pauses instead of
   * hammering. A change request waits for the pause to end (changes are not lost to a bad key);
   * evaluations are given up and counted.
   */
  private pause(r: Runner, job: Job, error: string, now: number): void {
    r.holdUntil = now + r.pauseMs;
    this.deps.log.warn("integration paused", { integration: r.row.id, type: r.row.type, error, resumeInMs: r.pauseMs });
    r.pauseMs = Math.min(PAUSE_MAX_MS, r.pauseMs * 2);
    if (job.batch) {
      this.count(r, { error });
      job.dueAt = r.holdUntil;
      r.changeJobs.unshift(job);
    } else this.count(r, { failed: job.request.events, error });
  }

  private count(r: Runner, d: { sent?: number; failed?: number; error?: string | null; at?: string | null }): void {
    r.stats.sent += d.sent ?? 0;
    r.stats.failed += d.failed ?? 0;
    if (d.error) r.stats.lastError = clip(d.error);
    if (d.at) r.stats.lastSentAt = d.at;
    this.statsTimer ??= setTimeout(() => this.flushStats(), STATS_FLUSH_MS);
  }

  /** Adds the counters gathered so far to the rows (of one runner, or of all). */
  private flushStats(only?: Runner): Promise<void> {
    if (!only) {
      clearTimeout(this.statsTimer);
      this.statsTimer = undefined;
    }
    const writes: Promise<void>[] = [];
    for (const r of only ? [only] : this.runners.values()) {
      const s = r.stats;
      if (s.sent === 0 && s.failed === 0 && s.lastError === null && s.lastSentAt === null) continue;
      r.stats = noStats();
      writes.push(
        this.deps.store.addStats(r.row.id, s).catch((e) => {
          // Kept: added with the next position or flush.
          keep(r, s);
          this.deps.log.warn("integrations: storing stats failed", { integration: r.row.id, error: String(e) });
          if (!r.stopped) this.statsTimer ??= setTimeout(() => this.flushStats(), STATS_FLUSH_MS);
        }),
      );
    }
    return Promise.all(writes).then(() => undefined);
  }
}
