/**
 * `DefinitionsStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * Every read that pairs flags with a change-log position runs in one REPEATABLE READ, read-only
 * transaction: one snapshot, so the position names exactly the state read (writers commit in
 * position order under the change log's write lock, so a snapshot holds a prefix of the log).
 * Keys are ordered with `COLLATE "C"`: bytewise, as SQLite orders them, whatever the database's locale.
 */
import { and, asc, count, desc, eq, gt, inArray, isNotNull, lt, max, sql } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { changeLog, environments, flags, flagStates, projects, segments } from "../../db/pg/schema";
import { segmentKeysOf, type Prerequisite, type Rule, type Variant } from "../../evaluation/types";
import { MAX_RESUME_SPAN, placer, type Definitions, type DefinitionsStore, type EnvironmentChange, type FlagRecord, type Records, type Resume, type SegmentRecord } from "./store";

/** How many change-log entries `lastChanges` reads at a time, newest first. */
const WALK_CHUNK = 500;

const byKey = (key: typeof flags.key | typeof segments.key) => asc(sql`${key} COLLATE "C"`);

const RECORD_COLUMNS = {
  key: flags.key,
  variants: flags.variants,
  rules: flags.rules,
  bucketBy: flags.bucketBy,
  prerequisites: flags.prerequisites,
  enabled: flagStates.enabled,
  rolloutPercentage: flagStates.rolloutPercentage,
};

interface RecordRow {
  key: string;
  variants: Variant[];
  rules: Rule[];
  bucketBy: string | null;
  prerequisites: Prerequisite[] | null;
  enabled: boolean | null;
  rolloutPercentage: number | null;
}

const recordOf = (r: RecordRow): FlagRecord => ({
  key: r.key,
  variants: r.variants,
  rules: r.rules,
  ...(r.bucketBy !== null ? { bucketBy: r.bucketBy } : {}),
  ...(r.prerequisites !== null ? { prerequisites: r.prerequisites } : {}),
  state: r.enabled === null ? { enabled: false, rolloutPercentage: null } : { enabled: r.enabled, rolloutPercentage: r.rolloutPercentage },
});

export class PgDefinitionsStore implements DefinitionsStore {
  constructor(private readonly db: PgQueries) {}

  /** One snapshot, no writes. */
  private read<T>(fn: (db: PgQueries) => Promise<T>): Promise<T> {
    return this.db.transaction(fn, { isolationLevel: "repeatable read", accessMode: "read only" });
  }

  private async lastPosition(db: PgQueries): Promise<number> {
    const [row] = await db.select({ p: max(changeLog.position) }).from(changeLog);
    return row?.p ?? 0;
  }

  private async env(db: PgQueries, environmentId: string): Promise<{ environment: string; projectId: string; project: string } | undefined> {
    const [row] = await db
      .select({ environment: environments.slug, projectId: projects.id, project: projects.slug })
      .from(environments)
      .innerJoin(projects, eq(projects.id, environments.projectId))
      .where(eq(environments.id, environmentId));
    return row;
  }

  /** The project's flags (only `keys`, when given) with their state in the environment, by key. */
  private async flagRecords(db: PgQueries, projectId: string, environmentId: string, keys?: readonly string[]): Promise<FlagRecord[]> {
    const rows = await db
      .select(RECORD_COLUMNS)
      .from(flags)
      .leftJoin(flagStates, and(eq(flagStates.flagId, flags.id), eq(flagStates.environmentId, environmentId)))
      .where(and(eq(flags.projectId, projectId), keys ? inArray(flags.key, [...keys]) : undefined))
      .orderBy(byKey(flags.key));
    return rows.map(recordOf);
  }

  private async environmentIn(db: PgQueries, environmentId: string): Promise<Definitions | undefined> {
    const env = await this.env(db, environmentId);
    if (!env) return undefined;
    const flagList = await this.flagRecords(db, env.projectId, environmentId);
    return { version: await this.lastPosition(db), project: env.project, environment: env.environment, flags: flagList, segments: await this.segmentsOf(db, env.projectId, flagList) };
  }

  /** The segments the flags' rules name. */
  private async segmentsOf(db: PgQueries, projectId: string, flagList: readonly FlagRecord[]): Promise<SegmentRecord[]> {
    const keys = new Set<string>();
    for (const f of flagList) for (const k of segmentKeysOf(f.rules)) keys.add(k);
    if (keys.size === 0) return [];
    return db
      .select({ key: segments.key, conditions: segments.conditions, included: segments.included, excluded: segments.excluded })
      .from(segments)
      .where(and(eq(segments.projectId, projectId), inArray(segments.key, [...keys])))
      .orderBy(byKey(segments.key));
  }

