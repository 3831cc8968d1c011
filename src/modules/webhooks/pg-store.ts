/**
 * Webhooks on PostgreSQL (store.ts has the interfaces and the SQLite implementations):
 * `PgWebhookStore` with its `OutboxRows` on a write's transaction, and `PgDeliveryQueue`, the
 * sender's queue shared by every node.
 *
 * Several nodes send from one table, so `claim` is exclusive: a conditional UPDATE ... RETURNING
 * takes the delivery only if it is still pending, due and not claimed, and sets its
 * `claimed_until` `leaseMs` ahead (`next_attempt_at` keeps the time it was due, as the API shows
 * it on SQLite). No other node's `due` or `claim` sees it until the claim runs out; the outcome
 * (`record`) clears it. A node that dies mid-attempt leaves it pending: another sends it once the
 * claim is over (at-least-once, as on SQLite after a crash). Attempt-now leaves a claimed
 * delivery as it is: its attempt is in flight.
 */
import { and, asc, desc, eq, inArray, isNull, lt, lte, gt, min, notExists, or, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx, Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { environments, flagStates, projects, webhookDeliveries, webhookEvents, webhooks } from "../../db/pg/schema";
import { iso } from "../../lib/clock";
import { sortableId } from "../../lib/ids";
import { eventPayload, type FlagChange, type StateValues } from "./events";
import {
  RETENTION_DAYS,
  recordOf,
  type AttemptOutcome,
  type ClaimedDelivery,
  type DeliveryQueue,
  type DeliveryRecord,
  type DeliveryTarget,
  type OutboxRows,
  type StoredWebhook,
  type Taker,
  type WebhookRecord,
  type WebhookStore,
} from "./store";
import type { DeliveryStatus } from "./model";

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

async function webhookIn(db: PgQueries, webhookId: string): Promise<StoredWebhook | undefined> {
  const [row] = await db.select(WEBHOOK_COLUMNS).from(webhooks).innerJoin(projects, eq(projects.id, webhooks.projectId)).where(eq(webhooks.id, webhookId));
  return row;
}

/** The delivery, its row locked to the end of the transaction (redeliver, attemptNow). */
async function deliveryIn(db: PgQueries, deliveryId: string): Promise<DeliveryRecord | undefined> {
  const [row] = await db
    .select(DELIVERY_COLUMNS)
    .from(webhookDeliveries)
    .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
    .where(eq(webhookDeliveries.id, deliveryId))
    .for("update", { of: webhookDeliveries });
  return row;
}

export class PgWebhookStore implements WebhookStore {
  constructor(private readonly log: PgChangeLog) {}

  find(webhookId: string): Promise<StoredWebhook | undefined> {
    return webhookIn(this.log.db, webhookId);
  }

  async list(projectId: string): Promise<WebhookRecord[]> {
    const rows = await this.log.db
      .select(WEBHOOK_COLUMNS)
      .from(webhooks)
      .innerJoin(projects, eq(projects.id, webhooks.projectId))
      .where(eq(webhooks.projectId, projectId))
      .orderBy(asc(webhooks.createdAt), asc(webhooks.seq));
    return rows.map(recordOf);
  }

  async create(author: Author, webhook: StoredWebhook, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = webhook;
    await this.log.commit(author, async (tx) => {
      await pgTx(tx).insert(webhooks).values(row); // `seq` from its identity
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => Written<StoredWebhook>): Promise<StoredWebhook> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await webhookIn(db, webhookId));
      if (written.changes.length > 0) {
        const { url, events, environments, secret, description, enabled, updatedAt } = written.result;
        await db.update(webhooks).set({ url, events, environments, secret, description, enabled, updatedAt }).where(eq(webhooks.id, webhookId));
      }
      return written;
    });
  }

  remove(author: Author, webhookId: string, decide: (current: StoredWebhook | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const change = decide(await webhookIn(db, webhookId));
      // Its deliveries go with it (foreign key cascade); an attempt in flight finishes unrecorded.
      await db.delete(webhooks).where(eq(webhooks.id, webhookId));
      return { result: undefined, changes: [change] };
    });
  }

  deliveries(webhookId: string, query: { limit: number; status?: DeliveryStatus }): Promise<DeliveryRecord[]> {
    const where = [eq(webhookDeliveries.webhookId, webhookId)];
    if (query.status) where.push(eq(webhookDeliveries.status, query.status));
    return this.log.db
      .select(DELIVERY_COLUMNS)
      .from(webhookDeliveries)
      .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
      .where(and(...where))
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.seq))
      .limit(query.limit);
  }

  redeliver(deliveryId: string, decide: (original: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string): Promise<DeliveryRecord> {
    return this.log.db.transaction(async (db) => {
      const original = await deliveryIn(db, deliveryId);
      const at = decide(original, original && (await webhookIn(db, original.webhookId)));
      const id = sortableId("del", Date.parse(at));
      const row = { id, webhookId: original!.webhookId, eventId: original!.eventId, status: "pending" as const, attempts: 0, nextAttemptAt: at, redeliveryOf: deliveryId, createdAt: at };
      await db.insert(webhookDeliveries).values(row);
      return { ...row, event: original!.event, lastAttemptAt: null, responseStatus: null, error: null, durationMs: null };
    });
  }

  attemptNow(deliveryId: string, decide: (delivery: DeliveryRecord | undefined, webhook: StoredWebhook | undefined) => string | null): Promise<DeliveryRecord> {
    return this.log.db.transaction(async (db) => {
      const delivery = await deliveryIn(db, deliveryId);
      const due = decide(delivery, delivery && (await webhookIn(db, delivery.webhookId)));
      if (due === null) return delivery!;
      await db.update(webhookDeliveries).set({ nextAttemptAt: due }).where(eq(webhookDeliveries.id, deliveryId));
      return { ...delivery!, nextAttemptAt: due };
    });
  }

  outboxRows(tx: Tx): OutboxRows {
    return new PgOutboxRows(pgTx(tx));
  }
}

