/**
 * Migration explicit_order: lists are ordered by a `seq` column, not rowid. A database written
 * before it keeps every list in the order it had (backfilled from rowid), as the API answers it.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE, openDatabase } from "../../src/db/client";
import { MIGRATIONS, migrate } from "../../src/db/migrate";
import { bearer, json, seedAdminKey, tempDir, testApp } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("an existing database keeps its environment and key order through the migration", async () => {
  const index = MIGRATIONS.findIndex((m) => m.sql.some((s) => s.includes("SET `seq` = rowid")));
  expect(index).toBeGreaterThan(0);
  const dataDir = join(dir, "data");
  mkdirSync(dataDir);
  const old = openDatabase(join(dataDir, DB_FILE)).sqlite;
  migrate(old, MIGRATIONS.slice(0, index));
  const at = "2026-01-01T00:00:00.000Z";
  old.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('proj_1', 'old', 'Old', ?1, ?1)", [at]);
  // Inserted (rowid) order, neither by id nor by slug; same createdAt; a deleted one in between.
  for (const [id, slug] of [["env_c", "zeta"], ["env_a", "gone"], ["env_b", "alpha"], ["env_d", "mid"]]) {
    old.run("INSERT INTO environments (id, project_id, slug, name, created_at) VALUES (?1, 'proj_1', ?2, ?2, ?3)", [id!, slug!, at]);
  }
  old.run("DELETE FROM environments WHERE id = 'env_a'");
  for (const [id, name] of [["key_z", "first"], ["key_a", "second"], ["key_m", "third"]]) {
    old.run("INSERT INTO api_keys (id, project_id, environment_id, name, scope, key_hash, key_prefix, created_at) VALUES (?1, 'proj_1', 'env_b', ?2, 'eval', ?1, 'svc_sk_eval_x', ?3)", [id!, name!, at]);
  }
  old.close();

  const h = await testApp({ SVC_DATA_DIR: dataDir });
  try {
    const admin = bearer(await seedAdminKey(h.ctx));
    expect((await json(await h.request("GET", "/v1/projects/old", { headers: admin }), 200)).environments.map((e: { slug: string }) => e.slug)).toEqual(["zeta", "alpha", "mid"]);
    const keys = await json(await h.request("GET", "/v1/projects/old/api-keys", { headers: admin }), 200);
    expect(keys.apiKeys.map((k: { name: string }) => k.name)).toEqual(["first", "second", "third"]);
    // New rows come after the backfilled ones.
    await json(await h.request("POST", "/v1/projects/old/environments", { body: { slug: "aaa", name: "A" }, headers: admin }), 201);
    expect((await json(await h.request("GET", "/v1/projects/old/environments", { headers: admin }), 200)).environments.map((e: { slug: string }) => e.slug)).toEqual(["zeta", "alpha", "mid", "aaa"]);
  } finally {
    h.close();
  }
});