  /** The keys of the project's flags whose rules name one of `segmentKeys`. */
  private async using(db: PgQueries, projectId: string, segmentKeys: readonly string[]): Promise<string[]> {
    const rows = await db.execute<{ key: string }>(sql`
      SELECT DISTINCT f.key AS key FROM flags f, json_array_elements(f.rules) r, json_array_elements(r.value -> 'conditions') c
      WHERE f.project_id = ${projectId} AND c.value ->> 'operator' IN ('in_segment', 'not_in_segment')
      AND json_typeof(c.value -> 'value') = 'string' AND c.value ->> 'value' IN (${sql.join(segmentKeys.map((k) => sql`${k}`), sql`, `)})`);
    return [...rows].map((r) => r.key);
  }

  private async recordsIn(db: PgQueries, projectId: string, environmentId: string, keys: readonly string[], segmentKeys: readonly string[] = []): Promise<Records> {
    const all = new Set(keys);
    if (segmentKeys.length > 0) for (const k of await this.using(db, projectId, segmentKeys)) all.add(k);
    if (all.size === 0) return { flags: [], segments: [] };
    const flagList = await this.flagRecords(db, projectId, environmentId, [...all]);
    return { flags: flagList, segments: await this.segmentsOf(db, projectId, flagList) };
  }

  environment(environmentId: string): Promise<Definitions | undefined> {
    return this.read((db) => this.environmentIn(db, environmentId));
  }

  records(projectId: string, environmentId: string, keys: readonly string[], segmentKeys: readonly string[] = []): Promise<Records> {
    return this.read((db) => this.recordsIn(db, projectId, environmentId, keys, segmentKeys));
  }

  resume(environmentId: string, after: number, limit: number): Promise<Resume | undefined> {
    return this.read(async (db) => {
      const env = await this.env(db, environmentId);
      if (!env) return undefined;
      const position = await this.lastPosition(db);
      const full = async (): Promise<Resume> => ({ kind: "full", position, definitions: (await this.environmentIn(db, environmentId))! });
      // Ahead of the log (a restored backup), too far behind, or a gap (retention removed entries after it).
      if (after > position || position - after > MAX_RESUME_SPAN) return full();
      const [counted] = await db.select({ n: count() }).from(changeLog).where(gt(changeLog.position, after));
      if (counted!.n !== position - after) return full();
      // The entries after `after` that touch the environment's flags: every flag and segment entry of the project, the state entries of that environment.
      const touching = await db
        .select({ position: changeLog.position, type: changeLog.resourceType, key: changeLog.resourceKey })
        .from(changeLog)
        .where(
          and(
            gt(changeLog.position, after),
            eq(changeLog.projectId, env.projectId),
            sql`(${changeLog.resourceType} IN ('flag', 'segment') OR (${changeLog.resourceType} = 'flag_state' AND ${changeLog.environment} = ${env.environment}))`,
          ),
        )
        .orderBy(asc(changeLog.position))
        .limit(limit + 1);
      if (touching.length > limit) return full();
      const keys = [...new Set(touching.filter((t) => t.type !== "segment").map((t) => t.key!))].sort();
      const segmentKeys = [...new Set(touching.filter((t) => t.type === "segment").map((t) => t.key!))];
      const { flags: flagList, segments: used } = await this.recordsIn(db, env.projectId, environmentId, keys, segmentKeys);
      const present = new Set(flagList.map((f) => f.key));
      return { kind: "patch", position, last: touching.at(-1)?.position ?? 0, flags: flagList, deleted: keys.filter((k) => !present.has(k)), segments: used };
    });
  }

  /**
   * Every environment and its last change that alters evaluation (see the SQLite
   * implementation): the log walked newest first, WALK_CHUNK entries at a time, until every
   * environment is placed.
   */
  lastChanges(): Promise<{ position: number; environments: EnvironmentChange[] }> {
    return this.read(async (db) => {
      const position = await this.lastPosition(db);
      const rows = await db.select({ id: environments.id, projectId: environments.projectId, slug: environments.slug }).from(environments).orderBy(asc(environments.seq));
      const envs = rows.map((e): EnvironmentChange => ({ ...e, position: 0, at: 0 }));
      const placed = placer(envs);
      for (let before = position + 1; !placed(null); ) {
        const chunk = await db
          .select({ position: changeLog.position, at: changeLog.at, projectId: changeLog.projectId, environment: changeLog.environment, type: changeLog.resourceType, id: changeLog.resourceId, action: changeLog.action })
          .from(changeLog)
          .where(and(isNotNull(changeLog.projectId), lt(changeLog.position, before)))
          .orderBy(desc(changeLog.position))
          .limit(WALK_CHUNK);
        if (chunk.some(placed) || chunk.length < WALK_CHUNK) break;
        before = chunk.at(-1)!.position;
      }
      return { position, environments: envs };
    });
  }
}
