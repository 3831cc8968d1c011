/**
 * `AuditStore` on PostgreSQL (store.ts has the interface, the SQLite implementation and what the
 * pages mean): the same keyset pages on `position` and scan windows, in the same SQL but for
 * the placeholders (`$n`) and SQLite's `INDEXED BY` (PostgreSQL's planner picks the index).
 */
import type { SQL } from "bun";
import type { ChangeEntry, ResourceType } from "../../changes/entry";
import { conditionsOf, entryOf, LATEST_LOOKBACK, SCAN_WINDOW, yieldTurn, type AuditFilter, type AuditStore, type Page, type PgChangeLogRow } from "./store";

/** SQLite's `?` placeholders of `sql` numbered as PostgreSQL's `$1, $2, ...`. */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

export class PgAuditStore implements AuditStore {
  constructor(private readonly sql: SQL) {}

  /** Rows of `change_log` (`position`, a bigint, arrives as text: made a number). */
  private async rows(text: string, values: (string | number | null)[]): Promise<PgChangeLogRow[]> {
    const rows: PgChangeLogRow[] = await this.sql.unsafe(numbered(text), values);
    for (const r of rows) r.position = Number(r.position);
    return rows;
  }

  private filtered(filter: AuditFilter): { conditions: string; values: (string | number)[]; walks: boolean } {
    const { where, values } = conditionsOf(filter);
    return { conditions: where.length > 0 ? ` AND ${where.join(" AND ")}` : "", values, walks: filter.resourceKey === undefined && where.length > 0 };
  }

  async page(filter: AuditFilter, limit: number): Promise<Page> {
    const { conditions, values, walks } = this.filtered(filter);
    const before = filter.before ?? Number.MAX_SAFE_INTEGER;
    if (!walks) {
      const rows = await this.rows(`SELECT * FROM change_log WHERE position < ?${conditions} ORDER BY position DESC LIMIT ?`, [before, ...values, limit]);
      return { entries: rows.map(entryOf), resumeBelow: null };
    }
    const text = `SELECT * FROM (SELECT * FROM change_log WHERE position < ? ORDER BY position DESC LIMIT ${SCAN_WINDOW}) AS w WHERE true${conditions} ORDER BY position DESC LIMIT ?`;
    const entries = (await this.rows(text, [before, ...values, limit])).map(entryOf);
    return { entries, resumeBelow: entries.length < limit ? await this.windowEnd(before) : null };
  }

  async position(): Promise<number> {
    const [row] = await this.sql`SELECT coalesce(max(position), 0)::float8 AS p FROM change_log`;
    return row.p;
  }

  async after(filter: AuditFilter, after: number, limit: number): Promise<{ entries: ChangeEntry[]; scannedTo: number | null }> {
    const { conditions, values, walks } = this.filtered(filter);
    if (!walks) {
      const entries = (await this.rows(`SELECT * FROM change_log WHERE position > ?${conditions} ORDER BY position LIMIT ?`, [after, ...values, limit])).map(entryOf);
      return { entries, scannedTo: entries.length < limit ? null : entries.at(-1)!.position };
    }
    const [{ last }] = await this.sql.unsafe(`SELECT max(position)::float8 AS last FROM (SELECT position FROM change_log WHERE position > $1 ORDER BY position LIMIT ${SCAN_WINDOW}) AS w`, [after]);
    if (last === null) return { entries: [], scannedTo: null };
    const text = `SELECT * FROM change_log WHERE position > ? AND position <= ?${conditions} ORDER BY position LIMIT ?`;
    const entries = (await this.rows(text, [after, last, ...values, limit])).map(entryOf);
    return { entries, scannedTo: entries.length === limit ? entries.at(-1)!.position : last };
  }

  /**
   * What other nodes committed after `after`, for the change feed (src/changes/pg-feed.ts): the
   * entries one commit at a time, oldest first, each commit whole. The rows of one commit are
   * told by their transaction id (`xmin`: one INSERT in one transaction appends them, and the
   * write lock makes their positions consecutive), not by `at` and `requestId`, which two
   * commits of the same millisecond by the system share. At least `limit` rows are read when
   * there are that many (a commit larger than `limit` is read whole).
   */
  async commitsAfter(after: number, limit: number): Promise<ChangeEntry[][]> {
    type Row = PgChangeLogRow & { tx: string };
    const rows = (await this.rows(`SELECT xmin::text AS tx, * FROM change_log WHERE position > ? ORDER BY position LIMIT ?`, [after, limit])) as Row[];
    const commits: { tx: string; rows: Row[] }[] = [];
    for (const r of rows) {
      const open = commits.at(-1);
      if (open?.tx === r.tx) open.rows.push(r);
      else commits.push({ tx: r.tx, rows: [r] });
    }
    if (rows.length === limit) {
      // The last commit may go on past the page: dropped (read next time), or, when it is the only one, read whole.
      if (commits.length > 1) commits.pop();
      else {
        const rest = (await this.rows(`SELECT xmin::text AS tx, * FROM change_log WHERE position > ? AND xmin = ?::text::xid ORDER BY position`, [rows.at(-1)!.position, commits[0]!.tx])) as Row[];
        commits[0]!.rows.push(...rest);
      }
    }
    return commits.map((c) => c.rows.map(entryOf));
  }

  async latestChange(resource: { type: ResourceType; id: string; key: string }, environment: string | null): Promise<ChangeEntry | undefined> {
    const rows = await this.rows(
      `SELECT * FROM change_log WHERE resource_key = ? AND resource_type = ? AND resource_id = ? AND environment IS NOT DISTINCT FROM ? ORDER BY position DESC LIMIT ${LATEST_LOOKBACK}`,
      [resource.key, resource.type, resource.id, environment],
    );
    return rows.map(entryOf).find((e) => Object.keys(e.changes).some((field) => field !== "stale"));
  }

  /** The lowest position of a full scan window below `before`, when older entries remain. */
  private async windowEnd(before: number): Promise<number | null> {
    const [low] = await this.sql.unsafe(`SELECT position::float8 AS position FROM change_log WHERE position < $1 ORDER BY position DESC LIMIT 1 OFFSET ${SCAN_WINDOW - 1}`, [before]);
    if (low === undefined) return null;
    const [older] = await this.sql`SELECT 1 FROM change_log WHERE position < ${low.position} LIMIT 1`;
    return older ? low.position : null;
  }

  async prune(cutoff: string, batch: number): Promise<number> {
    // As on SQLite: the last old entry first, then short deletes from the oldest on; the newest
    // entry always stays (an identity never hands a position out again, but "where the log
    // stands" is read from it).
    const [bounds] = await this.sql`SELECT (SELECT max(position) FROM change_log WHERE at < ${cutoff})::float8 AS last, (SELECT max(position) FROM change_log)::float8 AS newest`;
    if (bounds.last === null) return 0;
    const last = Math.min(bounds.last, bounds.newest - 1);
    let total = 0;
    for (;;) {
      const { count } = await this.sql`DELETE FROM change_log WHERE position IN (SELECT position FROM change_log WHERE position <= ${last} AND at < ${cutoff} ORDER BY position LIMIT ${batch})`;
      total += count;
      if (count < batch) return total;
      await yieldTurn();
    }
  }
}
