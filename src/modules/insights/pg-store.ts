/**
 * `InsightsStore` on PostgreSQL (store.ts has the interface, the SQLite implementation and what
 * each read means): the same statements, with conflict targets, `greatest`, jsonb in place of
 * `json_each`/`json_group_array`, numbers cast from bigint/numeric (which arrive as text), and
 * the byte order of SQLite for the candidates (`COLLATE "C"`).
 *
 * Two members are synchronous in the interface: `writeNow` returns the write's promise here
 * (the flusher gives the counts back if it fails), and `observedSinceNow` answers the value
 * `load()` stored or read when the backend opened.
 */
import { sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import { rowsOf } from "../../db/pg/client";
import type { Prerequisite, Rule, Variant } from "../../evaluation/types";
import { DAY_MS, type BucketCount, type CounterBatch, type DailyTotal, type InsightsStore, type Stale, type StaleCandidate, type StaleChange, type StaleReason } from "./store";

const OBSERVED_SINCE = "insights_observed_since";

type CandidateRow = Omit<StaleCandidate, "states" | "stale"> & {
  states: { enabled: boolean; rolloutPercentage: number | null }[];
  staleReason: StaleReason | null;
  staleSince: string | null;
};

export class PgInsightsStore implements InsightsStore {
  /** The stored `insights_observed_since`, set by `load`. */
  private observedSince: string | null = null;

  constructor(private readonly log: PgChangeLog) {}

  /**
   * When the backend opens: stores `now` as `insights_observed_since` if none is (first writer
   * wins), then reads the stored value back (a statement of its own: it sees the row of a node
   * whose insert won at the same moment). Awaited, so every node answers from the stored value.
   */
  async load(now: string): Promise<void> {
    const { db } = this.log;
    await db.execute(sql`INSERT INTO settings (key, value, updated_at) VALUES (${OBSERVED_SINCE}, ${now}, ${now}) ON CONFLICT DO NOTHING`);
    const [row] = await rowsOf<{ value: string }>(db, sql`SELECT value FROM settings WHERE key = ${OBSERVED_SINCE}`);
    this.observedSince = row!.value;
  }

  writeNow(bucket: number, batch: readonly CounterBatch[]): Promise<void> {
    if (batch.length === 0) return Promise.resolve();
    return this.log.db.transaction(async (db) => {
      for (const { projectId, environmentId, flagKey, cells, lastAt } of batch) {
        const flag = sql`FROM flags f WHERE f.project_id = ${projectId} AND f.key = ${flagKey}
          AND EXISTS (SELECT 1 FROM environments e WHERE e.id = ${environmentId} AND e.project_id = ${projectId})`;
        for (const c of cells) {
          await db.execute(sql`INSERT INTO flag_insights (flag_id, environment_id, day, bucket, variant, reason, count)
            SELECT f.id, ${environmentId}, false, ${bucket}, ${c.variant}, ${c.reason}, ${c.count} ${flag}
            ON CONFLICT (flag_id, environment_id, day, bucket, variant, reason) DO UPDATE SET count = flag_insights.count + excluded.count`);
        }
        if (lastAt > 0) {
          await db.execute(sql`INSERT INTO flag_last_evaluated (flag_id, environment_id, at) SELECT f.id, ${environmentId}, ${lastAt} ${flag}
            ON CONFLICT (flag_id, environment_id) DO UPDATE SET at = greatest(flag_last_evaluated.at, excluded.at)`);
        }
      }
    });
  }

  rollup(hourlyBefore: number, dailyBefore: number): Promise<{ rolled: number; deleted: number }> {
    return this.log.db.transaction(async (db) => {
      await db.execute(sql`INSERT INTO flag_insights (flag_id, environment_id, day, bucket, variant, reason, count)
        SELECT flag_id, environment_id, true, bucket - bucket % ${sql.raw(String(DAY_MS))}, variant, reason, sum(count) FROM flag_insights
        WHERE NOT day AND bucket < ${hourlyBefore} GROUP BY flag_id, environment_id, bucket - bucket % ${sql.raw(String(DAY_MS))}, variant, reason
        ON CONFLICT (flag_id, environment_id, day, bucket, variant, reason) DO UPDATE SET count = flag_insights.count + excluded.count`);
      const rolled = await rowsOf(db, sql`DELETE FROM flag_insights WHERE NOT day AND bucket < ${hourlyBefore} RETURNING 1`);
      const deleted = await rowsOf(db, sql`DELETE FROM flag_insights WHERE day AND bucket < ${dailyBefore} RETURNING 1`);
      return { rolled: rolled.length, deleted: deleted.length };
    });
  }

  counts(flagId: string, environmentId: string, interval: "hour" | "day", from: number, to: number): Promise<BucketCount[]> {
    const where = sql`flag_id = ${flagId} AND environment_id = ${environmentId} AND bucket >= ${from} AND bucket < ${to}`;
    const day = sql.raw(String(DAY_MS));
    return rowsOf(
      this.log.db,
      interval === "hour"
        ? sql`SELECT bucket::float8 AS bucket, variant, reason, count::float8 AS count FROM flag_insights WHERE ${where} AND NOT day`
        : sql`SELECT (bucket - bucket % ${day})::float8 AS bucket, variant, reason, sum(count)::float8 AS count FROM flag_insights
            WHERE ${where} GROUP BY bucket - bucket % ${day}, variant, reason`,
    );
  }

  dailyTotals(projectId: string, flagKeys: readonly string[], environmentId: string | null, from: number, to: number): Promise<DailyTotal[]> {
    const day = sql.raw(String(DAY_MS));
    return rowsOf(
      this.log.db,
      sql`SELECT f.key AS "flagKey", (i.bucket - i.bucket % ${day})::float8 AS bucket, coalesce(sum(i.count), 0)::float8 AS count
        FROM flags f LEFT JOIN flag_insights i ON i.flag_id = f.id AND i.bucket >= ${from} AND i.bucket < ${to} AND i.reason <> 'TEST_OVERRIDE'
          AND (${environmentId}::text IS NULL OR i.environment_id = ${environmentId})
        WHERE f.project_id = ${projectId} AND f.key IN (SELECT jsonb_array_elements_text(${JSON.stringify(flagKeys)}::text::jsonb))
        GROUP BY f.key, i.bucket - i.bucket % ${day}`,
    );
  }

  lastEvaluated(flagIds: readonly string[]): Promise<{ flagId: string; environmentId: string; at: number }[]> {
    return rowsOf(
      this.log.db,
      sql`SELECT flag_id AS "flagId", environment_id AS "environmentId", at::float8 AS at FROM flag_last_evaluated
        WHERE flag_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(flagIds)}::text::jsonb))`,
    );
  }

  async staleOf(flagId: string): Promise<Stale | null> {
    const [row] = await rowsOf<Stale>(this.log.db, sql`SELECT reason, since FROM flag_stale WHERE flag_id = ${flagId}`);
    return row ?? null;
  }

  async staleCandidates(): Promise<StaleCandidate[]> {
    const rows = await rowsOf<CandidateRow>(
      this.log.db,
      sql`SELECT p.id AS "projectId", p.slug AS "projectSlug", p.stale_after_days AS "staleAfterDays",
          f.id AS "flagId", f.key, f.created_at AS "createdAt", f.updated_at AS "updatedAt", f.variants, f.rules, f.prerequisites,
          (SELECT max(at)::float8 FROM flag_last_evaluated l WHERE l.flag_id = f.id) AS "lastEvaluatedAt",
          (SELECT max(updated_at) FROM flag_states s WHERE s.flag_id = f.id) AS "lastStateChange",
          (SELECT coalesce(jsonb_agg(jsonb_build_object('enabled', coalesce(s.enabled, false), 'rolloutPercentage', s.rollout_percentage) ORDER BY e.seq), '[]'::jsonb)
             FROM environments e LEFT JOIN flag_states s ON s.environment_id = e.id AND s.flag_id = f.id WHERE e.project_id = p.id) AS states,
          st.reason AS "staleReason", st.since AS "staleSince"
        FROM flags f JOIN projects p ON p.id = f.project_id LEFT JOIN flag_stale st ON st.flag_id = f.id
        ORDER BY p.slug COLLATE "C", f.key COLLATE "C"`,
    );
    return rows.map(({ variants, rules, prerequisites, staleReason, staleSince, ...r }) => ({
      ...r,
      variants: variants as Variant[],
      rules: rules as Rule[],
      prerequisites: prerequisites as Prerequisite[] | null,
      stale: staleReason === null ? null : { reason: staleReason, since: staleSince! },
    }));
  }

  observedSinceNow(): string {
    if (this.observedSince === null) throw new Error("PgInsightsStore: load() first");
    return this.observedSince;
  }

  setStale(author: Author, changes: readonly StaleChange[]): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const drafts: ChangeDraft[] = [];
      for (const c of changes) {
        // The flag may have been deleted since it was read: its row would break the foreign key.
        if ((await rowsOf(db, sql`SELECT 1 FROM flags WHERE id = ${c.flagId}`)).length === 0) continue;
        if (c.after === null) await db.execute(sql`DELETE FROM flag_stale WHERE flag_id = ${c.flagId}`);
        else
          await db.execute(sql`INSERT INTO flag_stale (flag_id, reason, since) VALUES (${c.flagId}, ${c.after.reason}, ${c.after.since})
            ON CONFLICT (flag_id) DO UPDATE SET reason = excluded.reason, since = excluded.since`);
        drafts.push({ project: c.project, environment: null, resource: { type: "flag", id: c.flagId, key: c.key }, action: "updated", changes: { stale: { before: c.before, after: c.after } } });
      }
      return { result: undefined, changes: drafts };
    });
  }
}
