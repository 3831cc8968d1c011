/**
 * All SQL of the change-event queue (table `change_events`): the webhook payload of each flag
 * change of a project that has a reader (an enabled plugin or integration), and its actor.
 * `ChangeEventStore` is what its readers do (asynchronous: a PostgreSQL implementation stands
 * behind the same interface); `ChangeEventWrites` what the queue writes in a flag write's
 * transaction. `SqliteChangeEventStore` implements both, synchronous SQLite inside, on whichever
 * connection it is given: the request thread's (writes in the change's transaction; the plugin
 * host's reads) or the integrations thread's (the sender). Each reader keeps its own
 * `event_position` in its own table.
 */
import type { Database } from "bun:sqlite";
import type { Actor } from "../../changes/entry";
import { sortableId } from "../../lib/ids";
import { eventPayload, type FlagChange } from "../webhooks/events";

/** One queued event: its position, the webhook payload text, the actor as JSON text. */
export interface QueuedEvent {
  position: number;
  payload: string;
  actor: string;
}

/**
 * The newest position of the queue, even once pruned: the highest position in the table, or the
 * high-water mark a prune stored before it removed the newest rows (positions are never reused:
 * AUTOINCREMENT here, a sequence in PostgreSQL).
 */
const HIGH_WATER_KEY = "change_events.position";
const LATEST_SQL = `SELECT max(coalesce((SELECT max(position) FROM change_events), 0),
  coalesce((SELECT cast(value AS integer) FROM settings WHERE key = '${HIGH_WATER_KEY}'), 0)) AS position`;
/** Before a prune: the newest position kept as the high-water mark (it only moves forward). */
const HIGH_WATER_SQL = `INSERT INTO settings (key, value, updated_at)
  SELECT '${HIGH_WATER_KEY}', cast(position AS text), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM change_events
  WHERE position = (SELECT max(position) FROM change_events)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
  WHERE cast(excluded.value AS integer) > cast(settings.value AS integer)`;
const WANTS_SQL = `SELECT 1 WHERE EXISTS (SELECT 1 FROM plugins WHERE project_id = ?1 AND enabled = 1)
  OR EXISTS (SELECT 1 FROM integrations WHERE project_id = ?1 AND enabled = 1)`;
const INSERT_SQL = "INSERT INTO change_events (project_id, payload, actor) VALUES (?1, ?2, ?3)";
const AFTER_SQL = "SELECT position, payload, actor FROM change_events WHERE project_id = ? AND position > ? ORDER BY position LIMIT ?";
/** Rows every enabled reader of their project is past; every row of a project with none (min() is NULL). */
const PRUNE_SQL = `DELETE FROM change_events WHERE position <= coalesce(
  (SELECT min(p) FROM (
     SELECT event_position AS p FROM plugins WHERE project_id = change_events.project_id AND enabled = 1
     UNION ALL
     SELECT event_position AS p FROM integrations WHERE project_id = change_events.project_id AND enabled = 1)),
  9223372036854775807)`;

/** What the change-event queue writes in a flag write's transaction (queue.ts). */
export interface ChangeEventWrites {
  /** Whether the project has a reader (most have none: then nothing more is done). */
  wants(projectId: string): Promise<boolean>;
  record(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, actor: Actor): Promise<void>;
}

/** What the queue's readers (plugin host, integrations' sender) and its retention do. */
export interface ChangeEventStore {
  /** Where a reader that starts now begins: past everything queued so far (also once pruned). */
  latest(): Promise<number>;
  /** The project's events after `position`, oldest first. */
  after(projectId: string, position: number, limit: number): Promise<QueuedEvent[]>;
  /** Removes the events every enabled reader (plugin, integration) of their project is past, and all events of projects with none. */
  prune(): Promise<void>;
}

export class SqliteChangeEventStore implements ChangeEventStore, ChangeEventWrites {
  private readonly latestQuery;
  private readonly highWaterQuery;
  private readonly wantsQuery;
  private readonly insertQuery;
  private readonly afterQuery;
  private readonly pruneQuery;

  constructor(sqlite: Database) {
    this.latestQuery = sqlite.query<{ position: number }, []>(LATEST_SQL);
    this.highWaterQuery = sqlite.query(HIGH_WATER_SQL);
    this.wantsQuery = sqlite.query<unknown, [string]>(WANTS_SQL);
    this.insertQuery = sqlite.query<unknown, [string, string, string]>(INSERT_SQL);
    this.afterQuery = sqlite.query<QueuedEvent, [string, number, number]>(AFTER_SQL);
    this.pruneQuery = sqlite.query(PRUNE_SQL);
  }

  async latest(): Promise<number> {
    return this.latestQuery.get()!.position;
  }

  async wants(projectId: string): Promise<boolean> {
    return this.wantsQuery.get(projectId) !== null;
  }

  async record(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, actor: Actor): Promise<void> {
    const ms = Date.parse(at);
    const who = JSON.stringify({ type: actor.type, id: actor.id, label: actor.label });
    for (const c of changes) this.insertQuery.run(project.id, eventPayload(sortableId("evt", ms), project.slug, c, at), who);
  }

  async after(projectId: string, position: number, limit: number): Promise<QueuedEvent[]> {
    return this.afterQuery.all(projectId, position, limit);
  }

  async prune(): Promise<void> {
    // The mark first: a crash between the two leaves it current, which is harmless.
    this.highWaterQuery.run();
    this.pruneQuery.run();
  }
}
