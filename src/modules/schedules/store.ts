/**
 * All SQL of scheduled changes, behind `ScheduleStore` (docs/targeting.md, "Scheduled changes"):
 * asynchronous at its boundary, synchronous SQLite inside.
 *
 * Creating, cancelling and failing a schedule commit through the change log with their entries.
 * Applying one is a flag-state write (the flags store's `putState`, with the schedule's id as
 * the entry's `requestId`): `participant` marks the schedule applied in that write's own
 * transaction, from its entry, as the webhook outbox derives its rows.
 */
import type { Actor, ActorType, Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type Participant, type SqliteChangeLog, type Written } from "../../changes/sqlite";

export const SCHEDULE_STATUSES = ["pending", "applied", "failed", "cancelled"] as const;
export type ScheduleStatus = (typeof SCHEDULE_STATUSES)[number];

/** The state a schedule PUTs: the fields it sets (at least one). */
export interface ScheduledState {
  enabled?: boolean;
  rolloutPercentage?: number | null;
}

export interface Schedule {
  id: string;
  projectId: string;
  flagId: string;
  flagKey: string;
  environmentId: string;
  environment: string;
  at: string;
  state: ScheduledState;
  status: ScheduleStatus;
  createdBy: Actor;
  createdAt: string;
  appliedAt: string | null;
  error: string | null;
}

export interface ScheduleStore {
  /** The change log's participant: a schedule's own flag-state write marks it applied, in its transaction. */
  readonly participant: Participant;
  find(projectId: string, id: string): Promise<Schedule | undefined>;
  /** Ordered by `at`, then id; `flagId`, `status`: only those. */
  list(projectId: string, filter: { flagId?: string; status?: ScheduleStatus }): Promise<Schedule[]>;
  /** How many schedules are pending; `dueBy`: only those whose time has come by then. */
  countPending(dueBy?: string): Promise<number>;
  /** Pending schedules whose time has come (`at` <= `now`), by `at` then id; at most `limit`. */
  due(now: string, limit: number): Promise<Schedule[]>;
  /** Every new schedule with its entries, in one commit. */
  create(author: Author, rows: readonly Schedule[], changes: readonly ChangeDraft[]): Promise<void>;
  /** `decide` sees the stored schedule and returns its next status with the entry (none: nothing written). */
  update(author: Author, projectId: string, id: string, decide: (current: Schedule | undefined) => Written<Schedule>): Promise<Schedule>;
  /** Marks a pending schedule applied (a write that changed nothing: no entry to ride on). */
  markApplied(id: string, at: string): Promise<void>;
}

interface Row {
  id: string;
  project_id: string;
  flag_id: string;
  flag_key: string;
  environment_id: string;
  environment: string;
  at: string;
  state: string;
  status: string;
  created_by_type: string;
  created_by_id: string;
  created_by_label: string;
  created_at: string;
  applied_at: string | null;
  error: string | null;
}

const scheduleOf = (r: Row): Schedule => ({
  id: r.id,
  projectId: r.project_id,
  flagId: r.flag_id,
  flagKey: r.flag_key,
  environmentId: r.environment_id,
  environment: r.environment,
  at: r.at,
  state: JSON.parse(r.state) as ScheduledState,
  status: r.status as ScheduleStatus,
  createdBy: { type: r.created_by_type as ActorType, id: r.created_by_id, label: r.created_by_label },
  createdAt: r.created_at,
  appliedAt: r.applied_at,
  error: r.error,
});

const INSERT_SQL = `INSERT INTO schedules
  (id, project_id, flag_id, flag_key, environment_id, environment, at, state, status, created_by_type, created_by_id, created_by_label, created_at, applied_at, error)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)`;
