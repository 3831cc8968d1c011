/**
 * All SQL of webhooks, their events and their delivery log, behind `WebhookStore`: asynchronous
 * at its boundary (a PostgreSQL implementation stands behind the same interface), synchronous
 * SQLite inside. Two more interfaces, asynchronous too:
 * - `OutboxRows`: what the outbox reads and writes inside every flag and state write's
 *   transaction (outbox.ts), on that transaction;
 * - `DeliveryQueue`: the sender's queue (dispatcher.ts) and the daily retention clean-up, on the
 *   sender's own connection (the background thread's, in the server).
 *
 * Writes of webhooks take the author and a pure `decide` of what is stored now (throws to
 * refuse; no change, nothing written), committed with their change-log entry. Redeliver and
 * attempt-now are delivery operations, not changes of a resource: their own short transaction,
 * no entry (docs/decisions.md, Webhooks).
 */
import type { Database } from "bun:sqlite";
import { and, asc, desc, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type SqliteChangeLog, type Written } from "../../changes/sqlite";
import type { Tx } from "../../changes/log";
import { nextSeq, prepared, transaction } from "../../db/client";
import { projects, webhookDeliveries, webhookEvents, webhooks } from "../../db/schema";
import { iso } from "../../lib/clock";
import { sortableId } from "../../lib/ids";
import { eventPayload, type FlagChange, type FlagReads, type StateValues } from "./events";
import type { DeliveryStatus } from "./model";

