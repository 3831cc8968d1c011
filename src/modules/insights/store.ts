/**
 * All SQL of evaluation insights and stale flags (docs/insights.md): the counts table
 * (`flag_insights`, hourly and daily buckets), when each flag was last evaluated in each
 * environment (`flag_last_evaluated`), and which flags are stale (`flag_stale`). The counts and
 * the last evaluations are written by the flusher, one transaction per flush; the rollup and
 * the retention run in one transaction each; a flag turning stale (or no longer) is a change of
 * the flag, committed through the change log with its entry (its `flag.stale` event follows
 * from the entry: ../webhooks/events.ts).
 *
 * Synchronous SQLite inside; the flusher's write is synchronous on purpose (the graceful stop
 * and the close of a context flush last, just before the database is closed).
 */
import type { Database } from "bun:sqlite";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { SqliteChangeLog } from "../../changes/sqlite";
import { transaction } from "../../db/client";
import type { CountCell } from "../../evaluation/counts";
import type { FlagState, Prerequisite, Rule, Variant } from "../../evaluation/types";

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export const STALE_REASONS = ["not_evaluated", "fully_rolled_out"] as const;
export type StaleReason = (typeof STALE_REASONS)[number];

/** Why and since when a flag is stale. */
export interface Stale {
  reason: StaleReason;
  since: string;
}

/** One counter's increments since the last flush, with its last production evaluation (ms; 0: none to write). */
export interface CounterBatch {
  projectId: string;
  environmentId: string;
  flagKey: string;
  cells: readonly CountCell[];
  lastAt: number;
}

/** Summed counts of one bucket, variant label and reason. */
export interface BucketCount {
  bucket: number;
  variant: string;
  reason: string;
  count: number;
}

/** A flag's production evaluations in one day (bucket null: none in the range). */
export interface DailyTotal {
  flagKey: string;
  bucket: number | null;
  count: number;
}

/** What stale detection reads of one flag. */
export interface StaleCandidate {
  projectId: string;
  projectSlug: string;
  staleAfterDays: number;
  flagId: string;
  key: string;
  createdAt: string;
  updatedAt: string;
  variants: Variant[];
  rules: Rule[];
  prerequisites: Prerequisite[] | null;
  /** The latest production evaluation in any environment (ms), or null: never. */
  lastEvaluatedAt: number | null;
  /** The flag's state in each environment of its project (disabled where never set). */
  states: FlagState[];
  /** The latest change of a state (ISO), or null: never set. */
  lastStateChange: string | null;
  stale: Stale | null;
}

/** A flag whose staleness changes, for `setStale`. */
export interface StaleChange {
  project: { id: string; slug: string };
  flagId: string;
  key: string;
  before: Stale | null;
  after: Stale | null;
}

export interface InsightsStore {
  /**
   * One flush: every counter's increments added to the bucket `bucket` (hourly), and the last
   * evaluations, in one transaction. Synchronous on SQLite; on PostgreSQL the write's promise.
   */
  writeNow(bucket: number, batch: readonly CounterBatch[]): void | Promise<void>;
  /** Hourly buckets before `hourlyBefore` become daily buckets; daily buckets before `dailyBefore` are deleted. One transaction. */
  rollup(hourlyBefore: number, dailyBefore: number): Promise<{ rolled: number; deleted: number }>;
  /** Counts of a flag in an environment from `from` (included) to `to` (excluded), summed by hour (hourly rows only) or by day (both). */
  counts(flagId: string, environmentId: string, interval: "hour" | "day", from: number, to: number): Promise<BucketCount[]>;
  /**
   * Daily production totals (every reason but TEST_OVERRIDE) of these flags of a project from
   * `from` (included) to `to` (excluded), hourly and daily rows summed by day, over every
   * environment or one: one query. Each existing flag has at least one row (bucket null when it
   * has no count in the range), so that the caller knows which keys are flags.
   */
  dailyTotals(projectId: string, flagKeys: readonly string[], environmentId: string | null, from: number, to: number): Promise<DailyTotal[]>;
  /** The last production evaluations (ms) of these flags, one row per flag and environment evaluated there: one query. */
  lastEvaluated(flagIds: readonly string[]): Promise<{ flagId: string; environmentId: string; at: number }[]>;
  /** One flag's staleness (null: not stale). */
  staleOf(flagId: string): Promise<Stale | null>;
  /** Every flag of every project with what detection needs. */
  staleCandidates(): Promise<StaleCandidate[]>;
  /**
   * Since when evaluations are counted on this instance (ISO): stored as `now` on the first call
   * (the first start with insights), read afterwards (on PostgreSQL: stored and read back when the
   * backend opens, the first node's on every node). A flag older than that is judged "not
   * evaluated" from then on, not from its creation: before it, nothing was counted.
   */
  observedSinceNow(now: string): string;
  /** Records the changes with their entries (one commit). */
  setStale(author: Author, changes: readonly StaleChange[]): Promise<void>;
}

