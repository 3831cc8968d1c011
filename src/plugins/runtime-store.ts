/**
 * What the plugin host reads and writes of the table `plugins` and the change-event queue
 * (../modules/change-events/, shared with integrations): where each plugin is in it, its counters, the status it settled in.
 * `RuntimeStore` is asynchronous (a PostgreSQL implementation stands behind the same interface);
 * `SqliteRuntimeStore` is synchronous SQLite inside (each a single short statement on the main
 * connection). These are the host's runtime
 * bookkeeping, not changes of a resource: no change-log entries (the plugins API writes those).
 */
import type { Database } from "bun:sqlite";
import { SqliteChangeEventStore } from "../modules/change-events/store";

export interface HandedStats {
  handled: number;
  errors: number;
  lastEventAt: string | null;
}

/** What the host settles: `installing` at each start, then `active` or `error`. */
export type RunStatus = { status: "installing" | "active" } | { status: "error"; errorMessage: string };

export interface RuntimeStore {
  /** Ignores a row that is gone or no longer enabled (a disable or removal won the race). */
  setStatus(id: string, s: RunStatus): Promise<void>;
  /** Whether the plugin is to run: its row exists, enabled and not in error (a node taking it over checks; an errored plugin stays stopped). */
  runnable(id: string): Promise<boolean>;
  /** The plugin's stored position in its project's event queue (0 for a row that is gone). */
  positionOf(id: string): Promise<number>;
  /** The evaluation records dropped for the plugin so far, as stored. */
  droppedOf(id: string): Promise<number>;
  eventsAfter(projectId: string, position: number, limit: number): Promise<{ position: number; payload: string }[]>;
  /** The position only moves forward; the counters are added. */
  handed(id: string, position: number, stats: HandedStats): Promise<void>;
  addDropped(id: string, count: number): Promise<void>;
  /** Removes the events every enabled reader (plugin, integration) of their project is past, and all events of projects with none. */
  pruneEvents(): Promise<void>;
}

export class SqliteRuntimeStore implements RuntimeStore {
  private readonly statusQuery;
  private readonly positionQuery;
  private readonly runnableQuery;
  private readonly droppedQuery;
  private readonly events: SqliteChangeEventStore;
  private readonly handedQuery;
  private readonly droppedUpdate;

  constructor(sqlite: Database) {
    this.statusQuery = sqlite.query<unknown, [string, string | null, string]>("UPDATE plugins SET status = ?, error_message = ? WHERE id = ? AND enabled = 1");
    this.positionQuery = sqlite.query<{ p: number }, [string]>("SELECT event_position AS p FROM plugins WHERE id = ?");
    this.runnableQuery = sqlite.query<{ id: string }, [string]>("SELECT id FROM plugins WHERE id = ? AND enabled = 1 AND status <> 'error'");
    this.droppedQuery = sqlite.query<{ d: number }, [string]>("SELECT evaluations_dropped AS d FROM plugins WHERE id = ?");
    this.events = new SqliteChangeEventStore(sqlite);
    this.handedQuery = sqlite.query<unknown, [number, number, number, string | null, string]>(
      `UPDATE plugins SET event_position = max(event_position, ?), events_handled = events_handled + ?, errors = errors + ?,
         last_event_at = coalesce(?, last_event_at) WHERE id = ?`,
    );
    this.droppedUpdate = sqlite.query<unknown, [number, string]>("UPDATE plugins SET evaluations_dropped = evaluations_dropped + ? WHERE id = ?");
  }

  async setStatus(id: string, s: RunStatus): Promise<void> {
    this.statusQuery.run(s.status, s.status === "error" ? s.errorMessage : null, id);
  }

  async runnable(id: string): Promise<boolean> {
    return this.runnableQuery.get(id) !== null;
  }

  async positionOf(id: string): Promise<number> {
    return this.positionQuery.get(id)?.p ?? 0;
  }

  async droppedOf(id: string): Promise<number> {
    return this.droppedQuery.get(id)?.d ?? 0;
  }

  eventsAfter(projectId: string, position: number, limit: number): Promise<{ position: number; payload: string }[]> {
    return this.events.after(projectId, position, limit);
  }

  async handed(id: string, position: number, stats: HandedStats): Promise<void> {
    this.handedQuery.run(position, stats.handled, stats.errors, stats.lastEventAt, id);
  }

  async addDropped(id: string, count: number): Promise<void> {
    if (count > 0) this.droppedUpdate.run(count, id);
  }

  pruneEvents(): Promise<void> {
    return this.events.prune();
  }
}
