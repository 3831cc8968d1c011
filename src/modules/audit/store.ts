/**
 * All SQL of the audit log, behind `AuditStore`: asynchronous at its boundary (a PostgreSQL
 * implementation stands behind the same interface), synchronous SQLite inside. It reads the
 * change log that every store appends to (src/changes/sqlite.ts), and prunes it.
 *
 * Pages are keyset pages on `position` (newest first, `position < before`): a page costs the
 * same deep in the log as at its top, and entries appended meanwhile, which take higher
 * positions, never shift an older page. A resource's history reads the one secondary index
 * (`resource_key`, `position`); every other page walks the table by position, newest first,
 * skipping what its filters leave out (schema.ts `changeLog` says why there is one index only).
 */
import type { Database } from "bun:sqlite";
import type { Action, ActorType, ChangeEntry, Changes, ResourceType } from "../../changes/entry";
import type { Store } from "../../db/client";

export interface AuditFilter {
  /** Only this project's entries (the project route); none: the whole instance. */
  projectId?: string;
  resourceType?: ResourceType;
  resourceKey?: string;
  actorId?: string;
  /**
   * Entries by the user with this e-mail address (lower-case): a user's actor label is the
   * address, which never changes, so a user deleted since is found too.
   */
  actorEmail?: string;
  action?: Action;
  /** `at >= since` (ISO UTC with milliseconds, as stored). */
  since?: string;
  /** `at < until`. */
  until?: string;
  /** Only entries older than this position (a cursor). */
  before?: number;
}

/**
 * Entries a page examines at most when it walks the table (filters without an index): a filter
 * that matches few entries of a long log answers a short page and where to go on, rather than
 * hold the request thread (evaluation's too) for a whole pass (~250 ms on a million entries).
 */
export const SCAN_WINDOW = 10_000;

/**
 * A page: the entries found, newest first, and, when the page came back short because it
 * stopped at its scan window, the position to go on below (null: nothing older to examine).
 */
export interface Page {
  entries: ChangeEntry[];
  resumeBelow: number | null;
}

export interface AuditStore {
  /** Newest first: at most `limit` entries matching `filter`, from at most SCAN_WINDOW walked. */
  page(filter: AuditFilter, limit: number): Promise<Page>;
  /**
   * Removes the entries committed before `cutoff` (ISO), oldest first, at most `batch` rows a
   * transaction (a year of entries is never one long hold on the write lock), but never the
   * newest entry; the number removed.
   */
  prune(cutoff: string, batch: number): Promise<number>;
  /**
   * Oldest first: at most `limit` entries matching `filter` (its `before` and time bounds aside)
   * with a position above `after`, from at most SCAN_WINDOW walked; `scannedTo`: the last
   * position examined (where to go on), null when nothing after `after` is left to examine.
   */
  after(filter: AuditFilter, after: number, limit: number): Promise<{ entries: ChangeEntry[]; scannedTo: number | null }>;
  /**
   * The latest entry of one resource (`environment`: of its state there, else null) that is not
   * a staleness mark of a flag (docs/insights.md): what a 412 says changed it.
   */
  latestChange(resource: { type: ResourceType; id: string; key: string }, environment: string | null): Promise<ChangeEntry | undefined>;
  /** The change log's last position (0: empty). */
  position(): Promise<number>;
}

/** A `change_log` row as SQLite returns it (tests read the log this way too). */
export interface ChangeLogRow {
  position: number;
  id: string;
  at: string;
  actor_type: string;
  actor_id: string;
  actor_label: string;
  request_id: string | null;
  project_id: string | null;
  project_slug: string | null;
  environment: string | null;
  resource_type: string;
  resource_id: string;
  resource_key: string | null;
  action: string;
  changes: string;
}

/** A `change_log` row as Bun's `SQL` returns it from PostgreSQL: `changes` (json) arrives parsed. */
export type PgChangeLogRow = Omit<ChangeLogRow, "changes"> & { changes: Changes };

