/**
 * All SQL of flags and their states, behind `FlagStore`: asynchronous at its boundary (a
 * PostgreSQL implementation stands behind the same interface), synchronous SQLite inside.
 *
 * Writes take the author and a pure `decide` function of what is stored now: it runs inside
 * the write's transaction (on PostgreSQL, after `SELECT ... FOR UPDATE`), throws to refuse, and
 * returns the record to store with the change-log entries it makes; no entry, nothing written.
 */
import { and, asc, count, eq, exists, isNotNull, isNull, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { SqliteChangeLog, Written } from "../../changes/sqlite";
import { prepared } from "../../db/client";
import { searchPage, type PageRequest, type Paged } from "../../db/paging";
import type { Stale, StaleReason } from "../insights/store";
import { environments, flags, flagStale, flagStates, projects, segments } from "../../db/schema";
import type { ProjectData } from "../../evaluation/snapshot";
import { DEFAULT_BUCKET_BY, type FlagDefinition, type FlagState as StateValues, type Prerequisite, type Rule, type SegmentDefinition, type Variant } from "../../evaluation/types";

export interface Flag {
  id: string;
  key: string;
  name: string;
  /** Absent when not set (the spec: "string, optional"). */
  description?: string;
  variants: Variant[];
  rules: Rule[];
  /** The attribute rollouts and weights bucket by; absent: `userId` (the default is never shown). */
  bucketBy?: string;
  /** The flags that must be met first (docs/targeting.md, Prerequisites); absent: none (never shown empty). */
  prerequisites?: Prerequisite[];
  createdAt: string;
  updatedAt: string;
}

/** A flag as prerequisites are checked against it: its key, variant keys and prerequisites. */
export interface FlagLink {
  key: string;
  variants: string[];
  prerequisites: Prerequisite[];
}

export type FlagSummary = Pick<Flag, "id" | "key" | "name" | "createdAt" | "updatedAt">;

/** A flag as its list shows it: with its staleness (null: not stale). */
export type FlagListItem = FlagSummary & { stale: Stale | null };

/** A list row with its staleness (`flag_stale`'s reason and since, null when not stale). */
export function listItemOf({ reason, since, ...flag }: FlagSummary & { reason: string | null; since: string | null }): FlagListItem {
  return { ...flag, stale: reason === null || since === null ? null : { reason: reason as StaleReason, since } };
}

export interface FlagFilter {
  environmentId?: string;
  enabled?: boolean;
  stale?: boolean;
  q?: string;
}

/** What a flag write checks against, each read in the write's transaction when called. */
export interface FlagWriteReads {
  /** The project's flags as prerequisites see them. */
  links(): FlagLink[];
  /** The project's segment keys: what in_segment may name (a segment deleted meanwhile cannot slip through). */
  segmentKeys(): ReadonlySet<string>;
}

/** A stored state row. */
export interface StateRow {
  enabled: boolean;
  rolloutPercentage: number | null;
  updatedAt: string;
}

/** A flag's state rows by environment slug (a deleted flag's entry holds them). */
export type StatesBySlug = Record<string, { enabled: boolean; rolloutPercentage: number | null }>;

export interface FlagStore {
  find(projectId: string, key: string): Promise<Flag | undefined>;
  /**
   * One page of the project's flags, ordered by key, each with its staleness, and how many match:
   * `environmentId`: only flags with a state row there (`enabled`: with that value); `stale`:
   * only stale flags, or only the others; `q`: in the key or the case-folded name (`foldCase`).
   */
  list(projectId: string, filter: FlagFilter, page: PageRequest): Promise<Paged<FlagListItem>>;
  state(flagId: string, environmentId: string): Promise<StateRow | undefined>;
  /** The state rows of these flags, in every environment where one was set: one query (a list page's states). */
  statesOf(flagIds: readonly string[]): Promise<(StateRow & { flagId: string; environmentId: string })[]>;
  /**
   * The new flag, unless its key is taken in the project (false). `check`, when given, runs in
   * the write's transaction first and throws to refuse.
   */
  create(author: Author, projectId: string, flag: Flag, change: ChangeDraft, check?: (reads: FlagWriteReads) => void): Promise<boolean>;
  update(author: Author, projectId: string, key: string, decide: (current: Flag | undefined, reads: FlagWriteReads) => Written<Flag>): Promise<Flag>;
  /** The flag and (cascade) its states; `decide` sees the states it had and the keys of the flags that have it as a prerequisite. */
  remove(author: Author, projectId: string, key: string, decide: (current: Flag | undefined, states: StatesBySlug, dependants: string[]) => ChangeDraft): Promise<void>;
  putState(
    author: Author,
    projectId: string,
    key: string,
    environmentId: string,
    decide: (flag: Flag | undefined, current: StateRow | undefined) => Written<StateRow>,
  ): Promise<StateRow>;
}

/** What the evaluation snapshot reads (flags/snapshot.ts). */
export interface SnapshotSource {
  /** Every project's id (start-up fills the snapshot from them). */
  projectIds(): Promise<string[]>;
  /** A project's environments, flags and states; undefined once it is gone. */
  project(projectId: string): Promise<ProjectData | undefined>;
  definition(flagId: string): Promise<FlagDefinition | undefined>;
  /** A segment as the engine compiles it (docs/targeting.md, Segments); undefined once it is gone. */
  segment(segmentId: string): Promise<SegmentDefinition | undefined>;
  /** The state of a flag in the project's environment of this slug (undefined: no row, or gone). */
  stateIn(flagId: string, projectId: string, environment: string): Promise<{ environmentId: string; state: StateValues | null } | undefined>;
}

const FLAG_COLUMNS = {
  id: flags.id,
  key: flags.key,
  name: flags.name,
  description: flags.description,
  variants: flags.variants,
  rules: flags.rules,
  bucketBy: flags.bucketBy,
  prerequisites: flags.prerequisites,
  createdAt: flags.createdAt,
  updatedAt: flags.updatedAt,
};

const queries = prepared((db) => ({
  flag: db
    .select(FLAG_COLUMNS)
    .from(flags)
    .where(and(eq(flags.projectId, sql.placeholder("projectId")), eq(flags.key, sql.placeholder("key"))))
    .prepare(),
  definition: db
    .select({ key: flags.key, variants: flags.variants, rules: flags.rules, bucketBy: flags.bucketBy, prerequisites: flags.prerequisites })
    .from(flags)
    .where(eq(flags.id, sql.placeholder("flagId")))
    .prepare(),
  state: db
    .select({ enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage, updatedAt: flagStates.updatedAt })
    .from(flagStates)
    .where(and(eq(flagStates.flagId, sql.placeholder("flagId")), eq(flagStates.environmentId, sql.placeholder("environmentId"))))
    .prepare(),
  links: db
    .select({ key: flags.key, variants: flags.variants, prerequisites: flags.prerequisites })
    .from(flags)
    .where(eq(flags.projectId, sql.placeholder("projectId")))
    .orderBy(asc(flags.key))
    .prepare(),
  /** The flags of a project that have prerequisites (few): where a delete looks for dependants. */
  withPrerequisites: db
    .select({ key: flags.key, prerequisites: flags.prerequisites })
    .from(flags)
    .where(and(eq(flags.projectId, sql.placeholder("projectId")), isNotNull(flags.prerequisites)))
    .orderBy(asc(flags.key))
    .prepare(),
  statesBySlug: db
    .select({ slug: environments.slug, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
    .from(flagStates)
    .innerJoin(environments, eq(environments.id, flagStates.environmentId))
    .where(eq(flagStates.flagId, sql.placeholder("flagId")))
    .orderBy(asc(environments.seq))
    .prepare(),
  /** A state PUT's write: the row, created or replaced. */
  upsertState: db
    .insert(flagStates)
    .values({
      flagId: sql.placeholder("flagId"),
      environmentId: sql.placeholder("environmentId"),
      enabled: sql.placeholder("enabled"),
      rolloutPercentage: sql.placeholder("rolloutPercentage"),
      updatedAt: sql.placeholder("updatedAt"),
    })
    .onConflictDoUpdate({
      target: [flagStates.flagId, flagStates.environmentId],
      set: { enabled: sql`excluded.enabled`, rolloutPercentage: sql`excluded.rollout_percentage`, updatedAt: sql`excluded.updated_at` },
    })
    .prepare(),
}));

/**
 * A flag in its answer's field order, without a description when it has none (null, undefined)
 * without `bucketBy` when it is the default (absent, null or `userId`), and without
 * `prerequisites` when it has none (absent, null or empty): a flag that does not set them
 * answers exactly as before the fields existed.
 */
export function flagOf(
  f: Omit<Flag, "description" | "bucketBy" | "prerequisites"> & { description?: string | null; bucketBy?: string | null; prerequisites?: Prerequisite[] | null },
): Flag {
  const { id, key, name, description, variants, rules, bucketBy, prerequisites, createdAt, updatedAt } = f;
  return {
    id,
    key,
    name,
    ...(description != null ? { description } : {}),
    variants,
    rules,
    ...(bucketBy != null && bucketBy !== DEFAULT_BUCKET_BY ? { bucketBy } : {}),
    ...(prerequisites != null && prerequisites.length > 0 ? { prerequisites } : {}),
    createdAt,
    updatedAt,
  };
}

const UPDATE_FLAG_SQL =
  "UPDATE flags SET name = ?1, description = ?2, variants = ?3, rules = ?4, bucket_by = ?5, prerequisites = ?6, updated_at = ?7 WHERE id = ?8";

const STATES_OF_SQL = `SELECT flag_id AS flagId, environment_id AS environmentId, enabled, rollout_percentage AS rolloutPercentage, updated_at AS updatedAt
  FROM flag_states WHERE flag_id IN (SELECT value FROM json_each(?1))`;

const STATE_IN_SQL = `SELECT e.id AS environmentId, s.enabled AS enabled, s.rollout_percentage AS rolloutPercentage
  FROM environments e LEFT JOIN flag_states s ON s.environment_id = e.id AND s.flag_id = ?1
  WHERE e.project_id = ?2 AND e.slug = ?3`;

export class SqliteFlagStore implements FlagStore, SnapshotSource {
  constructor(private readonly log: SqliteChangeLog) {}

  private get q() {
    return queries(this.log.store);
  }

  private findNow(projectId: string, key: string): Flag | undefined {
    const row = this.q.flag.get({ projectId, key });
    return row && flagOf(row);
  }

  async find(projectId: string, key: string): Promise<Flag | undefined> {
    return this.findNow(projectId, key);
  }

  async list(projectId: string, filter: FlagFilter, page: PageRequest): Promise<Paged<FlagListItem>> {
    const { db } = this.log.store;
    const conditions = [eq(flags.projectId, projectId)];
    if (filter.environmentId !== undefined) {
      const state = [eq(flagStates.flagId, flags.id), eq(flagStates.environmentId, filter.environmentId)];
      if (filter.enabled !== undefined) state.push(eq(flagStates.enabled, filter.enabled));
      conditions.push(exists(db.select({ one: flagStates.flagId }).from(flagStates).where(and(...state))));
    }
    if (filter.stale !== undefined) conditions.push(filter.stale ? isNotNull(flagStale.flagId) : isNull(flagStale.flagId));
    const where = and(...conditions);
    const rows = db
      .select({ id: flags.id, key: flags.key, name: flags.name, createdAt: flags.createdAt, updatedAt: flags.updatedAt, reason: flagStale.reason, since: flagStale.since })
      .from(flags)
      .leftJoin(flagStale, eq(flagStale.flagId, flags.id))
      .where(where)
      .orderBy(asc(flags.key))
      .$dynamic();
    if (filter.q !== undefined && filter.q !== "") return searchPage(rows.all().map(listItemOf), filter.q, page);
    const total = db.select({ n: count() }).from(flags).leftJoin(flagStale, eq(flagStale.flagId, flags.id)).where(where).get()!.n;
    return { rows: rows.limit(page.limit).offset(page.offset).all().map(listItemOf), total };
  }

  async state(flagId: string, environmentId: string): Promise<StateRow | undefined> {
    return this.q.state.get({ flagId, environmentId });
  }

  async statesOf(flagIds: readonly string[]): Promise<(StateRow & { flagId: string; environmentId: string })[]> {
    return this.log.store.sqlite
      .query<Omit<StateRow, "enabled"> & { flagId: string; environmentId: string; enabled: number }, [string]>(STATES_OF_SQL)
      .all(JSON.stringify(flagIds))
      .map((r) => ({ ...r, enabled: r.enabled === 1 }));
  }

  /** What a write of the project's flags checks against, read in its transaction when asked. */
  private readsOf(projectId: string): FlagWriteReads {
    return {
      links: () => this.q.links.all({ projectId }).map((r) => ({ key: r.key, variants: r.variants.map((v) => v.key), prerequisites: r.prerequisites ?? [] })),
      segmentKeys: () => new Set(this.log.store.db.select({ key: segments.key }).from(segments).where(eq(segments.projectId, projectId)).all().map((r) => r.key)),
    };
  }

  create(author: Author, projectId: string, flag: Flag, change: ChangeDraft, check?: (reads: FlagWriteReads) => void): Promise<boolean> {
    return this.log.create(
      author,
      async () => {
        check?.(this.readsOf(projectId));
        this.log.store.db.insert(flags).values({ ...flag, projectId }).run();
      },
      change,
    );
  }

  update(author: Author, projectId: string, key: string, decide: (current: Flag | undefined, reads: FlagWriteReads) => Written<Flag>): Promise<Flag> {
    return this.log.commit(author, async () => {
      const current = this.findNow(projectId, key);
      const written = decide(current, this.readsOf(projectId));
      if (written.changes.length > 0) {
        const { name, description, variants, rules, bucketBy, prerequisites, updatedAt } = written.result;
        // Prepared once: built by drizzle on each call, this update cost a PATCH ~0.2 ms.
        this.log.store.sqlite
          .query(UPDATE_FLAG_SQL)
          .run(
            name,
            description ?? null,
            JSON.stringify(variants),
            JSON.stringify(rules),
            bucketBy ?? null,
            prerequisites === undefined ? null : JSON.stringify(prerequisites),
            updatedAt,
            current!.id,
          );
      }
      return written;
    });
  }

  remove(
    author: Author,
    projectId: string,
    key: string,
    decide: (current: Flag | undefined, states: StatesBySlug, dependants: string[]) => ChangeDraft,
  ): Promise<void> {
    return this.log.commit(author, async () => {
      const current = this.findNow(projectId, key);
      const states: StatesBySlug = {};
      if (current) for (const { slug, ...s } of this.q.statesBySlug.all({ flagId: current.id })) states[slug] = s;
      const dependants = this.q.withPrerequisites
        .all({ projectId })
        .filter((r) => r.prerequisites?.some((p) => p.flagKey === key))
        .map((r) => r.key);
      const change = decide(current, states, dependants);
      // States go with it (foreign key cascade).
      this.log.store.db.delete(flags).where(eq(flags.id, current!.id)).run();
      return { result: undefined, changes: [change] };
    });
  }

  putState(
    author: Author,
    projectId: string,
    key: string,
    environmentId: string,
    decide: (flag: Flag | undefined, current: StateRow | undefined) => Written<StateRow>,
  ): Promise<StateRow> {
    return this.log.commit(author, async () => {
      const flag = this.findNow(projectId, key);
      const written = decide(flag, flag && this.q.state.get({ flagId: flag.id, environmentId }));
      if (written.changes.length > 0) this.q.upsertState.run({ flagId: flag!.id, environmentId, ...written.result });
      return written;
    });
  }

  // ---- the snapshot's source -----------------------------------------------------------------

  async project(projectId: string): Promise<ProjectData | undefined> {
    const { db } = this.log.store;
    const project = db.select({ slug: projects.slug }).from(projects).where(eq(projects.id, projectId)).get();
    if (!project) return undefined;
    const envs = db.select({ id: environments.id, slug: environments.slug }).from(environments).where(eq(environments.projectId, projectId)).orderBy(asc(environments.seq)).all();
    const defs = db
      .select({ key: flags.key, variants: flags.variants, rules: flags.rules, bucketBy: flags.bucketBy, prerequisites: flags.prerequisites })
      .from(flags)
      .where(eq(flags.projectId, projectId))
      .orderBy(asc(flags.key))
      .all();
    const states = db
      .select({ flagKey: flags.key, environmentId: flagStates.environmentId, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
      .from(flagStates)
      .innerJoin(flags, eq(flags.id, flagStates.flagId))
      .where(eq(flags.projectId, projectId))
      .all()
      .map(({ flagKey, environmentId, enabled, rolloutPercentage }) => ({ flagKey, environmentId, state: { enabled, rolloutPercentage } }));
    const segs = db
      .select({ key: segments.key, conditions: segments.conditions, included: segments.included, excluded: segments.excluded })
      .from(segments)
      .where(eq(segments.projectId, projectId))
      .all();
    return { slug: project.slug, environmentIds: envs.map((e) => e.id), environmentSlugs: envs.map((e) => e.slug), flags: defs, states, segments: segs };
  }

  async projectIds(): Promise<string[]> {
    return this.log.store.db.select({ id: projects.id }).from(projects).all().map((p) => p.id);
  }

  async definition(flagId: string): Promise<FlagDefinition | undefined> {
    return this.q.definition.get({ flagId });
  }

  async segment(segmentId: string): Promise<SegmentDefinition | undefined> {
    return this.log.store.db
      .select({ key: segments.key, conditions: segments.conditions, included: segments.included, excluded: segments.excluded })
      .from(segments)
      .where(eq(segments.id, segmentId))
      .get();
  }

  async stateIn(flagId: string, projectId: string, environment: string): Promise<{ environmentId: string; state: StateValues | null } | undefined> {
    // One statement: this runs after every state write.
    const row = this.log.store.sqlite
      .query<{ environmentId: string; enabled: number | null; rolloutPercentage: number | null }, [string, string, string]>(STATE_IN_SQL)
      .get(flagId, projectId, environment);
    if (!row) return undefined;
    return { environmentId: row.environmentId, state: row.enabled === null ? null : { enabled: row.enabled === 1, rolloutPercentage: row.rolloutPercentage } };
  }
}