/** The outbox's reads and writes on a write's transaction. */
class PgOutboxRows implements OutboxRows {
  constructor(private readonly db: PgQueries) {}

  environments(projectId: string): Promise<{ id: string; slug: string }[]> {
    return this.db.select({ id: environments.id, slug: environments.slug }).from(environments).where(eq(environments.projectId, projectId)).orderBy(asc(environments.seq));
  }

  async enabledIn(flagId: string): Promise<Map<string, boolean>> {
    const rows = await this.db.select({ environmentId: flagStates.environmentId, enabled: flagStates.enabled }).from(flagStates).where(eq(flagStates.flagId, flagId));
    return new Map(rows.map((r) => [r.environmentId, r.enabled]));
  }

  async state(flagId: string, projectId: string, environment: string): Promise<StateValues | undefined> {
    const [row] = await this.db
      .select({ enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
      .from(flagStates)
      .innerJoin(environments, eq(environments.id, flagStates.environmentId))
      .where(and(eq(flagStates.flagId, flagId), eq(environments.projectId, projectId), eq(environments.slug, environment)));
    return row;
  }

  takers(projectId: string): Promise<Taker[]> {
    return this.db.select({ id: webhooks.id, events: webhooks.events, environments: webhooks.environments }).from(webhooks).where(and(eq(webhooks.projectId, projectId), eq(webhooks.enabled, true)));
  }

  /** Two statements whatever the number of events: the events, then their deliveries (`seq` numbered in that order). */
  async recordEvents(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, takers: readonly Taker[]): Promise<string[]> {
    const queued: string[] = [];
    if (takers.length === 0) return queued;
    const ms = Date.parse(at);
    const events: (typeof webhookEvents.$inferInsert)[] = [];
    const deliveries: (typeof webhookDeliveries.$inferInsert)[] = [];
    for (const c of changes) {
      const matching = takers.filter((w) => w.events.includes(c.event) && (w.environments.length === 0 || w.environments.includes(c.environment)));
      if (matching.length === 0) continue;
      const id = sortableId("evt", ms);
      events.push({ id, projectId: project.id, event: c.event, environment: c.environment, payload: eventPayload(id, project.slug, c, at), createdAt: at });
      for (const w of matching) {
        deliveries.push({ id: sortableId("del", ms), webhookId: w.id, eventId: id, status: "pending", attempts: 0, nextAttemptAt: at, createdAt: at });
        queued.push(w.id);
      }
    }
    if (events.length > 0) {
      await this.db.insert(webhookEvents).values(events);
      await this.db.insert(webhookDeliveries).values(deliveries);
    }
    return queued;
  }
}

/** How long a claim keeps a delivery from every other sender by default (attempt and outcome store well within it). */
export const CLAIM_LEASE_MS = 60_000;

/**
 * The claim's length for an attempt time limit (SVC_WEBHOOK_TIMEOUT_MS): six attempts' worth, at
 * least the attempt plus 5 s for storing its outcome; 60 s at the default 10 s. How long the
 * deliveries of a node that died stay unsent before another node takes them over.
 */
export const claimLeaseMs = (attemptTimeoutMs: number): number => Math.max(6 * attemptTimeoutMs, attemptTimeoutMs + 5_000);
const PRUNE_CHUNK = 1000;
/** Ids in bytewise order, as SQLite orders them (sortable ids made in one ms follow each other only so), whatever the database's locale. */
const bytewise = (column: typeof webhooks.id | typeof webhookDeliveries.id) => asc(sql`${column} COLLATE "C"`);

/** Not held by a node's claim (none, or one that has run out). */
const unclaimed = (now: string) => or(isNull(webhookDeliveries.claimedUntil), lte(webhookDeliveries.claimedUntil, now));

/** The sender's queue on the pool, shared by every node (see the top of this file for `claim`). */
export class PgDeliveryQueue implements DeliveryQueue {
  /** `leaseMs`: longer than an attempt (SVC_WEBHOOK_TIMEOUT_MS) and the store of its outcome. */
  constructor(
    private readonly db: PgQueries,
    private readonly leaseMs = CLAIM_LEASE_MS,
  ) {}

  async enabledWebhooks(): Promise<string[]> {
    const rows = await this.db.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.enabled, true)).orderBy(bytewise(webhooks.id));
    return rows.map((r) => r.id);
  }