/** A webhook as the API answers it: never with its secret. */
export interface WebhookRecord {
  id: string;
  projectSlug: string;
  url: string;
  events: string[];
  environments: string[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

/** A webhook as stored: the record, its project's id and its secret. */
export interface StoredWebhook extends WebhookRecord {
  projectId: string;
  secret: string;
}

export interface DeliveryRecord {
  id: string;
  webhookId: string;
  eventId: string;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  responseStatus: number | null;
  error: string | null;
  durationMs: number | null;
  redeliveryOf: string | null;
  createdAt: string;
}

export interface WebhookStore {
  /** The outbox's reads and writes on a write's transaction (outbox.ts). */
  outboxRows(tx: Tx): OutboxRows;
  find(webhookId: string): Promise<StoredWebhook | undefined>;
  /** The project's webhooks, oldest first. */
  list(projectId: string): Promise<WebhookRecord[]>;
  create(author: Author, webhook: StoredWebhook, change: ChangeDraft): Promise<void>;
  update(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => Written<StoredWebhook>): Promise<StoredWebhook>;
  /** The webhook with its deliveries (cascade). */
  remove(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => ChangeDraft): Promise<void>;
  /** Newest first. */
  deliveries(webhookId: string, query: { limit: number; status?: DeliveryStatus }): Promise<DeliveryRecord[]>;
  /**
   * A new pending delivery of the original's event to its webhook, due at the time `decide`
   * returns (it sees the original and its webhook, and throws to refuse).
   */
  redeliver(deliveryId: string, decide: (original: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string): Promise<DeliveryRecord>;
  /** The delivery made due at the time `decide` returns (null: left as it is). */
  attemptNow(deliveryId: string, decide: (delivery: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string | null): Promise<DeliveryRecord>;
}

/** An enabled webhook: what the outbox matches each event against. */
export interface Taker {
  id: string;
  events: string[];
  environments: string[];
}

/**
 * What the outbox reads and writes inside the transaction of a flag or state write (outbox.ts),
 * on that transaction (`WebhookStore.outboxRows(tx)`).
 */
export interface OutboxRows extends FlagReads {
  /** The project's enabled webhooks (most projects have none: then the outbox reads nothing more). */
  takers(projectId: string): Promise<Taker[]>;
  /**
   * Stores each event that at least one enabled webhook of the project takes (its `events` holds
   * the name and its `environments` is empty or holds the environment), with one pending
   * delivery per such webhook, due at once. Returns the webhook of each delivery queued.
   */
  recordEvents(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, takers: readonly Taker[]): Promise<string[]>;
}

const WEBHOOK_COLUMNS = {
  id: webhooks.id,
  projectId: webhooks.projectId,
  projectSlug: projects.slug,
  url: webhooks.url,
  events: webhooks.events,
  environments: webhooks.environments,
  secret: webhooks.secret,
  description: webhooks.description,
  enabled: webhooks.enabled,
  createdAt: webhooks.createdAt,
  updatedAt: webhooks.updatedAt,
};

const DELIVERY_COLUMNS = {
  id: webhookDeliveries.id,
  webhookId: webhookDeliveries.webhookId,
  eventId: webhookDeliveries.eventId,
  event: webhookEvents.event,
  status: webhookDeliveries.status,
  attempts: webhookDeliveries.attempts,
  nextAttemptAt: webhookDeliveries.nextAttemptAt,
  lastAttemptAt: webhookDeliveries.lastAttemptAt,
  responseStatus: webhookDeliveries.responseStatus,
  error: webhookDeliveries.error,
  durationMs: webhookDeliveries.durationMs,
  redeliveryOf: webhookDeliveries.redeliveryOf,
  createdAt: webhookDeliveries.createdAt,
};

const queries = prepared((db) => ({
  webhook: db
    .select(WEBHOOK_COLUMNS)
    .from(webhooks)
    .innerJoin(projects, eq(projects.id, webhooks.projectId))
    .where(eq(webhooks.id, sql.placeholder("id")))
    .prepare(),
  delivery: db
    .select(DELIVERY_COLUMNS)
    .from(webhookDeliveries)
    .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
    .where(eq(webhookDeliveries.id, sql.placeholder("id")))
    .prepare(),
}));

/** The record of a stored webhook: everything but the project id and the secret. */
export function recordOf(webhook: StoredWebhook): WebhookRecord {
  const { projectId: _p, secret: _s, ...record } = webhook;
  return record;
}

export class SqliteWebhookStore implements WebhookStore {
  constructor(private readonly log: SqliteChangeLog) {}

  private get q() {
    return queries(this.log.store);
  }

  private findNow(webhookId: string): StoredWebhook | undefined {
    return this.q.webhook.get({ id: webhookId });
  }

  async find(webhookId: string): Promise<StoredWebhook | undefined> {
    return this.findNow(webhookId);
  }

  async list(projectId: string): Promise<WebhookRecord[]> {
    return this.log.store.db
      .select(WEBHOOK_COLUMNS)
      .from(webhooks)
      .innerJoin(projects, eq(projects.id, webhooks.projectId))
      .where(eq(webhooks.projectId, projectId))
      .orderBy(asc(webhooks.createdAt), asc(webhooks.seq))
      .all()
      .map(recordOf);
  }

  async create(author: Author, webhook: StoredWebhook, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = webhook;
    await this.log.commit(author, async () => {
      this.log.store.db.insert(webhooks).values({ ...row, seq: nextSeq(webhooks) }).run();
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => Written<StoredWebhook>): Promise<StoredWebhook> {
    return this.log.commit(author, async () => {
      const written = decide(this.findNow(webhookId));
      if (written.changes.length > 0) {
        const { url, events, environments, secret, description, enabled, updatedAt } = written.result;
        this.log.store.db.update(webhooks).set({ url, events, environments, secret, description, enabled, updatedAt }).where(eq(webhooks.id, webhookId)).run();
      }
      return written;
    });
  }

  remove(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const change = decide(this.findNow(webhookId));
      // Its deliveries go with it (foreign key cascade); an attempt in flight finishes unrecorded.
      this.log.store.db.delete(webhooks).where(eq(webhooks.id, webhookId)).run();
      return { result: undefined, changes: [change] };
    });
  }

  async deliveries(webhookId: string, query: { limit: number; status?: DeliveryStatus }): Promise<DeliveryRecord[]> {
    const where = [eq(webhookDeliveries.webhookId, webhookId)];
    if (query.status) where.push(eq(webhookDeliveries.status, query.status));
    return this.log.store.db
      .select(DELIVERY_COLUMNS)
      .from(webhookDeliveries)
      .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
      .where(and(...where))
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.seq))
      .limit(query.limit)
      .all();
  }

  async redeliver(deliveryId: string, decide: (original: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string): Promise<DeliveryRecord> {
    return transaction(this.log.store, () => {
      const original = this.q.delivery.get({ id: deliveryId });
      const at = decide(original, original && this.findNow(original.webhookId));
      const row = newDelivery(original!.webhookId, original!.eventId, at, deliveryId);
      this.log.store.db.insert(webhookDeliveries).values({ ...row, seq: nextSeq(webhookDeliveries) }).run();
      return this.q.delivery.get({ id: row.id })!;
    });
  }

  async attemptNow(deliveryId: string, decide: (delivery: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string | null): Promise<DeliveryRecord> {
    return transaction(this.log.store, () => {
      const delivery = this.q.delivery.get({ id: deliveryId });
      const due = decide(delivery, delivery && this.findNow(delivery.webhookId));
      if (due === null) return delivery!;
      this.log.store.db.update(webhookDeliveries).set({ nextAttemptAt: due }).where(eq(webhookDeliveries.id, deliveryId)).run();
      return { ...delivery!, nextAttemptAt: due };
    });
  }

  /** The outbox's reads and writes on a write's transaction. */
  outboxRows(tx: Tx): OutboxRows {
    return new SqliteOutboxRows(sqliteTx(tx).sqlite);
  }
}

const ENVIRONMENTS_SQL = "SELECT id, slug FROM environments WHERE project_id = ?1 ORDER BY seq";
const STATES_SQL = "SELECT environment_id AS environmentId, enabled FROM flag_states WHERE flag_id = ?1";
const STATE_SQL = `SELECT s.enabled AS enabled, s.rollout_percentage AS rolloutPercentage FROM flag_states s
  JOIN environments e ON e.id = s.environment_id WHERE s.flag_id = ?1 AND e.project_id = ?2 AND e.slug = ?3`;
const TAKERS_SQL = "SELECT id, events, environments FROM webhooks WHERE project_id = ?1 AND enabled = 1";
const INSERT_EVENT_SQL = "INSERT INTO webhook_events (id, project_id, event, environment, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_DELIVERY_SQL =
  `INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at, created_at, seq)
  VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, (SELECT coalesce(max(seq), 0) + 1 FROM webhook_deliveries))`;

/**
 * The outbox's statements on one connection (a write's transaction): raw, prepared once per
 * connection (bun:sqlite caches them), as they run inside every flag and state write.
 */
class SqliteOutboxRows implements OutboxRows {
  constructor(private readonly sqlite: Database) {}

  async environments(projectId: string): Promise<{ id: string; slug: string }[]> {
    return this.sqlite.query<{ id: string; slug: string }, [string]>(ENVIRONMENTS_SQL).all(projectId);
  }

  async enabledIn(flagId: string): Promise<Map<string, boolean>> {
    const rows = this.sqlite.query<{ environmentId: string; enabled: number }, [string]>(STATES_SQL).all(flagId);
    return new Map(rows.map((r) => [r.environmentId, r.enabled === 1]));
  }

  async state(flagId: string, projectId: string, environment: string): Promise<StateValues | undefined> {
    const row = this.sqlite.query<{ enabled: number; rolloutPercentage: number | null }, [string, string, string]>(STATE_SQL).get(flagId, projectId, environment);
    return row ? { enabled: row.enabled === 1, rolloutPercentage: row.rolloutPercentage } : undefined;
  }

  async takers(projectId: string): Promise<Taker[]> {
    return this.sqlite
      .query<{ id: string; events: string; environments: string }, [string]>(TAKERS_SQL)
      .all(projectId)
      .map((w) => ({ id: w.id, events: JSON.parse(w.events) as string[], environments: JSON.parse(w.environments) as string[] }));
  }

  async recordEvents(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, takers: readonly Taker[]): Promise<string[]> {
    const queued: string[] = [];
    if (takers.length === 0) return queued;
    const insertEvent = this.sqlite.query(INSERT_EVENT_SQL);
    const insertDelivery = this.sqlite.query(INSERT_DELIVERY_SQL);
    const ms = Date.parse(at);
    for (const c of changes) {
      const matching = takers.filter((w) => w.events.includes(c.event) && (w.environments.length === 0 || w.environments.includes(c.environment)));
      if (matching.length === 0) continue;
      const id = sortableId("evt", ms);
      insertEvent.run(id, project.id, c.event, c.environment, eventPayload(id, project.slug, c, at), at);
      for (const w of matching) {
        insertDelivery.run(sortableId("del", ms), w.id, id, at);
        queued.push(w.id);
      }
    }
    return queued;
  }
}

/** A delivery row, pending and due at `at`. */
function newDelivery(webhookId: string, eventId: string, at: string, redeliveryOf: string | null): typeof webhookDeliveries.$inferInsert {
  return {
    id: sortableId("del", Date.parse(at)),
    webhookId,
    eventId,
    status: "pending",
    attempts: 0,
    nextAttemptAt: at,
    lastAttemptAt: null,
    responseStatus: null,
    error: null,
    durationMs: null,
    redeliveryOf,
    createdAt: at,
  };
}

// ---- the delivery queue (dispatcher.ts) ------------------------------------------------------

/** Where and how a webhook's deliveries are sent. */
export interface DeliveryTarget {
  url: string;
  secret: string;
}

/** A delivery claimed for an attempt: what the attempt needs. */
export interface ClaimedDelivery {
  id: string;
  attempts: number;
  event: string;
  payload: string;
}

/** An attempt's outcome, as stored on its delivery. */
export interface AttemptOutcome {
  id: string;
  /** `pending`: a retry is due at `nextAttemptAt`. */
  status: "succeeded" | "failed" | "pending";
  attempts: number;
  lastAttemptAt: string;
  nextAttemptAt: string | null;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * The database as the sender's queue (dispatcher.ts), on the sender's own connection (the
 * background thread's, in the server). Deliveries are named by their id; times are ISO texts.
 * `claim` is the one call that takes a delivery for an attempt: with one sender (SQLite) a read
 * of the row if it is still pending and due; with several, where a lease or `FOR UPDATE SKIP
 * LOCKED` keeps any other sender off it.
 */
export interface DeliveryQueue {
  /** The enabled webhooks' ids: the ones a pass over everything looks at. */
  enabledWebhooks(): Promise<string[]>;
  /** Ids of the webhook's pending deliveries due at `now`, oldest due first, `limit` at most. */
  due(webhookId: string, now: string, limit: number): Promise<string[]>;
  /** Where the webhook's deliveries go; null when it is disabled or gone. */
  target(webhookId: string): Promise<DeliveryTarget | null>;
  /** The delivery with what an attempt needs, if it is still pending and due at `now`; else null. */
  claim(deliveryId: string, now: string): Promise<ClaimedDelivery | null>;
  /** Outcomes stored together (one transaction); a delivery no longer pending (deleted, settled) is left as it is. */
  record(outcomes: readonly AttemptOutcome[]): Promise<void>;
  /** When an enabled webhook's next pending delivery comes due after `now`, if any. */
  nextDue(now: string): Promise<string | null>;
  /**
   * The daily clean-up: deliveries older than RETENTION_DAYS before `now` (ms), then events no
   * delivery refers to (a redelivery keeps its event). Returns how many of each went.
   */
  prune(now: number): Promise<{ deliveries: number; events: number }>;
}

const ENABLED_SQL = "SELECT id FROM webhooks WHERE enabled = 1 ORDER BY id";
/** One index seek each (webhook_id, status, next_attempt_at). */
const NEXT_DUE_SQL = `
  SELECT MIN(d.next_attempt_at) AS at FROM webhooks w
  JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at > ?1
  WHERE w.enabled = 1`;
/**
 * A seek and a short walk on the (webhook_id, status, next_attempt_at, id) index alone, however
 * long the backlog of this or any other webhook. The first rows are often held by the sender
 * already (attempting, or outcome not stored yet): they cost an index entry each here, not a payload.
 */
const DUE_SQL = `
  SELECT id FROM webhook_deliveries
  WHERE webhook_id = ?1 AND status = 'pending' AND next_attempt_at <= ?2
  ORDER BY next_attempt_at, id
  LIMIT ?3`;
const TARGET_SQL = "SELECT url, secret FROM webhooks WHERE id = ?1 AND enabled = 1";
const CLAIM_SQL = `
  SELECT d.id, d.attempts, e.event, e.payload
  FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
  WHERE d.id = ?1 AND d.status = 'pending' AND d.next_attempt_at <= ?2`;
/** `status = 'pending'` in the condition: never undo a deletion's cascade or revive a row. */
const RECORD_SQL = `
  UPDATE webhook_deliveries
  SET status = ?1, attempts = ?2, last_attempt_at = ?3, next_attempt_at = ?4, response_status = ?5, error = ?6, duration_ms = ?7
  WHERE id = ?8 AND status = 'pending'`;

/** Deliveries older than this are removed by the daily job, and events no delivery refers to. */
export const RETENTION_DAYS = 30;
const PRUNE_CHUNK = 1000;
const PRUNE_DELIVERIES_SQL = "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE created_at < ?1 LIMIT ?2)";
const PRUNE_EVENTS_SQL = `
  DELETE FROM webhook_events WHERE id IN (
    SELECT id FROM webhook_events e
    WHERE created_at < ?1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
    LIMIT ?2)`;

/** The queue on one SQLite connection: raw statements, prepared once (bun:sqlite caches them). */
export class SqliteDeliveryQueue implements DeliveryQueue {
  constructor(private readonly sqlite: Database) {}

  async enabledWebhooks(): Promise<string[]> {
    return this.sqlite.query<{ id: string }, []>(ENABLED_SQL).all().map((r) => r.id);
  }

  async due(webhookId: string, now: string, limit: number): Promise<string[]> {
    return this.sqlite.query<{ id: string }, [string, string, number]>(DUE_SQL).all(webhookId, now, limit).map((r) => r.id);
  }

  async target(webhookId: string): Promise<DeliveryTarget | null> {
    return this.sqlite.query<DeliveryTarget, [string]>(TARGET_SQL).get(webhookId);
  }

  async claim(deliveryId: string, now: string): Promise<ClaimedDelivery | null> {
    return this.sqlite.query<ClaimedDelivery, [string, string]>(CLAIM_SQL).get(deliveryId, now);
  }

  async record(outcomes: readonly AttemptOutcome[]): Promise<void> {
    const record = this.sqlite.query(RECORD_SQL);
    this.sqlite
      .transaction(() => {
        for (const o of outcomes) record.run(o.status, o.attempts, o.lastAttemptAt, o.nextAttemptAt, o.responseStatus, o.error, o.durationMs, o.id);
      })
      .immediate();
  }

  async nextDue(now: string): Promise<string | null> {
    return this.sqlite.query<{ at: string | null }, [string]>(NEXT_DUE_SQL).get(now)?.at ?? null;
  }

  /** In chunks of PRUNE_CHUNK rows, each its own short transaction: a month of deliveries is never one long hold on the write lock. */
  async prune(now: number): Promise<{ deliveries: number; events: number }> {
    const cutoff = iso(now - RETENTION_DAYS * 86_400_000);
    const drop = (sql: string) => {
      for (let total = 0; ; ) {
        const n = this.sqlite.run(sql, [cutoff, PRUNE_CHUNK]).changes;
        total += n;
        if (n < PRUNE_CHUNK) return total;
      }
    };
    return { deliveries: drop(PRUNE_DELIVERIES_SQL), events: drop(PRUNE_EVENTS_SQL) };
  }
}
