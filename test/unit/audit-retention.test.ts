/**
 * The audit log's retention (SVC_AUDIT_RETENTION_DAYS) on a real, migrated SQLite file: entries
 * older than the retention go, in batches, newer ones stay, and 0 keeps everything. The daily
 * job on the server's background thread is tested in test/http/audit.test.ts.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { iso } from "../../src/lib/clock";
import { sortableId } from "../../src/lib/ids";
import { PRUNE_BATCH, pruneAuditLog } from "../../src/modules/audit/retention";
import { SqliteAuditStore } from "../../src/modules/audit/store";

const dir = mkdtempSync(join(tmpdir(), "flagsvc-audit-retention-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const store = openDatabase(join(dir, "flagsvc.db"));
migrate(store.sqlite);
const audit = new SqliteAuditStore(store);
const DAY = 86_400_000;
const NOW = Date.parse("2026-11-22T10:00:00.000Z");

/** `n` entries committed `daysAgo` days before NOW, in one transaction. */
function append(n: number, daysAgo: number): void {
  const at = NOW - daysAgo * DAY;
  const insert = store.sqlite.query(
    "INSERT INTO change_log (id, at, actor_type, actor_id, actor_label, resource_type, resource_id, resource_key, action, changes) VALUES (?, ?, 'system', 'system', 'flagsvc', 'flag', 'flag_x', 'x', 'updated', '{}')",
  );
  store.sqlite.transaction(() => {
    for (let i = 0; i < n; i++) insert.run(sortableId("aud", at), iso(at));
  })();
}
const ages = () => store.sqlite.query<{ at: string; n: number }, []>("SELECT at, count(*) AS n FROM change_log GROUP BY at ORDER BY at").all();

beforeEach(() => store.sqlite.run("DELETE FROM change_log"));

test("entries older than the retention go, over several batches; newer ones and the one at the cutoff stay", async () => {
  append(2 * PRUNE_BATCH + 500, 400);
  append(3, 366);
  append(2, 365); // exactly at the cutoff: kept
  append(4, 10);
  expect(await pruneAuditLog(audit, NOW, 365)).toBe(2 * PRUNE_BATCH + 503);
  expect(ages()).toEqual([
    { at: iso(NOW - 365 * DAY), n: 2 },
    { at: iso(NOW - 10 * DAY), n: 4 },
  ]);
  // Nothing more to do the next day at the same time.
  expect(await pruneAuditLog(audit, NOW, 365)).toBe(0);
});

test("0 keeps everything", async () => {
  append(5, 10_000);
  expect(await pruneAuditLog(audit, NOW, 0)).toBe(0);
  expect(ages()).toEqual([{ at: iso(NOW - 10_000 * DAY), n: 5 }]);
});

test("a log of only old entries keeps its newest (positions are never handed out again); an empty log is left alone", async () => {
  append(1500, 40);
  const newest = store.sqlite.query<{ p: number }, []>("SELECT max(position) AS p FROM change_log").get()!.p;
  expect(await pruneAuditLog(audit, NOW, 30)).toBe(1499);
  expect(store.sqlite.query("SELECT position FROM change_log").all()).toEqual([{ position: newest }]);
  expect(await pruneAuditLog(audit, NOW, 30)).toBe(0);
  store.sqlite.run("DELETE FROM change_log");
  expect(await pruneAuditLog(audit, NOW, 30)).toBe(0);
});

test("an entry is judged by its time, not its place: an old one committed after newer ones goes, a newer one among old ones stays", async () => {
  append(3, 40);
  append(1, 5);
  append(1, 50); // a clock set back: appended after a newer one
  append(2, 40);
  append(1, 1);
  expect(await pruneAuditLog(audit, NOW, 30)).toBe(6);
  expect(ages()).toEqual([
    { at: iso(NOW - 5 * DAY), n: 1 },
    { at: iso(NOW - 1 * DAY), n: 1 },
  ]);
});
