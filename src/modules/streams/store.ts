/**
 * All SQL of the streams, behind `DefinitionsStore` (asynchronous at its boundary, as every
 * store: a PostgreSQL implementation stands behind the same interface; synchronous SQLite
 * inside). Every read that pairs flags with a change-log position runs in one read transaction,
 * so that the position names exactly the state read.
 */
import type { Database } from "bun:sqlite";
import type { Store } from "../../db/client";
import { segmentKeysOf, type Condition, type FlagState, type Prerequisite, type Rule, type SegmentDefinition, type Variant } from "../../evaluation/types";

/** A flag as local evaluation needs it: its definition as stored, and its state in the environment. */
export interface FlagRecord {
  key: string;
  variants: Variant[];
  /** In order, disabled ones included (the engine skips them). */
  rules: Rule[];
  /** Only when the flag sets it (not `userId`): the attribute rollouts and weights bucket by. */
  bucketBy?: string;
  /** Only when the flag has prerequisites: they are looked up among the environment's records. */
  prerequisites?: Prerequisite[];
  /** No state row: `{ enabled: false, rolloutPercentage: null }`. */
  state: FlagState;
}

/** A segment as local evaluation needs it (docs/targeting.md, Segments): what in_segment/not_in_segment compile against. */
export interface SegmentRecord extends SegmentDefinition {
  conditions: Condition[];
  included: string[];
  excluded: string[];
}

/** Every flag of one environment, by key, as of change-log position `version`, and the segments they use. */
export interface Definitions {
  version: number;
  project: string;
  environment: string;
  flags: FlagRecord[];
  /** The segments the flags' rules name, by key (none: empty). */
  segments: SegmentRecord[];
}

/** Flags' current records and the segments they use: what a patch carries. */
export interface Records {
  flags: FlagRecord[];
  segments: SegmentRecord[];
}

/**
 * What a stream resuming after position N is sent (`DefinitionsStore.resume`): nothing or one
 * patch (`last` the position of the last entry that touched the environment, 0 for none; `flags`
 * the current records of the flags touched after N, `deleted` the keys touched that no longer
 * exist), or the whole environment when the log cannot tell.
 */
export type Resume =
  | { kind: "patch"; position: number; last: number; flags: FlagRecord[]; deleted: string[]; segments: SegmentRecord[] }
  | { kind: "full"; position: number; definitions: Definitions };

/** Where a stream's environment stands: its last change that alters evaluation (`position`, `at` in ms; 0 for none retained). */
export interface EnvironmentChange {
  id: string;
  projectId: string;
  slug: string;
  position: number;
  at: number;
}

export interface DefinitionsStore {
  /**
   * Every environment and its last change that alters evaluation, and the change log's last
   * position (start-up: the stream hub's `lastChange`).
   */
  lastChanges(): Promise<{ position: number; environments: EnvironmentChange[] }>;
  /** The environment's flags and the change log's last position, in one read; undefined once the environment is gone. */
  environment(environmentId: string): Promise<Definitions | undefined>;
  /**
   * The current records of these flags of the project, in that environment, by key (missing keys:
   * deleted), with those of every flag that uses one of `segments` (segments changed), and the
   * segments all these flags use.
   */
  records(projectId: string, environmentId: string, keys: readonly string[], segments?: readonly string[]): Promise<Records>;
  /**
   * What changed in the environment after position `after`, in one read: a patch when the log
   * holds every entry after it and at most `limit` of them touch the environment; else (a gap
   * left by retention, `after` ahead of the log, more than `limit`) the whole environment.
   * Undefined once the environment is gone.
   */
  resume(environmentId: string, after: number, limit: number): Promise<Resume | undefined>;
}

/**
 * How far behind the log a resume may be before it is not worth reading entry by entry: past it,
 * the whole environment is sent (the gap check counts the entries in between).
 */
export const MAX_RESUME_SPAN = 100_000;

interface RecordRow {
  key: string;
  variants: string;
  rules: string;
  bucketBy: string | null;
  prerequisites: string | null;
  enabled: number | null;
  rolloutPercentage: number | null;
}

const RECORD_COLUMNS = `f.key AS key, f.variants AS variants, f.rules AS rules, f.bucket_by AS bucketBy, f.prerequisites AS prerequisites, s.enabled AS enabled, s.rollout_percentage AS rolloutPercentage
  FROM flags f LEFT JOIN flag_states s ON s.flag_id = f.id AND s.environment_id = ?2`;
