/**
 * `SegmentStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * Inside a commit every read goes through the transaction; keys in byte order as on SQLite.
 */
import { and, count, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { byteOrder } from "../../db/pg/order";
import { segments } from "../../db/pg/schema";
import { searchPage, type PageRequest, type Paged } from "../../db/paging";
import { segmentOf, type Segment, type SegmentStore, type SegmentSummary, type SegmentUse } from "./store";

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

/** The rules (enabled or not) of the project's flags whose conditions name the segment, by flag key then rule position. */
const usesOf = (projectId: string, key: string) => sql`SELECT f.key AS "flagKey", r.value->>'id' AS "ruleId"
  FROM flags f
  CROSS JOIN LATERAL json_array_elements(f.rules) WITH ORDINALITY AS r(value, n)
  CROSS JOIN LATERAL json_array_elements(r.value->'conditions') AS c(value)
  WHERE f.project_id = ${projectId} AND c.value->>'operator' IN ('in_segment', 'not_in_segment') AND c.value->>'value' = ${key}
  GROUP BY f.key, r.value->>'id'
  ORDER BY f.key COLLATE "C", min(r.n)`;

export class PgSegmentStore implements SegmentStore {
  constructor(private readonly log: PgChangeLog) {}

  private async read(db: PgQueries, projectId: string, key: string): Promise<Segment | undefined> {
    const [row] = await db.select(COLUMNS).from(segments).where(and(eq(segments.projectId, projectId), eq(segments.key, key)));
    return row && segmentOf(row);
  }

  find(projectId: string, key: string): Promise<Segment | undefined> {
    return this.read(this.log.db, projectId, key);
  }

  async list(projectId: string, filter: { q?: string }, page: PageRequest): Promise<Paged<SegmentSummary>> {
    const { db } = this.log;
    const where = eq(segments.projectId, projectId);
    const rows = db
      .select({ id: segments.id, key: segments.key, name: segments.name, createdAt: segments.createdAt, updatedAt: segments.updatedAt })
      .from(segments)
      .where(where)
      .orderBy(byteOrder(segments.key))
      .$dynamic();
    if (filter.q !== undefined && filter.q !== "") return searchPage(await rows, filter.q, page);
    const [paged, [total]] = await Promise.all([rows.limit(page.limit).offset(page.offset), db.select({ n: count() }).from(segments).where(where)]);
    return { rows: paged, total: total!.n };
  }

  create(author: Author, projectId: string, segment: Segment, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, async (tx) => void (await pgTx(tx).insert(segments).values({ ...segment, projectId })), change);
  }

  update(author: Author, projectId: string, key: string, decide: (current: Segment | undefined) => Written<Segment>): Promise<Segment> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.read(db, projectId, key);
      const written = decide(current);
      if (written.changes.length > 0) {
        const { name, description, conditions, included, excluded, updatedAt } = written.result;
        await db
          .update(segments)
          .set({ name, description: description ?? null, conditions, included, excluded, updatedAt })
          .where(eq(segments.id, current!.id));
      }
      return written;
    });
  }

  remove(author: Author, projectId: string, key: string, decide: (current: Segment | undefined, uses: SegmentUse[]) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.read(db, projectId, key);
      const uses = new Map<string, string[]>();
      if (current) {
        const rows = (await db.execute(usesOf(projectId, key))) as unknown as { flagKey: string; ruleId: string }[];
        for (const { flagKey, ruleId } of rows) uses.set(flagKey, [...(uses.get(flagKey) ?? []), ruleId]);
      }
      const change = decide(current, [...uses].map(([flagKey, ruleIds]) => ({ flagKey, ruleIds })));
      await db.delete(segments).where(eq(segments.id, current!.id));
      return { result: undefined, changes: [change] };
    });
  }
}