  /** On the (webhook_id, status, next_attempt_at, id) index. */
  async due(webhookId: string, now: string, limit: number): Promise<string[]> {
    const rows = await this.db
      .select({ id: webhookDeliveries.id })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.webhookId, webhookId), eq(webhookDeliveries.status, "pending"), lte(webhookDeliveries.nextAttemptAt, now), unclaimed(now)))
      .orderBy(asc(webhookDeliveries.nextAttemptAt), bytewise(webhookDeliveries.id))
      .limit(limit);
    return rows.map((r) => r.id);
  }

  async target(webhookId: string): Promise<DeliveryTarget | null> {
    const [row] = await this.db.select({ url: webhooks.url, secret: webhooks.secret }).from(webhooks).where(and(eq(webhooks.id, webhookId), eq(webhooks.enabled, true)));
    return row ?? null;
  }

  /** One conditional UPDATE: of two nodes claiming one delivery, the second waits for the first's row lock, then finds it no longer due. */
  async claim(deliveryId: string, now: string): Promise<ClaimedDelivery | null> {
    const [row] = await this.db
      .update(webhookDeliveries)
      .set({ claimedUntil: iso(Date.parse(now) + this.leaseMs) })
      .from(webhookEvents)
      .where(and(eq(webhookEvents.id, webhookDeliveries.eventId), eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending"), lte(webhookDeliveries.nextAttemptAt, now), unclaimed(now)))
      .returning({ id: webhookDeliveries.id, attempts: webhookDeliveries.attempts, event: webhookEvents.event, payload: webhookEvents.payload });
    return row ?? null;
  }

  /** `status = 'pending'` in the condition: never undo a deletion's cascade or revive a row. */
  async record(outcomes: readonly AttemptOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    await this.db.transaction(async (db) => {
      for (const { id, ...o } of outcomes) {
        await db
          .update(webhookDeliveries)
          .set({ status: o.status, attempts: o.attempts, lastAttemptAt: o.lastAttemptAt, nextAttemptAt: o.nextAttemptAt, responseStatus: o.responseStatus, error: o.error, durationMs: o.durationMs, claimedUntil: null })
          .where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.status, "pending")));
      }
    });
  }

  /** The next time a delivery becomes takeable: its retry comes due, or the claim on it runs out. */
  async nextDue(now: string): Promise<string | null> {
    const takeable = sql<string>`greatest(${webhookDeliveries.nextAttemptAt}, coalesce(${webhookDeliveries.claimedUntil}, ${webhookDeliveries.nextAttemptAt}))`;
    const [row] = await this.db
      .select({ at: min(takeable) })
      .from(webhooks)
      .innerJoin(webhookDeliveries, and(eq(webhookDeliveries.webhookId, webhooks.id), eq(webhookDeliveries.status, "pending"), gt(takeable, now)))
      .where(eq(webhooks.enabled, true));
    return row?.at ?? null;
  }

  /** In chunks of PRUNE_CHUNK rows, each its own statement: a month of deliveries is never one long transaction. */
  async prune(now: number): Promise<{ deliveries: number; events: number }> {
    const cutoff = iso(now - RETENTION_DAYS * 86_400_000);
    const drop = async (chunk: () => Promise<unknown[]>) => {
      for (let total = 0; ; ) {
        const n = (await chunk()).length;
        total += n;
        if (n < PRUNE_CHUNK) return total;
      }
    };
    const { db } = this;
    const deliveries = await drop(() =>
      db
        .delete(webhookDeliveries)
        .where(inArray(webhookDeliveries.id, db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(lt(webhookDeliveries.createdAt, cutoff)).limit(PRUNE_CHUNK)))
        .returning({ id: webhookDeliveries.id }),
    );
    const unreferenced = notExists(db.select({ one: sql`1` }).from(webhookDeliveries).where(eq(webhookDeliveries.eventId, webhookEvents.id)));
    const events = await drop(() =>
      db
        .delete(webhookEvents)
        .where(inArray(webhookEvents.id, db.select({ id: webhookEvents.id }).from(webhookEvents).where(and(lt(webhookEvents.createdAt, cutoff), unreferenced)).limit(PRUNE_CHUNK)))
        .returning({ id: webhookEvents.id }),
    );
    return { deliveries, events };
  }
}