const ALL_RECORDS_SQL = `SELECT ${RECORD_COLUMNS} WHERE f.project_id = ?1 ORDER BY f.key`;
const SOME_RECORDS_SQL = `SELECT ${RECORD_COLUMNS} WHERE f.project_id = ?1 AND f.key IN (SELECT value FROM json_each(?3)) ORDER BY f.key`;
const ENVIRONMENT_SQL = `SELECT e.slug AS environment, p.id AS projectId, p.slug AS project FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = ?1`;
const LAST_POSITION_SQL = "SELECT coalesce(max(position), 0) AS p FROM change_log";
/**
 * The entries after ?1 that touch the environment's flags: every flag entry of the project, the
 * state entries of that environment, every segment entry of the project (it touches the flags that use it).
 */
const TOUCHING_SQL = `SELECT position, resource_type AS type, resource_key AS key FROM change_log
  WHERE position > ?1 AND project_id = ?2 AND (resource_type IN ('flag', 'segment') OR (resource_type = 'flag_state' AND environment = ?3))
  ORDER BY position LIMIT ?4`;
/** The keys of the project's flags whose rules name one of the segments ?2 (a JSON array of keys). */
const USING_SQL = `SELECT DISTINCT f.key AS key FROM flags f, json_each(f.rules) r, json_each(r.value, '$.conditions') c
  WHERE f.project_id = ?1 AND json_extract(c.value, '$.operator') IN ('in_segment', 'not_in_segment')
  AND json_extract(c.value, '$.value') IN (SELECT value FROM json_each(?2))`;
const SEGMENTS_SQL = `SELECT key, conditions, included, excluded FROM segments WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2)) ORDER BY key`;
const COUNT_AFTER_SQL = "SELECT count(*) AS n FROM change_log WHERE position > ?1";

const recordOf = (r: RecordRow): FlagRecord => ({
  key: r.key,
  variants: JSON.parse(r.variants) as Variant[],
  rules: JSON.parse(r.rules) as Rule[],
  ...(r.bucketBy !== null ? { bucketBy: r.bucketBy } : {}),
  ...(r.prerequisites !== null ? { prerequisites: JSON.parse(r.prerequisites) as Prerequisite[] } : {}),
  state: r.enabled === null ? { enabled: false, rolloutPercentage: null } : { enabled: r.enabled === 1, rolloutPercentage: r.rolloutPercentage },
});

export class SqliteDefinitionsStore implements DefinitionsStore {
  constructor(private readonly store: Store) {}

  private get sqlite(): Database {
    return this.store.sqlite;
  }

  /** A read transaction (deferred: it takes no write lock; WAL readers see one snapshot throughout). */
  private read<T>(fn: () => T): T {
    return this.sqlite.transaction(fn).deferred();
  }

  private lastPosition(): number {
    return (this.sqlite.query(LAST_POSITION_SQL).get() as { p: number }).p;
  }

  private environmentNow(environmentId: string): Definitions | undefined {
    const env = this.sqlite.query<{ environment: string; projectId: string; project: string }, [string]>(ENVIRONMENT_SQL).get(environmentId);
    if (!env) return undefined;
    const flags = this.sqlite.query<RecordRow, [string, string]>(ALL_RECORDS_SQL).all(env.projectId, environmentId).map(recordOf);
    return { version: this.lastPosition(), project: env.project, environment: env.environment, flags, segments: this.segmentsOf(env.projectId, flags) };
  }

  /** The segments the flags' rules name. */
  private segmentsOf(projectId: string, flags: readonly FlagRecord[]): SegmentRecord[] {
    const keys = new Set<string>();
    for (const f of flags) for (const k of segmentKeysOf(f.rules)) keys.add(k);
    if (keys.size === 0) return [];
    return this.sqlite
      .query<{ key: string; conditions: string; included: string; excluded: string }, [string, string]>(SEGMENTS_SQL)
      .all(projectId, JSON.stringify([...keys]))
      .map((r) => ({ key: r.key, conditions: JSON.parse(r.conditions), included: JSON.parse(r.included), excluded: JSON.parse(r.excluded) }));
  }

  private recordsNow(projectId: string, environmentId: string, keys: readonly string[], segments: readonly string[] = []): Records {
    const all = new Set(keys);
    if (segments.length > 0) for (const r of this.sqlite.query<{ key: string }, [string, string]>(USING_SQL).all(projectId, JSON.stringify(segments))) all.add(r.key);
    if (all.size === 0) return { flags: [], segments: [] };
    const flags = this.sqlite.query<RecordRow, [string, string, string]>(SOME_RECORDS_SQL).all(projectId, environmentId, JSON.stringify([...all])).map(recordOf);
    return { flags, segments: this.segmentsOf(projectId, flags) };
  }