const UPSERT_COUNT_SQL = `INSERT INTO flag_insights (flag_id, environment_id, day, bucket, variant, reason, count)
  SELECT f.id, ?2, 0, ?3, ?4, ?5, ?6 FROM flags f
  WHERE f.project_id = ?7 AND f.key = ?1 AND EXISTS (SELECT 1 FROM environments e WHERE e.id = ?2 AND e.project_id = ?7)
  ON CONFLICT DO UPDATE SET count = count + excluded.count`;
const UPSERT_LAST_SQL = `INSERT INTO flag_last_evaluated (flag_id, environment_id, at)
  SELECT f.id, ?2, ?3 FROM flags f
  WHERE f.project_id = ?4 AND f.key = ?1 AND EXISTS (SELECT 1 FROM environments e WHERE e.id = ?2 AND e.project_id = ?4)
  ON CONFLICT DO UPDATE SET at = max(at, excluded.at)`;
const ROLL_SQL = `INSERT INTO flag_insights (flag_id, environment_id, day, bucket, variant, reason, count)
  SELECT flag_id, environment_id, 1, bucket - bucket % ${DAY_MS}, variant, reason, sum(count) FROM flag_insights
  WHERE day = 0 AND bucket < ?1 GROUP BY flag_id, environment_id, bucket - bucket % ${DAY_MS}, variant, reason
  ON CONFLICT DO UPDATE SET count = count + excluded.count`;
const DROP_HOURLY_SQL = "DELETE FROM flag_insights WHERE day = 0 AND bucket < ?1";
const DROP_DAILY_SQL = "DELETE FROM flag_insights WHERE day = 1 AND bucket < ?1";
const HOUR_COUNTS_SQL = `SELECT bucket, variant, reason, count FROM flag_insights
  WHERE flag_id = ?1 AND environment_id = ?2 AND day = 0 AND bucket >= ?3 AND bucket < ?4`;
const DAY_COUNTS_SQL = `SELECT bucket - bucket % ${DAY_MS} AS bucket, variant, reason, sum(count) AS count FROM flag_insights
  WHERE flag_id = ?1 AND environment_id = ?2 AND bucket >= ?3 AND bucket < ?4
  GROUP BY bucket - bucket % ${DAY_MS}, variant, reason`;
const DAILY_TOTALS_SQL = `SELECT f.key AS flagKey, i.bucket - i.bucket % ${DAY_MS} AS bucket, coalesce(sum(i.count), 0) AS count
  FROM flags f LEFT JOIN flag_insights i ON i.flag_id = f.id AND i.bucket >= ?3 AND i.bucket < ?4 AND i.reason <> 'TEST_OVERRIDE'
    AND (?5 IS NULL OR i.environment_id = ?5)
  WHERE f.project_id = ?1 AND f.key IN (SELECT value FROM json_each(?2))
  GROUP BY f.key, i.bucket - i.bucket % ${DAY_MS}`;
const LAST_SQL = "SELECT flag_id AS flagId, environment_id AS environmentId, at FROM flag_last_evaluated WHERE flag_id IN (SELECT value FROM json_each(?1))";
const STALE_OF_FLAG_SQL = "SELECT reason, since FROM flag_stale WHERE flag_id = ?1";
const CANDIDATES_SQL = `SELECT p.id AS projectId, p.slug AS projectSlug, p.stale_after_days AS staleAfterDays,
    f.id AS flagId, f.key, f.created_at AS createdAt, f.updated_at AS updatedAt, f.variants, f.rules, f.prerequisites,
    (SELECT max(at) FROM flag_last_evaluated l WHERE l.flag_id = f.id) AS lastEvaluatedAt,
    (SELECT max(updated_at) FROM flag_states s WHERE s.flag_id = f.id) AS lastStateChange,
    (SELECT json_group_array(json_object('enabled', coalesce(s.enabled, 0), 'rolloutPercentage', s.rollout_percentage))
       FROM environments e LEFT JOIN flag_states s ON s.environment_id = e.id AND s.flag_id = f.id WHERE e.project_id = p.id) AS states,
    st.reason AS staleReason, st.since AS staleSince
  FROM flags f JOIN projects p ON p.id = f.project_id LEFT JOIN flag_stale st ON st.flag_id = f.id
  ORDER BY p.slug, f.key`;
const OBSERVED_SINCE = "insights_observed_since";
const OBSERVED_INSERT_SQL = "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?2) ON CONFLICT DO NOTHING";
const OBSERVED_SQL = "SELECT value FROM settings WHERE key = ?1";
const SET_STALE_SQL = "INSERT INTO flag_stale (flag_id, reason, since) VALUES (?1, ?2, ?3) ON CONFLICT DO UPDATE SET reason = excluded.reason, since = excluded.since";
const CLEAR_STALE_SQL = "DELETE FROM flag_stale WHERE flag_id = ?1";

