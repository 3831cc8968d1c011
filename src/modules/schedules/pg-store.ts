/**
 * `ScheduleStore` on PostgreSQL (store.ts has the interface, the SQLite implementation and its
 * participant's rule).
 *
 * Several nodes run the scheduler on one database, so `due` claims what it returns: one
 * statement sets `claimed_until` (now + `CLAIM_MS`) on pending schedules whose time has come and
 * that no node holds, picked with `FOR UPDATE SKIP LOCKED`. Two nodes never get the same
 * schedule while its claim holds; the schedule stays `pending` (lists, cancel, the participant
 * see it as on SQLite) until its own state write marks it applied. A node that dies holding
 * one, or a failure that could not be recorded, lets it go when the claim lapses: another run
 * (on any node) takes it again then.
 */
import { and, asc, count, eq, isNull, lte, or, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Participant, Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { byteOrder } from "../../db/pg/order";
import { schedules } from "../../db/pg/schema";
import { iso } from "../../lib/clock";
import type { Schedule, ScheduleStatus, ScheduleStore } from "./store";

/** How long a node holds the schedules `due` gave it (an application takes milliseconds). */
export const CLAIM_MS = 60_000;

type Row = typeof schedules.$inferSelect;

const scheduleOf = (r: Row): Schedule => ({
  id: r.id,
  projectId: r.projectId,
  flagId: r.flagId,
  flagKey: r.flagKey,
  environmentId: r.environmentId,
  environment: r.environment,
  at: r.at,
  state: r.state,
  status: r.status as ScheduleStatus,
  createdBy: { type: r.createdByType as Schedule["createdBy"]["type"], id: r.createdById, label: r.createdByLabel },
  createdAt: r.createdAt,
  appliedAt: r.appliedAt,
  error: r.error,
});

/** By `at` (ISO times: the same order in any collation), then id in byte order (as SQLite). */
const byTime = (a: Schedule, b: Schedule) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export class PgScheduleStore implements ScheduleStore {
  constructor(private readonly log: PgChangeLog) {}

  private async read(db: PgQueries, projectId: string, id: string): Promise<Schedule | undefined> {
    const [row] = await db.select().from(schedules).where(and(eq(schedules.projectId, projectId), eq(schedules.id, id)));
    return row && scheduleOf(row);
  }

  find(projectId: string, id: string): Promise<Schedule | undefined> {
    return this.read(this.log.db, projectId, id);
  }

  async list(projectId: string, filter: { flagId?: string; status?: ScheduleStatus }): Promise<Schedule[]> {
    const rows = await this.log.db
      .select()
      .from(schedules)
      .where(
        and(
          eq(schedules.projectId, projectId),
          filter.flagId !== undefined ? eq(schedules.flagId, filter.flagId) : undefined,
          filter.status !== undefined ? eq(schedules.status, filter.status) : undefined,
        ),
      )
      .orderBy(asc(schedules.at), byteOrder(schedules.id));
    return rows.map(scheduleOf);
  }

  async countPending(dueBy?: string): Promise<number> {
    const [row] = await this.log.db
      .select({ n: count() })
      .from(schedules)
      .where(and(eq(schedules.status, "pending"), dueBy !== undefined ? lte(schedules.at, dueBy) : undefined));
    return row!.n;
  }

  /** Claims them (see above): the pending schedules due by `now` that no node holds, by `at` then id; at most `limit`. */
  async due(now: string, limit: number): Promise<Schedule[]> {
    const claimable = this.log.db
      .select({ id: schedules.id })
      .from(schedules)
      .where(and(eq(schedules.status, "pending"), lte(schedules.at, now), or(isNull(schedules.claimedUntil), lte(schedules.claimedUntil, now))))
      .orderBy(asc(schedules.at), byteOrder(schedules.id))
      .limit(limit)
      .for("update", { skipLocked: true });
    const rows = await this.log.db
      .update(schedules)
      .set({ claimedUntil: iso(Date.parse(now) + CLAIM_MS) })
      .where(sql`${schedules.id} IN ${claimable}`)
      .returning();
    // RETURNING has no order.
    return rows.map(scheduleOf).sort(byTime);
  }

  async create(author: Author, rows: readonly Schedule[], changes: readonly ChangeDraft[]): Promise<void> {
    await this.log.commit(author, async (tx) => {
      if (rows.length > 0) {
        await pgTx(tx)
          .insert(schedules)
          .values(
            rows.map(({ createdBy, ...s }) => ({ ...s, createdByType: createdBy.type, createdById: createdBy.id, createdByLabel: createdBy.label })),
          );
      }
      return { result: undefined, changes };
    });
  }

  update(author: Author, projectId: string, id: string, decide: (current: Schedule | undefined) => Written<Schedule>): Promise<Schedule> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await this.read(db, projectId, id));
      if (written.changes.length > 0) {
        const { status, appliedAt, error } = written.result;
        await db.update(schedules).set({ status, appliedAt, error }).where(eq(schedules.id, id));
      }
      return written;
    });
  }

  async markApplied(id: string, at: string): Promise<void> {
    await this.log.db
      .update(schedules)
      .set({ status: "applied", appliedAt: at })
      .where(and(eq(schedules.id, id), eq(schedules.status, "pending")));
  }

  /** The change log's participant: a schedule's own flag-state write marks it applied, in its transaction (store.ts: the conditions). */
  readonly participant: Participant = async (tx, entries) => {
    for (const e of entries) {
      if (e.resource.type !== "flag_state" || e.requestId === null || !e.requestId.startsWith("sch_")) continue;
      await pgTx(tx)
        .update(schedules)
        .set({ status: "applied", appliedAt: e.at })
        .where(
          and(
            eq(schedules.id, e.requestId),
            eq(schedules.status, "pending"),
            eq(schedules.flagId, e.resource.id),
            eq(schedules.createdById, e.actor.id),
            lte(schedules.at, e.at),
          ),
        );
    }
    return undefined;
  };
}
