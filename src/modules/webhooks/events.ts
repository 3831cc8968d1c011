/**
 * The outbox (decisions §10): flag and state writes call `recordEvents` inside their own
 * transaction, so an event and its deliveries are stored exactly when the change is. Each
 * event gets one id and one payload text, which every delivery of it (each webhook, each
 * retry, each redelivery) sends and signs unchanged. After the commit the writer calls
 * `ctx.deliveries.kick()` to send at once.
 *
 * An event is stored only when at least one enabled webhook of the project takes it (its
 * `events` holds the name and its `environments` is empty or holds the environment).
 */
import type { Store } from "../../db/client";
import { iso, type Clock } from "../../lib/clock";
import type { webhookDeliveries } from "../../db/schema";
import { sortableId } from "../../lib/ids";
import type { EventName } from "./model";

/** One event in one environment. */
export interface FlagChange {
  event: EventName;
  environment: string;
  flagKey: string;
  previous: boolean;
  current: boolean;
  /**
   * `rolloutPercentage` before and after, carried by the flag.updated of a rollout-only state
   * change alone (additive to `enabled`; every other event's payload stays as it was).
   */
  rollout?: { previous: number | null; current: number | null };
}

/**
 * A flag-level event (created, updated by PATCH, deleted) once per environment of the
 * project, with that environment's state: `enabledBefore` maps environment id to its enabled
 * (absent: disabled). `current` is the state after the change (false for every environment
 * once the flag is deleted).
 */
export function flagLevelChanges(
  event: "flag.created" | "flag.updated" | "flag.deleted",
  environments: readonly { id: string; slug: string }[],
  flagKey: string,
  enabledBefore: ReadonlyMap<string, boolean>,
): FlagChange[] {
  return environments.map((env) => {
    const previous = enabledBefore.get(env.id) ?? false;
    return { event, environment: env.slug, flagKey, previous, current: event === "flag.deleted" ? false : previous };
  });
}

interface StateValues {
  enabled: boolean;
  rolloutPercentage: number | null;
}

/**
 * The event of a state PUT, or null: enabled turned on or off wins (flag.enabled,
 * flag.disabled, whatever happened to the rollout); a change of the rollout alone is
 * flag.updated, which carries the rollout before and after; no change, no event.
 */
export function stateChange(environment: string, flagKey: string, before: StateValues, after: StateValues): FlagChange | null {
  const change = { environment, flagKey, previous: before.enabled, current: after.enabled };
  if (before.enabled !== after.enabled) return { event: after.enabled ? "flag.enabled" : "flag.disabled", ...change };
  if (before.rolloutPercentage === after.rolloutPercentage) return null;
  return { event: "flag.updated", ...change, rollout: { previous: before.rolloutPercentage, current: after.rolloutPercentage } };
}

/**
 * Stores the events and one pending delivery per matching enabled webhook, due at once. Must
 * run inside the transaction of the change. Returns the webhook of each delivery queued, for
 * `ctx.deliveries.kick()` after the commit.
 */
export function recordEvents(store: Store, project: { id: string; slug: string }, changes: readonly FlagChange[], at: string): string[] {
  const queued: string[] = [];
  if (changes.length === 0) return queued;
  // Raw statements, prepared once per connection (bun:sqlite caches them): this runs inside
  // every flag and state write.
  const hooks = store.sqlite
    .query<{ id: string; events: string; environments: string }, [string]>(HOOKS_SQL)
    .all(project.id)
    .map((w) => ({ id: w.id, events: JSON.parse(w.events) as string[], environments: JSON.parse(w.environments) as string[] }));
  if (hooks.length === 0) return queued;
  const insertEvent = store.sqlite.query(INSERT_EVENT_SQL);
  const ms = Date.parse(at);
  const insertDelivery = store.sqlite.query(INSERT_DELIVERY_SQL);
  for (const c of changes) {
    const takers = hooks.filter((w) => w.events.includes(c.event) && (w.environments.length === 0 || w.environments.includes(c.environment)));
    if (takers.length === 0) continue;
    const id = sortableId("evt", ms);
    const payload = JSON.stringify({
      id,
      event: c.event,
      projectSlug: project.slug,
      environment: c.environment,
      timestamp: at,
      data: {
        flagKey: c.flagKey,
        previousState: c.rollout ? { enabled: c.previous, rolloutPercentage: c.rollout.previous } : { enabled: c.previous },
        currentState: c.rollout ? { enabled: c.current, rolloutPercentage: c.rollout.current } : { enabled: c.current },
      },
    });
    insertEvent.run(id, project.id, c.event, c.environment, payload, at);
    for (const w of takers) {
      insertDelivery.run(sortableId("del", ms), w.id, id, at);
      queued.push(w.id);
    }
  }
  return queued;
}

const HOOKS_SQL = "SELECT id, events, environments FROM webhooks WHERE project_id = ?1 AND enabled = 1";
const INSERT_EVENT_SQL = "INSERT INTO webhook_events (id, project_id, event, environment, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_DELIVERY_SQL =
  "INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4)";

/** A delivery row, pending and due at `at`. */
export function newDelivery(webhookId: string, eventId: string, at: string, redeliveryOf: string | null): typeof webhookDeliveries.$inferInsert {
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

/** Deliveries older than this are removed by the daily job, and events no delivery refers to. */
export const RETENTION_DAYS = 30;
const PRUNE_CHUNK = 1000;
const PRUNE_DELIVERIES_SQL =
  "DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries WHERE created_at < ?1 LIMIT ?2)";
const PRUNE_EVENTS_SQL = `
  DELETE FROM webhook_events WHERE rowid IN (
    SELECT rowid FROM webhook_events e
    WHERE created_at < ?1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
    LIMIT ?2)`;

/**
 * The daily clean-up: deliveries older than RETENTION_DAYS, then events no delivery refers to
 * (a redelivery keeps its event). In chunks of PRUNE_CHUNK rows, each its own short
 * transaction: a month of deliveries is never one long hold on the write lock.
 */
export function pruneDeliveries(store: Store & { clock: Clock }): { deliveries: number; events: number } {
  const cutoff = iso(store.clock.now() - RETENTION_DAYS * 86_400_000);
  const drop = (sql: string) => {
    for (let total = 0; ; ) {
      const n = store.sqlite.run(sql, [cutoff, PRUNE_CHUNK]).changes;
      total += n;
      if (n < PRUNE_CHUNK) return total;
    }
  };
  return { deliveries: drop(PRUNE_DELIVERIES_SQL), events: drop(PRUNE_EVENTS_SQL) };
}