const FIND_SQL = "SELECT * FROM schedules WHERE project_id = ?1 AND id = ?2";
const LIST_SQL = `SELECT * FROM schedules WHERE project_id = ?1 AND (?2 IS NULL OR flag_id = ?2) AND (?3 IS NULL OR status = ?3) ORDER BY at, id`;
const COUNT_PENDING_SQL = "SELECT count(*) AS n FROM schedules WHERE status = 'pending' AND (?1 IS NULL OR at <= ?1)";
const DUE_SQL = "SELECT * FROM schedules WHERE status = 'pending' AND at <= ?1 ORDER BY at, id LIMIT ?2";
const UPDATE_SQL = "UPDATE schedules SET status = ?2, applied_at = ?3, error = ?4 WHERE id = ?1";
const MARK_APPLIED_SQL = "UPDATE schedules SET status = 'applied', applied_at = ?2 WHERE id = ?1 AND status = 'pending'";
/**
 * From a flag-state entry of the schedule's own write: its id as the request id, its flag, its
 * creator as the actor, and its time come. A request that sent the id as its X-Request-Id is
 * not taken for it unless all of these hold.
 */
const APPLIED_BY_ENTRY_SQL = `UPDATE schedules SET status = 'applied', applied_at = ?2
  WHERE id = ?1 AND status = 'pending' AND flag_id = ?3 AND created_by_id = ?4 AND at <= ?2`;

export class SqliteScheduleStore implements ScheduleStore {
  constructor(private readonly log: SqliteChangeLog) {}

  private get sqlite() {
    return this.log.store.sqlite;
  }

  private findNow(projectId: string, id: string): Schedule | undefined {
    const row = this.sqlite.query<Row, [string, string]>(FIND_SQL).get(projectId, id);
    return row ? scheduleOf(row) : undefined;
  }

  async find(projectId: string, id: string): Promise<Schedule | undefined> {
    return this.findNow(projectId, id);
  }

  async list(projectId: string, filter: { flagId?: string; status?: ScheduleStatus }): Promise<Schedule[]> {
    return this.sqlite.query<Row, [string, string | null, string | null]>(LIST_SQL).all(projectId, filter.flagId ?? null, filter.status ?? null).map(scheduleOf);
  }

  async countPending(dueBy?: string): Promise<number> {
    return this.sqlite.query<{ n: number }, [string | null]>(COUNT_PENDING_SQL).get(dueBy ?? null)!.n;
  }

  async due(now: string, limit: number): Promise<Schedule[]> {
    return this.sqlite.query<Row, [string, number]>(DUE_SQL).all(now, limit).map(scheduleOf);
  }

  async create(author: Author, rows: readonly Schedule[], changes: readonly ChangeDraft[]): Promise<void> {
    await this.log.commit(author, async () => {
      const insert = this.sqlite.query(INSERT_SQL);
      for (const s of rows) {
        insert.run(
          s.id,
          s.projectId,
          s.flagId,
          s.flagKey,
          s.environmentId,
          s.environment,
          s.at,
          JSON.stringify(s.state),
          s.status,
          s.createdBy.type,
          s.createdBy.id,
          s.createdBy.label,
          s.createdAt,
          s.appliedAt,
          s.error,
        );
      }
      return { result: undefined, changes };
    });
  }

  update(author: Author, projectId: string, id: string, decide: (current: Schedule | undefined) => Written<Schedule>): Promise<Schedule> {
    return this.log.commit(author, async () => {
      const written = decide(this.findNow(projectId, id));
      if (written.changes.length > 0) {
        const { status, appliedAt, error } = written.result;
        this.sqlite.query(UPDATE_SQL).run(id, status, appliedAt, error);
      }
      return written;
    });
  }

  async markApplied(id: string, at: string): Promise<void> {
    this.sqlite.query(MARK_APPLIED_SQL).run(id, at);
  }

  /** The change log's participant: a schedule's own flag-state write marks it applied, in its transaction. */
  readonly participant: Participant = async (tx, entries) => {
    for (const e of entries) {
      if (e.resource.type !== "flag_state" || e.requestId === null || !e.requestId.startsWith("sch_")) continue;
      sqliteTx(tx).sqlite.query(APPLIED_BY_ENTRY_SQL).run(e.requestId, e.at, e.resource.id, e.actor.id);
    }
    return undefined;
  };
}