/** A candidate as SQLite returns it: the JSON columns as text, the staleness as two columns. */
type CandidateRow = Omit<StaleCandidate, "variants" | "rules" | "prerequisites" | "states" | "stale"> & {
  variants: string;
  rules: string;
  prerequisites: string | null;
  states: string;
  staleReason: StaleReason | null;
  staleSince: string | null;
};

export class SqliteInsightsStore implements InsightsStore {
  constructor(private readonly log: SqliteChangeLog) {}

  private get sqlite(): Database {
    return this.log.store.sqlite;
  }

  writeNow(bucket: number, batch: readonly CounterBatch[]): void {
    if (batch.length === 0) return;
    const count = this.sqlite.query(UPSERT_COUNT_SQL);
    const last = this.sqlite.query(UPSERT_LAST_SQL);
    transaction(this.log.store, () => {
      for (const { projectId, environmentId, flagKey, cells, lastAt } of batch) {
        for (const c of cells) count.run(flagKey, environmentId, bucket, c.variant, c.reason, c.count, projectId);
        if (lastAt > 0) last.run(flagKey, environmentId, lastAt, projectId);
      }
    });
  }

  async rollup(hourlyBefore: number, dailyBefore: number): Promise<{ rolled: number; deleted: number }> {
    return transaction(this.log.store, () => {
      this.sqlite.query(ROLL_SQL).run(hourlyBefore);
      const rolled = this.sqlite.query(DROP_HOURLY_SQL).run(hourlyBefore).changes;
      const deleted = this.sqlite.query(DROP_DAILY_SQL).run(dailyBefore).changes;
      return { rolled, deleted };
    });
  }

  async counts(flagId: string, environmentId: string, interval: "hour" | "day", from: number, to: number): Promise<BucketCount[]> {
    return this.sqlite.query<BucketCount, [string, string, number, number]>(interval === "hour" ? HOUR_COUNTS_SQL : DAY_COUNTS_SQL).all(flagId, environmentId, from, to);
  }

  async dailyTotals(projectId: string, flagKeys: readonly string[], environmentId: string | null, from: number, to: number): Promise<DailyTotal[]> {
    return this.sqlite.query<DailyTotal, [string, string, number, number, string | null]>(DAILY_TOTALS_SQL).all(projectId, JSON.stringify(flagKeys), from, to, environmentId);
  }

  async lastEvaluated(flagIds: readonly string[]): Promise<{ flagId: string; environmentId: string; at: number }[]> {
    return this.sqlite.query<{ flagId: string; environmentId: string; at: number }, [string]>(LAST_SQL).all(JSON.stringify(flagIds));
  }

  async staleOf(flagId: string): Promise<Stale | null> {
    return this.sqlite.query<Stale, [string]>(STALE_OF_FLAG_SQL).get(flagId);
  }

  async staleCandidates(): Promise<StaleCandidate[]> {
    return this.sqlite
      .query<CandidateRow, []>(CANDIDATES_SQL)
      .all()
      .map(({ variants, rules, prerequisites, states, staleReason, staleSince, ...r }) => ({
        ...r,
        variants: JSON.parse(variants) as Variant[],
        rules: JSON.parse(rules) as Rule[],
        prerequisites: prerequisites === null ? null : (JSON.parse(prerequisites) as Prerequisite[]),
        states: (JSON.parse(states) as { enabled: number; rolloutPercentage: number | null }[]).map((s) => ({ enabled: s.enabled === 1, rolloutPercentage: s.rolloutPercentage })),
        stale: staleReason === null ? null : { reason: staleReason, since: staleSince! },
      }));
  }

  observedSinceNow(now: string): string {
    this.sqlite.query(OBSERVED_INSERT_SQL).run(OBSERVED_SINCE, now);
    return this.sqlite.query<{ value: string }, [string]>(OBSERVED_SQL).get(OBSERVED_SINCE)!.value;
  }

  setStale(author: Author, changes: readonly StaleChange[]): Promise<void> {
    return this.log.commit(author, async () => {
      const set = this.sqlite.query(SET_STALE_SQL);
      const clear = this.sqlite.query(CLEAR_STALE_SQL);
      const drafts: ChangeDraft[] = [];
      for (const c of changes) {
        // The flag may have been deleted since it was read: its row would break the foreign key.
        if (this.sqlite.query("SELECT 1 FROM flags WHERE id = ?1").get(c.flagId) === null) continue;
        if (c.after === null) clear.run(c.flagId);
        else set.run(c.flagId, c.after.reason, c.after.since);
        drafts.push({ project: c.project, environment: null, resource: { type: "flag", id: c.flagId, key: c.key }, action: "updated", changes: { stale: { before: c.before, after: c.after } } });
      }
      return { result: undefined, changes: drafts };
    });
  }
}
