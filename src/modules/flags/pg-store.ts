/**
 * `FlagStore` and the snapshot's `SnapshotSource` on PostgreSQL (store.ts has the interfaces and
 * the SQLite implementation). Inside a commit every read goes through the transaction (the change
 * log's write lock makes it see every earlier commit). `FlagWriteReads` is synchronous, so a
 * write reads what it checks against (the project's flags and segment keys) in its transaction
 * before `decide` runs. Keys are ordered `COLLATE "C"`: byte order, as SQLite orders them,
 * whatever the database's locale.
 */
import { and, asc, count, eq, exists, inArray, isNotNull, isNull } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { byteOrder } from "../../db/pg/order";
import { environments, flags, flagStale, flagStates, projects, segments } from "../../db/pg/schema";
import { searchPage, type PageRequest, type Paged } from "../../db/paging";
import type { ProjectData } from "../../evaluation/snapshot";
import type { FlagDefinition, FlagState as StateValues, SegmentDefinition } from "../../evaluation/types";
import { flagOf, listItemOf, type Flag, type FlagFilter, type FlagListItem, type FlagStore, type FlagWriteReads, type SnapshotSource, type StateRow, type StatesBySlug } from "./store";

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
const DEFINITION = { key: flags.key, variants: flags.variants, rules: flags.rules, bucketBy: flags.bucketBy, prerequisites: flags.prerequisites };
const SEGMENT_DEFINITION = { key: segments.key, conditions: segments.conditions, included: segments.included, excluded: segments.excluded };
const STATE = { enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage, updatedAt: flagStates.updatedAt };

export class PgFlagStore implements FlagStore, SnapshotSource {
  constructor(private readonly log: PgChangeLog) {}

  private async read(db: PgQueries, projectId: string, key: string): Promise<Flag | undefined> {
    const [row] = await db.select(FLAG_COLUMNS).from(flags).where(and(eq(flags.projectId, projectId), eq(flags.key, key)));
    return row && flagOf(row);
  }

  find(projectId: string, key: string): Promise<Flag | undefined> {
    return this.read(this.log.db, projectId, key);
  }

  async list(projectId: string, filter: FlagFilter, page: PageRequest): Promise<Paged<FlagListItem>> {
    const { db } = this.log;
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
      .orderBy(byteOrder(flags.key))
      .$dynamic();
    if (filter.q !== undefined && filter.q !== "") return searchPage((await rows).map(listItemOf), filter.q, page);
    const [paged, [total]] = await Promise.all([
      rows.limit(page.limit).offset(page.offset),
      db.select({ n: count() }).from(flags).leftJoin(flagStale, eq(flagStale.flagId, flags.id)).where(where),
    ]);
    return { rows: paged.map(listItemOf), total: total!.n };
  }

  async state(flagId: string, environmentId: string): Promise<StateRow | undefined> {
    return this.stateNow(this.log.db, flagId, environmentId);
  }

  private async stateNow(db: PgQueries, flagId: string, environmentId: string): Promise<StateRow | undefined> {
    const [row] = await db.select(STATE).from(flagStates).where(and(eq(flagStates.flagId, flagId), eq(flagStates.environmentId, environmentId)));
    return row;
  }

  async statesOf(flagIds: readonly string[]): Promise<(StateRow & { flagId: string; environmentId: string })[]> {
    if (flagIds.length === 0) return [];
    return this.log.db
      .select({ flagId: flagStates.flagId, environmentId: flagStates.environmentId, ...STATE })
      .from(flagStates)
      .where(inArray(flagStates.flagId, [...flagIds]));
  }

  /** What a write of the project's flags checks against, read now in its transaction. */
  private async readsOf(db: PgQueries, projectId: string): Promise<FlagWriteReads> {
    const links = await db
      .select({ key: flags.key, variants: flags.variants, prerequisites: flags.prerequisites })
      .from(flags)
      .where(eq(flags.projectId, projectId))
      .orderBy(byteOrder(flags.key));
    const keys = await db.select({ key: segments.key }).from(segments).where(eq(segments.projectId, projectId));
    const flagLinks = links.map((r) => ({ key: r.key, variants: r.variants.map((v) => v.key), prerequisites: r.prerequisites ?? [] }));
    const segmentKeys = new Set(keys.map((r) => r.key));
    return { links: () => flagLinks, segmentKeys: () => segmentKeys };
  }

  create(author: Author, projectId: string, flag: Flag, change: ChangeDraft, check?: (reads: FlagWriteReads) => void): Promise<boolean> {
    return this.log.create(
      author,
      async (tx) => {
        const db = pgTx(tx);
        if (check) check(await this.readsOf(db, projectId));
        await db.insert(flags).values({ ...flag, projectId });
      },
      change,
    );
  }

