/**
 * All SQL of segments, behind `SegmentStore` (asynchronous at its boundary, synchronous SQLite
 * inside). Writes take a pure `decide` of what is stored now, run in the write's transaction.
 */
import { and, asc, count, eq } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { SqliteChangeLog, Written } from "../../changes/sqlite";
import { searchPage, type PageRequest, type Paged } from "../../db/paging";
import { segments } from "../../db/schema";
import type { Condition } from "../../evaluation/types";

export interface Segment {
  id: string;
  key: string;
  name: string;
  /** Absent when not set. */
  description?: string;
  conditions: Condition[];
  included: string[];
  excluded: string[];
  createdAt: string;
  updatedAt: string;
}

export type SegmentSummary = Pick<Segment, "id" | "key" | "name" | "createdAt" | "updatedAt">;

/** A flag whose rules name a segment: what a refused delete reports. */
export interface SegmentUse {
  flagKey: string;
  ruleIds: string[];
}

export interface SegmentStore {
  find(projectId: string, key: string): Promise<Segment | undefined>;
  /** One page of the project's segments, ordered by key, and how many match; `q`: in the key or the case-folded name (`foldCase`). */
  list(projectId: string, filter: { q?: string }, page: PageRequest): Promise<Paged<SegmentSummary>>;
  /** The new segment, unless its key is taken in the project (false). */
  create(author: Author, projectId: string, segment: Segment, change: ChangeDraft): Promise<boolean>;
  update(author: Author, projectId: string, key: string, decide: (current: Segment | undefined) => Written<Segment>): Promise<Segment>;
  /** `decide` sees the flags that use it (read in the delete's transaction) and throws to refuse. */
  remove(author: Author, projectId: string, key: string, decide: (current: Segment | undefined, uses: SegmentUse[]) => ChangeDraft): Promise<void>;
}

/** A segment in its answer's field order, without a description when it has none. */
export function segmentOf(s: Omit<Segment, "description"> & { description?: string | null }): Segment {
  const { id, key, name, description, conditions, included, excluded, createdAt, updatedAt } = s;
  return { id, key, name, ...(description != null ? { description } : {}), conditions, included, excluded, createdAt, updatedAt };
}

const COLUMNS = {
  id: segments.id,
  key: segments.key,
  name: segments.name,
  description: segments.description,
  conditions: segments.conditions,
  included: segments.included,
  excluded: segments.excluded,
  createdAt: segments.createdAt,
  updatedAt: segments.updatedAt,
};

const UPDATE_SQL = "UPDATE segments SET name = ?1, description = ?2, conditions = ?3, included = ?4, excluded = ?5, updated_at = ?6 WHERE id = ?7";

/** The rules (enabled or not) of the project's flags whose conditions name the segment. */
const USES_SQL = `SELECT f.key AS flagKey, json_extract(r.value, '$.id') AS ruleId
  FROM flags f, json_each(f.rules) r, json_each(r.value, '$.conditions') c
  WHERE f.project_id = ?1 AND json_extract(c.value, '$.operator') IN ('in_segment', 'not_in_segment') AND json_extract(c.value, '$.value') = ?2
  GROUP BY f.key, ruleId ORDER BY f.key, r.key`;

export class SqliteSegmentStore implements SegmentStore {
  constructor(private readonly log: SqliteChangeLog) {}

  private findNow(projectId: string, key: string): Segment | undefined {
    const row = this.log.store.db.select(COLUMNS).from(segments).where(and(eq(segments.projectId, projectId), eq(segments.key, key))).get();
    return row && segmentOf(row);
  }

  async find(projectId: string, key: string): Promise<Segment | undefined> {
    return this.findNow(projectId, key);
  }

  async list(projectId: string, filter: { q?: string }, page: PageRequest): Promise<Paged<SegmentSummary>> {
    const { db } = this.log.store;
    const where = eq(segments.projectId, projectId);
    const rows = db
      .select({ id: segments.id, key: segments.key, name: segments.name, createdAt: segments.createdAt, updatedAt: segments.updatedAt })
      .from(segments)
      .where(where)
      .orderBy(asc(segments.key))
      .$dynamic();
    if (filter.q !== undefined && filter.q !== "") return searchPage(rows.all(), filter.q, page);
    const total = db.select({ n: count() }).from(segments).where(where).get()!.n;
    return { rows: rows.limit(page.limit).offset(page.offset).all(), total };
  }

  create(author: Author, projectId: string, segment: Segment, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, async () => void this.log.store.db.insert(segments).values({ ...segment, projectId }).run(), change);
  }

  update(author: Author, projectId: string, key: string, decide: (current: Segment | undefined) => Written<Segment>): Promise<Segment> {
    return this.log.commit(author, async () => {
      const current = this.findNow(projectId, key);
      const written = decide(current);
      if (written.changes.length > 0) {
        const { name, description, conditions, included, excluded, updatedAt } = written.result;
        this.log.store.sqlite
          .query(UPDATE_SQL)
          .run(name, description ?? null, JSON.stringify(conditions), JSON.stringify(included), JSON.stringify(excluded), updatedAt, current!.id);
      }
      return written;
    });
  }

  remove(author: Author, projectId: string, key: string, decide: (current: Segment | undefined, uses: SegmentUse[]) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const current = this.findNow(projectId, key);
      const uses = new Map<string, string[]>();
      if (current) {
        for (const { flagKey, ruleId } of this.log.store.sqlite.query<{ flagKey: string; ruleId: string }, [string, string]>(USES_SQL).all(projectId, key)) {
          uses.set(flagKey, [...(uses.get(flagKey) ?? []), ruleId]);
        }
      }
      const change = decide(current, [...uses].map(([flagKey, ruleIds]) => ({ flagKey, ruleIds })));
      this.log.store.db.delete(segments).where(eq(segments.id, current!.id)).run();
      return { result: undefined, changes: [change] };
    });
  }
}

