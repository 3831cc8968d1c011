/**
 * The change-event queue on PostgreSQL (store.ts has the interfaces and the SQLite
 * implementation): positions from the table's identity (never reused, as AUTOINCREMENT), the
 * pruned high-water mark in `settings` as on SQLite. Built on whichever handle it is given: the
 * pool (the readers) or a transaction (the writes of a flag change, in its commit).
 */
import { sql } from "drizzle-orm";
import type { Actor } from "../../changes/entry";
import { rowsOf, type PgQueries } from "../../db/pg/client";
import { changeEvents } from "../../db/pg/schema";
import { sortableId } from "../../lib/ids";
import { eventPayload, type FlagChange } from "../webhooks/events";
import type { ChangeEventStore, ChangeEventWrites, QueuedEvent } from "./store";

const HIGH_WATER_KEY = "change_events.position";

/** The newest position of the queue, also once pruned (store.ts `LATEST_SQL`). */
export const LATEST = sql`SELECT greatest(coalesce((SELECT max(position) FROM change_events), 0),
  coalesce((SELECT value::bigint FROM settings WHERE key = ${HIGH_WATER_KEY}), 0))::float8 AS position`;


export class PgChangeEventStore implements ChangeEventStore, ChangeEventWrites {
  constructor(private readonly db: PgQueries) {}

  async latest(): Promise<number> {
    const [row] = await rowsOf<{ position: number }>(this.db, LATEST);
    return row!.position;
  }

  async wants(projectId: string): Promise<boolean> {
    const rows = await rowsOf(
      this.db,
      sql`SELECT 1 WHERE EXISTS (SELECT 1 FROM plugins WHERE project_id = ${projectId} AND enabled)
        OR EXISTS (SELECT 1 FROM integrations WHERE project_id = ${projectId} AND enabled)`,
    );
    return rows.length > 0;
  }

  async record(project: { id: string; slug: string }, changes: readonly FlagChange[], at: string, actor: Actor): Promise<void> {
    if (changes.length === 0) return;
    const ms = Date.parse(at);
    const who = JSON.stringify({ type: actor.type, id: actor.id, label: actor.label });
    // One statement; the identity numbers the rows in the order of VALUES.
    await this.db.insert(changeEvents).values(changes.map((c) => ({ projectId: project.id, payload: eventPayload(sortableId("evt", ms), project.slug, c, at), actor: who })));
  }

  async after(projectId: string, position: number, limit: number): Promise<QueuedEvent[]> {
    return rowsOf<QueuedEvent>(
      this.db,
      sql`SELECT position::float8 AS position, payload, actor FROM change_events WHERE project_id = ${projectId} AND position > ${position} ORDER BY position LIMIT ${limit}`,
    );
  }

  async prune(): Promise<void> {
    // The mark first (it only moves forward), then the rows every enabled reader is past; one transaction.
    const run = async (db: PgQueries) => {
      await db.execute(sql`INSERT INTO settings (key, value, updated_at)
        SELECT ${HIGH_WATER_KEY}, max(position)::text, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM change_events HAVING max(position) IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
        WHERE excluded.value::bigint > settings.value::bigint`);
      await db.execute(sql`DELETE FROM change_events c WHERE position <= coalesce(
        (SELECT min(p) FROM (
           SELECT event_position AS p FROM plugins WHERE project_id = c.project_id AND enabled
           UNION ALL
           SELECT event_position AS p FROM integrations WHERE project_id = c.project_id AND enabled) AS r),
        9223372036854775807)`);
    };
    await this.db.transaction(run);
  }
}
