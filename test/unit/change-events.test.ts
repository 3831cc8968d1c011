/**
 * The change-event queue's rows (src/modules/change-events/store.ts) on a real SQLite file:
 * a project is wanted while it has an enabled plugin or integration; the actor is stored beside
 * each payload; `latest` survives pruning; prune keeps what the slowest enabled reader of the
 * project (plugin or integration) has not passed, and nothing of a project without one.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { SqliteChangeEventStore } from "../../src/modules/change-events/store";
import { tempDir } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("wants, record with the actor, after, latest, prune by the slowest enabled reader of both kinds", async () => {
  const { sqlite } = openDatabase(join(dir, "flagsvc.db"));
  migrate(sqlite);
  const at = "2026-11-26T10:00:00.000Z";
  for (const p of ["p1", "p2"]) sqlite.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)", [p, p, p, at, at]);
  const rows = new SqliteChangeEventStore(sqlite);
  expect(await rows.wants("p1")).toBe(false);
  sqlite.run("INSERT INTO integrations (id, project_id, type, config, enabled, created_at, updated_at) VALUES ('int_1', 'p1', 'slack', '{}', 1, ?, ?)", [at, at]);
  sqlite.run("INSERT INTO plugins (id, project_id, package_name, version, enabled, status, config, installed_at, updated_at) VALUES ('plugin_1', 'p1', '@x/y', '1.0.0', 1, 'active', '{}', ?, ?)", [at, at]);
  expect(await rows.wants("p1")).toBe(true);
  expect(await rows.wants("p2")).toBe(false);

  const actor = { type: "admin_key" as const, id: "ak_1", label: "release-bot" };
  const change = (flagKey: string) => ({ event: "flag.enabled" as const, environment: "production", flagKey, previous: false, current: true });
  await rows.record({ id: "p1", slug: "p1" }, ["a", "b", "c", "d"].map(change), at, actor);
  await rows.record({ id: "p2", slug: "p2" }, [change("z")], at, actor);
  const all = await rows.after("p1", 0, 10);
  expect(all.map((r) => JSON.parse(r.payload).data.flagKey)).toEqual(["a", "b", "c", "d"]);
  expect(JSON.parse(all[0]!.actor)).toEqual(actor);
  expect(await rows.latest()).toBe(5);

  // The plugin is at 3, the integration at 1: rows after 1 stay.
  sqlite.run("UPDATE plugins SET event_position = 3");
  sqlite.run("UPDATE integrations SET event_position = 1");
  await rows.prune();
  expect((await rows.after("p1", 0, 10)).map((r) => r.position)).toEqual([2, 3, 4]);
  // p2 has no reader: its rows go.
  expect(await rows.after("p2", 0, 10)).toEqual([]);
  // A disabled integration holds nothing back.
  sqlite.run("UPDATE integrations SET enabled = 0");
  await rows.prune();
  expect((await rows.after("p1", 0, 10)).map((r) => r.position)).toEqual([4]);
  expect(await rows.latest()).toBe(5);
  sqlite.close();
});