/** The filters' conditions; `before` is the page's own bound, placed by `page`. */
export const COLUMNS: [Exclude<keyof AuditFilter, "before">, string][] = [
  ["projectId", "project_id = ?"],
  ["resourceType", "resource_type = ?"],
  ["resourceKey", "resource_key = ?"],
  ["actorId", "actor_id = ?"],
  ["actorEmail", "actor_type = 'user' AND actor_label = ?"],
  ["action", "action = ?"],
  ["since", "at >= ?"],
  ["until", "at < ?"],
];

/** The conditions of a filter's fields (not `before`, each page's own bound) and their values, in order. */
export function conditionsOf(filter: AuditFilter): { where: string[]; values: (string | number)[] } {
  const where: string[] = [];
  const values: (string | number)[] = [];
  for (const [field, condition] of COLUMNS) {
    const value = filter[field];
    if (value === undefined) continue;
    where.push(condition);
    values.push(value);
  }
  return { where, values };
}

/** Entries `latestChange` reads back at most to pass over staleness marks (a flag turns stale, then not, a few times at most). */
export const LATEST_LOOKBACK = 20;

export function entryOf(r: ChangeLogRow | PgChangeLogRow): ChangeEntry {
  return {
    position: r.position,
    id: r.id,
    at: r.at,
    actor: { type: r.actor_type as ActorType, id: r.actor_id, label: r.actor_label },
    requestId: r.request_id,
    project: r.project_id === null ? null : { id: r.project_id, slug: r.project_slug! },
    environment: r.environment,
    resource: { type: r.resource_type as ResourceType, id: r.resource_id, key: r.resource_key },
    action: r.action as Action,
    changes: (typeof r.changes === "string" ? JSON.parse(r.changes) : r.changes) as Changes,
  };
}

/**
 * A resource's history names its index (SQLite's `INDEXED BY`) rather than leaving it to the
 * planner: its statistics come from `PRAGMA optimize`, and those taken while the log was small
 * (a first shutdown's, before a million entries) made it scan the whole table for a key's first
 * page (140 ms a request on a million entries, against 1 ms through the index).
 */
const indexFor = (f: AuditFilter) => (f.resourceKey !== undefined ? " INDEXED BY change_log_key" : "");

