/**
 * The outbox (decisions §10): webhook events derived from the change log's flag and state
 * entries, in the transaction of the change (`Outbox`), so an event and its deliveries are
 * stored exactly when the change is. Each event gets one id and one payload text, which every
 * delivery of it (each webhook, each retry, each redelivery) sends and signs unchanged.
 *
 * An event is stored only when at least one enabled webhook of the project takes it (its
 * `events` holds the name and its `environments` is empty or holds the environment).
 */
import type { Database } from "bun:sqlite";
import type { ChangeEntry } from "../../changes/entry";
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
 * The outbox as a participant of every write's transaction (src/changes/sqlite.ts): the flag
 * and flag-state entries of a commit become webhook events and one pending delivery per
 * matching enabled webhook, due at once, stored in that same transaction (at-least-once: an
 * event exists exactly when its change does). After the commit, as a subscriber, it kicks the
 * sender for the webhooks it queued deliveries for.
 */
export class Outbox {
  /** The webhooks the transaction under way queued deliveries for: kicked after its commit. */
  private queued: string[] = [];

  constructor(
    private readonly sqlite: Database,
    private readonly deliveries: { kick(webhookIds?: readonly string[]): void | Promise<void> },
  ) {}

  /** In the transaction: the events of the entries, stored with their deliveries. */
  readonly participant = (entries: readonly ChangeEntry[]): void => {
    this.queued = [];
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      // Most projects have no webhook: then nothing more is read.
      const hooks = webhooksOf(this.sqlite, entry.project.id);
      if (hooks.length === 0) continue;
      const changes = this.flagChanges(entry);
      if (changes.length > 0) this.queued.push(...recordEvents(this.sqlite, entry.project, changes, entry.at, hooks));
    }
  };

  /** After the commit: the sender takes the deliveries at once. */
  readonly subscriber = (): void | Promise<void> => {
    const queued = this.queued;
    this.queued = [];
    if (queued.length > 0) return this.deliveries.kick(queued);
  };

  /** The events of one entry (webhooks/model.ts EVENTS), read in its transaction, after its write. */
  private flagChanges(entry: ChangeEntry): FlagChange[] {
    const flagKey = entry.resource.key!;
    const projectId = entry.project!.id;
    if (entry.resource.type === "flag_state") {
      const env = entry.environment!;
      const row = this.sqlite.query<{ enabled: number; rolloutPercentage: number | null }, [string, string, string]>(STATE_SQL).get(entry.resource.id, projectId, env);
      const now: StateValues = row ? { enabled: row.enabled === 1, rolloutPercentage: row.rolloutPercentage } : UNSET;
      // A field the entry does not name kept its value; one it names was `before` (null: unset).
      const before = { ...now };
      for (const field of ["enabled", "rolloutPercentage"] as const) {
        if (field in entry.changes) (before as Record<string, unknown>)[field] = entry.changes[field]!.before ?? UNSET[field];
      }
      const change = stateChange(env, flagKey, before, now);
      return change ? [change] : [];
    }
    const environments = this.sqlite.query<{ id: string; slug: string }, [string]>(ENVIRONMENTS_SQL).all(projectId);
    if (entry.action === "deleted") {
      // The flag's states went with it: its entry holds them, by environment slug.
      const states = (entry.changes.states?.before ?? {}) as Record<string, StateValues>;
      const before = new Map(environments.map((e) => [e.id, states[e.slug]?.enabled ?? false]));
      return flagLevelChanges("flag.deleted", environments, flagKey, before);
    }
    const enabled = new Map(this.sqlite.query<{ environmentId: string; enabled: number }, [string]>(STATES_SQL).all(entry.resource.id).map((r) => [r.environmentId, r.enabled === 1]));
    return flagLevelChanges(entry.action === "created" ? "flag.created" : "flag.updated", environments, flagKey, enabled);
  }
}

interface Hook {
  id: string;
  events: string[];
  environments: string[];
}

/** The project's enabled webhooks. Raw statements, prepared once per connection (bun:sqlite caches them): this runs inside every flag and state write. */
function webhooksOf(sqlite: Database, projectId: string): Hook[] {
  return sqlite
    .query<{ id: string; events: string; environments: string }, [string]>(HOOKS_SQL)
    .all(projectId)
    .map((w) => ({ id: w.id, events: JSON.parse(w.events) as string[], environments: JSON.parse(w.environments) as string[] }));
}

const UNSET: StateValues = { enabled: false, rolloutPercentage: null };
const ENVIRONMENTS_SQL = "SELECT id, slug FROM environments WHERE project_id = ?1 ORDER BY rowid";
const STATES_SQL = "SELECT environment_id AS environmentId, enabled FROM flag_states WHERE flag_id = ?1";
const STATE_SQL = `SELECT s.enabled AS enabled, s.rollout_percentage AS rolloutPercentage FROM flag_states s
  JOIN environments e ON e.id = s.environment_id WHERE s.flag_id = ?1 AND e.project_id = ?2 AND e.slug = ?3`;

/**
 * Stores the events and one pending delivery per matching enabled webhook, due at once. Runs
 * inside the transaction of the change. Returns the webhook of each delivery queued.
 */
export function recordEvents(
  sqlite: Database,
  project: { id: string; slug: string },
  changes: readonly FlagChange[],
  at: string,
  hooks: readonly Hook[] = webhooksOf(sqlite, project.id),
): string[] {
  const queued: string[] = [];
  if (hooks.length === 0) return queued;
  const insertEvent = sqlite.query(INSERT_EVENT_SQL);
  const ms = Date.parse(at);
  const insertDelivery = sqlite.query(INSERT_DELIVERY_SQL);
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