  update(author: Author, projectId: string, key: string, decide: (current: Flag | undefined, reads: FlagWriteReads) => Written<Flag>): Promise<Flag> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.read(db, projectId, key);
      const written = decide(current, await this.readsOf(db, projectId));
      if (written.changes.length > 0) {
        const { name, description, variants, rules, bucketBy, prerequisites, updatedAt } = written.result;
        await db
          .update(flags)
          .set({ name, description: description ?? null, variants, rules, bucketBy: bucketBy ?? null, prerequisites: prerequisites ?? null, updatedAt })
          .where(eq(flags.id, current!.id));
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
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.read(db, projectId, key);
      const states: StatesBySlug = {};
      if (current) {
        const rows = await db
          .select({ slug: environments.slug, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
          .from(flagStates)
          .innerJoin(environments, eq(environments.id, flagStates.environmentId))
          .where(eq(flagStates.flagId, current.id))
          .orderBy(asc(environments.seq));
        for (const { slug, ...s } of rows) states[slug] = s;
      }
      const dependants = (
        await db
          .select({ key: flags.key, prerequisites: flags.prerequisites })
          .from(flags)
          .where(and(eq(flags.projectId, projectId), isNotNull(flags.prerequisites)))
          .orderBy(byteOrder(flags.key))
      )
        .filter((r) => r.prerequisites?.some((p) => p.flagKey === key))
        .map((r) => r.key);
      const change = decide(current, states, dependants);
      // States go with it (foreign key cascade).
      await db.delete(flags).where(eq(flags.id, current!.id));
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
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const flag = await this.read(db, projectId, key);
      const written = decide(flag, flag && (await this.stateNow(db, flag.id, environmentId)));
      if (written.changes.length > 0) {
        const { enabled, rolloutPercentage, updatedAt } = written.result;
        await db
          .insert(flagStates)
          .values({ flagId: flag!.id, environmentId, enabled, rolloutPercentage, updatedAt })
          .onConflictDoUpdate({ target: [flagStates.flagId, flagStates.environmentId], set: { enabled, rolloutPercentage, updatedAt } });
      }
      return written;
    });
  }

  // ---- the snapshot's source -----------------------------------------------------------------

  /** One consistent read of the project (a repeatable-read, read-only transaction), as SQLite's synchronous reads are. */
  project(projectId: string): Promise<ProjectData | undefined> {
    return this.log.db.transaction(
      async (db) => {
        const [project] = await db.select({ slug: projects.slug }).from(projects).where(eq(projects.id, projectId));
        if (!project) return undefined;
        const envs = await db.select({ id: environments.id, slug: environments.slug }).from(environments).where(eq(environments.projectId, projectId)).orderBy(asc(environments.seq));
        const defs = await db.select(DEFINITION).from(flags).where(eq(flags.projectId, projectId)).orderBy(byteOrder(flags.key));
        const states = (
          await db
            .select({ flagKey: flags.key, environmentId: flagStates.environmentId, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
            .from(flagStates)
            .innerJoin(flags, eq(flags.id, flagStates.flagId))
            .where(eq(flags.projectId, projectId))
        ).map(({ flagKey, environmentId, enabled, rolloutPercentage }) => ({ flagKey, environmentId, state: { enabled, rolloutPercentage } }));
        const segs = await db.select(SEGMENT_DEFINITION).from(segments).where(eq(segments.projectId, projectId));
        return { slug: project.slug, environmentIds: envs.map((e) => e.id), environmentSlugs: envs.map((e) => e.slug), flags: defs, states, segments: segs };
      },
      { isolationLevel: "repeatable read", accessMode: "read only" },
    );
  }

  async projectIds(): Promise<string[]> {
    return (await this.log.db.select({ id: projects.id }).from(projects)).map((p) => p.id);
  }

  async definition(flagId: string): Promise<FlagDefinition | undefined> {
    const [row] = await this.log.db.select(DEFINITION).from(flags).where(eq(flags.id, flagId));
    return row;
  }

  async segment(segmentId: string): Promise<SegmentDefinition | undefined> {
    const [row] = await this.log.db.select(SEGMENT_DEFINITION).from(segments).where(eq(segments.id, segmentId));
    return row;
  }

  async stateIn(flagId: string, projectId: string, environment: string): Promise<{ environmentId: string; state: StateValues | null } | undefined> {
    // One statement: this runs after every state write.
    const [row] = await this.log.db
      .select({ environmentId: environments.id, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
      .from(environments)
      .leftJoin(flagStates, and(eq(flagStates.environmentId, environments.id), eq(flagStates.flagId, flagId)))
      .where(and(eq(environments.projectId, projectId), eq(environments.slug, environment)));
    if (!row) return undefined;
    return { environmentId: row.environmentId, state: row.enabled === null ? null : { enabled: row.enabled, rolloutPercentage: row.rolloutPercentage } };
  }
}