  async environment(environmentId: string): Promise<Definitions | undefined> {
    return this.read(() => this.environmentNow(environmentId));
  }

  async records(projectId: string, environmentId: string, keys: readonly string[], segments: readonly string[] = []): Promise<Records> {
    return this.read(() => this.recordsNow(projectId, environmentId, keys, segments));
  }

  async resume(environmentId: string, after: number, limit: number): Promise<Resume | undefined> {
    return this.read(() => {
      const env = this.sqlite.query<{ environment: string; projectId: string }, [string]>(ENVIRONMENT_SQL).get(environmentId);
      if (!env) return undefined;
      const position = this.lastPosition();
      const full = (): Resume => ({ kind: "full", position, definitions: this.environmentNow(environmentId)! });
      // Ahead of the log (a restored backup), too far behind, or a gap (retention removed entries after it).
      if (after > position || position - after > MAX_RESUME_SPAN) return full();
      const { n } = this.sqlite.query<{ n: number }, [number]>(COUNT_AFTER_SQL).get(after)!;
      if (n !== position - after) return full();
      const touching = this.sqlite
        .query<{ position: number; type: string; key: string }, [number, string, string, number]>(TOUCHING_SQL)
        .all(after, env.projectId, env.environment, limit + 1);
      if (touching.length > limit) return full();
      const keys = [...new Set(touching.filter((t) => t.type !== "segment").map((t) => t.key))].sort();
      const segments = [...new Set(touching.filter((t) => t.type === "segment").map((t) => t.key))];
      const { flags, segments: used } = this.recordsNow(env.projectId, environmentId, keys, segments);
      const present = new Set(flags.map((f) => f.key));
      return { kind: "patch", position, last: touching.at(-1)?.position ?? 0, flags, deleted: keys.filter((k) => !present.has(k)), segments: used };
    });
  }

  /**
   * Every environment and its last change that alters evaluation (start-up: the stream hub's
   * `lastChange`): the newest of its project's flag and segment entries and project creation, and of its
   * own state entries and creation. The log is walked newest first and the walk stops once
   * every environment is placed (usually after a few entries; the whole log only when some
   * environment has no such entry left).
   */
  async lastChanges(): Promise<{ position: number; environments: EnvironmentChange[] }> {
    const position = this.lastPosition();
    const environments = this.sqlite
      .query<{ id: string; projectId: string; slug: string }, []>("SELECT id, project_id AS projectId, slug FROM environments ORDER BY seq")
      .all()
      .map((e): EnvironmentChange => ({ ...e, position: 0, at: 0 }));
    const placed = placer(environments);
    if (placed(null)) return { position, environments };
    const rows = this.sqlite
      .query<PlacingEntry, []>(
        `SELECT position, at, project_id AS projectId, environment, resource_type AS type, resource_id AS id, action FROM change_log
          WHERE project_id IS NOT NULL ORDER BY position DESC`,
      )
      .iterate();
    for (const row of rows) if (placed(row)) break;
    return { position, environments };
  }
}

/** A change-log entry as `lastChanges` reads it. */
export interface PlacingEntry {
  position: number;
  at: string;
  projectId: string | null;
  environment: string | null;
  type: string;
  id: string;
  action: string;
}

/**
 * `lastChanges`' walk (both implementations): fed entries newest first, it places each
 * environment on the first that alters its evaluation (its project's flag and segment entries
 * and project creation, its own state entries and creation); true once every environment is
 * placed (`null`: only asks).
 */
export function placer(environments: EnvironmentChange[]): (row: PlacingEntry | null) => boolean {
  const byProject = new Map<string, EnvironmentChange[]>();
  for (const e of environments) byProject.set(e.projectId, [...(byProject.get(e.projectId) ?? []), e]);
  let unplaced = environments.length;
  const place = (e: EnvironmentChange | undefined, row: PlacingEntry) => {
    if (e === undefined || e.position !== 0) return;
    e.position = row.position;
    e.at = Date.parse(row.at);
    unplaced--;
  };
  return (row) => {
    const envs = row?.projectId ? byProject.get(row.projectId) : undefined;
    if (row && envs) {
      if (row.type === "flag" || row.type === "segment" || (row.type === "project" && row.action === "created")) for (const e of envs) place(e, row);
      else if (row.type === "flag_state") place(envs.find((x) => x.slug === row.environment), row);
      else if (row.type === "environment" && row.action === "created") place(envs.find((x) => x.id === row.id), row);
    }
    return unplaced === 0;
  };
}
