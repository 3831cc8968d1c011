import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { openDatabase } from "../../src/db/client";
import { MIGRATIONS, SchemaTooNewError, migrate, schemaStatus } from "../../src/db/migrate";
import { tempDir } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MIGRATIONS_DIR = join(import.meta.dir, "../../src/db/migrations");
let n = 0;
const freshFile = () => join(dir, `db-${++n}.sqlite`);

/** Everything that defines the schema, comparable across databases. */
function schemaOf(sqlite: Database) {
  return sqlite
    .query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
    .all();
}

describe("embedded migrations", () => {
  test("every migration file of the journal is embedded, with the hashes stock migrate() computes", () => {
    const stock = readMigrationFiles({ migrationsFolder: MIGRATIONS_DIR });
    expect(MIGRATIONS.map((m) => [m.hash, m.folderMillis])).toEqual(stock.map((m) => [m.hash, m.folderMillis]));
    const files = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith(".sql"));
    expect(files).toHaveLength(MIGRATIONS.length);
    const journal = JSON.parse(readFileSync(join(MIGRATIONS_DIR, "meta/_journal.json"), "utf8"));
    expect(journal.entries.map((e: { tag: string }) => `${e.tag}.sql`)).toEqual(files.sort());
  });

  test("pragmas read back as set", () => {
    const { sqlite } = openDatabase(freshFile());
    migrate(sqlite);
    expect(sqlite.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(sqlite.query("PRAGMA foreign_keys").get()).toEqual({ foreign_keys: 1 });
    expect(sqlite.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 5000 });
    expect(sqlite.query("PRAGMA synchronous").get()).toEqual({ synchronous: 1 });
    sqlite.close();
  });
});

describe("migrate", () => {
  test("an empty database gets every migration, once", () => {
    const { sqlite } = openDatabase(freshFile());
    expect(migrate(sqlite)).toBe(MIGRATIONS.length);
    expect(schemaStatus(sqlite)).toEqual({ applied: MIGRATIONS.length, pending: 0, unknown: 0 });
    const tables = (sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
    expect(tables).toEqual(expect.arrayContaining(["projects", "environments", "settings", "__drizzle_migrations"]));
    expect(migrate(sqlite)).toBe(0);
    expect(sqlite.query("PRAGMA foreign_keys").get()).toEqual({ foreign_keys: 1 });
    sqlite.close();
  });

  test("a database at the previous version is brought up to date, keeping its data", () => {
    expect(MIGRATIONS.length).toBeGreaterThanOrEqual(2);
    const fresh = openDatabase(freshFile()).sqlite;
    migrate(fresh);

    const old = openDatabase(freshFile()).sqlite;
    expect(migrate(old, MIGRATIONS.slice(0, -1))).toBe(MIGRATIONS.length - 1);
    expect(schemaStatus(old).pending).toBe(1);
    old.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('proj_1', 'kept', 'Kept', 'x', 'x')");
    old.run("INSERT INTO environments (id, project_id, slug, name, created_at) VALUES ('env_1', 'proj_1', 'prod', 'Prod', 'x')");

    expect(migrate(old)).toBe(1);
    expect(schemaOf(old)).toEqual(schemaOf(fresh));
    expect(old.query("SELECT slug FROM projects").all()).toEqual([{ slug: "kept" }]);
    expect(old.query("SELECT slug FROM environments").all()).toEqual([{ slug: "prod" }]);
    old.close();
    fresh.close();
  });

  test("a database written by a newer version is refused byte for byte untouched, even in rollback-journal mode", () => {
    const file = freshFile();
    const setup = openDatabase(file).sqlite;
    migrate(setup);
    setup.run("PRAGMA journal_mode = DELETE");
    setup.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('f00d', 9999999999999)");
    setup.close();
    const bytes = readFileSync(file);
    const { sqlite } = openDatabase(file);
    expect(() => migrate(sqlite)).toThrow(SchemaTooNewError);
    sqlite.close();
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });

  test("a database written by a newer version is refused and left untouched", () => {
    const file = freshFile();
    const { sqlite } = openDatabase(file);
    migrate(sqlite);
    sqlite.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('f00d', 9999999999999)");
    const before = { schema: schemaOf(sqlite), rows: sqlite.query("SELECT * FROM __drizzle_migrations").all() };
    expect(() => migrate(sqlite)).toThrow(SchemaTooNewError);
    expect(() => migrate(sqlite)).toThrow(/newer flagsvc/);
    expect({ schema: schemaOf(sqlite), rows: sqlite.query("SELECT * FROM __drizzle_migrations").all() }).toEqual(before);
    sqlite.close();
  });

  test("a failing migration rolls back whole", () => {
    const { sqlite } = openDatabase(freshFile());
    const bad = [
      ...MIGRATIONS,
      { sql: ["CREATE TABLE half (id text)", "THIS IS NOT SQL"], bps: true, folderMillis: 9e12, hash: "bad" },
    ];
    expect(() => migrate(sqlite, bad)).toThrow();
    expect(schemaStatus(sqlite).applied).toBe(0);
    expect(sqlite.query("SELECT name FROM sqlite_master WHERE name = 'half'").get()).toBeNull();
    sqlite.close();
  });

  test("a table rebuild does not cascade deletes into child tables", () => {
    // drizzle-kit alters SQLite tables by create-copy-drop-rename; with foreign keys on, the
    // drop would delete every child row through ON DELETE CASCADE.
    const { sqlite } = openDatabase(freshFile());
    migrate(sqlite);
    sqlite.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('proj_1', 'p', 'P', 'x', 'x')");
    sqlite.run("INSERT INTO environments (id, project_id, slug, name, created_at) VALUES ('env_1', 'proj_1', 'e', 'E', 'x')");
    const rebuild = {
      sql: [
        "CREATE TABLE `__new_projects` (`id` text PRIMARY KEY NOT NULL, `slug` text NOT NULL, `name` text NOT NULL, `created_at` text NOT NULL, `updated_at` text NOT NULL, `note` text)",
        "INSERT INTO `__new_projects` (id, slug, name, created_at, updated_at) SELECT id, slug, name, created_at, updated_at FROM `projects`",
        "DROP TABLE `projects`",
        "ALTER TABLE `__new_projects` RENAME TO `projects`",
        "CREATE UNIQUE INDEX `projects_slug_unique` ON `projects` (`slug`)",
      ],
      bps: true,
      folderMillis: 9e12,
      hash: "rebuild",
    };
    expect(migrate(sqlite, [...MIGRATIONS, rebuild])).toBe(1);
    expect(sqlite.query("SELECT id FROM environments").all()).toEqual([{ id: "env_1" }]);
    expect(sqlite.query("PRAGMA foreign_keys").get()).toEqual({ foreign_keys: 1 });
    sqlite.close();
  });

  test("a migration that would break foreign keys is rolled back", () => {
    const { sqlite } = openDatabase(freshFile());
    migrate(sqlite);
    const orphaning = {
      sql: ["INSERT INTO environments (id, project_id, slug, name, created_at) VALUES ('env_x', 'proj_missing', 'e', 'E', 'x')"],
      bps: true,
      folderMillis: 9e12,
      hash: "orphan",
    };
    expect(() => migrate(sqlite, [...MIGRATIONS, orphaning])).toThrow(/broken foreign key/);
    expect(sqlite.query("SELECT COUNT(*) AS n FROM environments").get()).toEqual({ n: 0 });
    expect(schemaStatus(sqlite).applied).toBe(MIGRATIONS.length);
    sqlite.close();
  });
});