/** Lets the thread's other work (a worker's webhook kicks) run between two prune batches. */
export const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class SqliteAuditStore implements AuditStore {
  constructor(private readonly store: Store) {}

  private get sqlite(): Database {
    return this.store.sqlite;
  }

  async page(filter: AuditFilter, limit: number): Promise<Page> {
    const { where, values } = conditionsOf(filter);
    const before = filter.before ?? Number.MAX_SAFE_INTEGER;
    const conditions = where.length > 0 ? ` AND ${where.join(" AND ")}` : "";
    // One statement per combination of filters, compiled once (bun:sqlite caches `query` by its text).
    if (filter.resourceKey !== undefined || where.length === 0) {
      // Through the index, or every row a match: the page reads no more than it answers.
      const sql = `SELECT * FROM change_log${indexFor(filter)} WHERE position < ?${conditions} ORDER BY position DESC LIMIT ?`;
      return { entries: this.sqlite.query<ChangeLogRow, (string | number)[]>(sql).all(before, ...values, limit).map(entryOf), resumeBelow: null };
    }
    const sql = `SELECT * FROM (SELECT * FROM change_log WHERE position < ? ORDER BY position DESC LIMIT ${SCAN_WINDOW}) WHERE true${conditions} ORDER BY position DESC LIMIT ?`;
    const entries = this.sqlite.query<ChangeLogRow, (string | number)[]>(sql).all(before, ...values, limit).map(entryOf);
    return { entries, resumeBelow: entries.length < limit ? this.windowEnd(before) : null };
  }

  async position(): Promise<number> {
    return this.sqlite.query<{ p: number }, []>("SELECT coalesce(max(position), 0) AS p FROM change_log").get()!.p;
  }

  async after(filter: AuditFilter, after: number, limit: number): Promise<{ entries: ChangeEntry[]; scannedTo: number | null }> {
    const { where, values } = conditionsOf(filter);
    const conditions = where.length > 0 ? ` AND ${where.join(" AND ")}` : "";
    if (filter.resourceKey !== undefined || where.length === 0) {
      const sql = `SELECT * FROM change_log${indexFor(filter)} WHERE position > ?${conditions} ORDER BY position LIMIT ?`;
      const entries = this.sqlite.query<ChangeLogRow, (string | number)[]>(sql).all(after, ...values, limit).map(entryOf);
      return { entries, scannedTo: entries.length < limit ? null : entries.at(-1)!.position };
    }
    const window = this.sqlite
      .query<{ last: number | null }, [number]>(`SELECT max(position) AS last FROM (SELECT position FROM change_log WHERE position > ?1 ORDER BY position LIMIT ${SCAN_WINDOW})`)
      .get(after)!.last;
    if (window === null) return { entries: [], scannedTo: null };
    const sql = `SELECT * FROM change_log WHERE position > ? AND position <= ?${conditions} ORDER BY position LIMIT ?`;
    const entries = this.sqlite.query<ChangeLogRow, (string | number)[]>(sql).all(after, window, ...values, limit).map(entryOf);
    return { entries, scannedTo: entries.length === limit ? entries.at(-1)!.position : window };
  }

  async latestChange(resource: { type: ResourceType; id: string; key: string }, environment: string | null): Promise<ChangeEntry | undefined> {
    const rows = this.sqlite
      .query<ChangeLogRow, [string, string, string, string | null]>(
        `SELECT * FROM change_log INDEXED BY change_log_key WHERE resource_key = ?1 AND resource_type = ?2 AND resource_id = ?3 AND environment IS ?4 ORDER BY position DESC LIMIT ${LATEST_LOOKBACK}`,
      )
      .all(resource.key, resource.type, resource.id, environment);
    return rows.map(entryOf).find((e) => Object.keys(e.changes).some((field) => field !== "stale"));
  }

  /** The lowest position of a full scan window below `before`, when older entries remain. */
  private windowEnd(before: number): number | null {
    const low = this.sqlite
      .query<{ position: number }, [number]>(`SELECT position FROM change_log WHERE position < ?1 ORDER BY position DESC LIMIT 1 OFFSET ${SCAN_WINDOW - 1}`)
      .get(before)?.position;
    if (low === undefined) return null;
    return this.sqlite.query("SELECT 1 FROM change_log WHERE position < ?1 LIMIT 1").get(low) ? low : null;
  }

  async prune(cutoff: string, batch: number): Promise<number> {
    // The last old entry first, by a read (no index on `at`: one pass over the table, which
    // holds no lock under WAL); then the deletes, each a short write from the oldest on. An
    // entry is judged by its time, wherever it sits (one committed under a clock set back).
    // The newest entry always stays: positions are rowids, and an emptied table would hand
    // out its positions again ("everything after N" would skip the new ones).
    const bounds = this.sqlite
      .query<{ last: number | null; newest: number | null }, [string]>("SELECT (SELECT max(position) FROM change_log WHERE at < ?1) AS last, (SELECT max(position) FROM change_log) AS newest")
      .get(cutoff)!;
    if (bounds.last === null) return 0;
    const last = Math.min(bounds.last, bounds.newest! - 1);
    const remove = this.sqlite.query(
      "DELETE FROM change_log WHERE position IN (SELECT position FROM change_log WHERE position <= ?1 AND at < ?2 ORDER BY position LIMIT ?3)",
    );
    let total = 0;
    for (;;) {
      const n = remove.run(last, cutoff, batch).changes;
      total += n;
      if (n < batch) return total;
      await yieldTurn();
    }
  }
}
