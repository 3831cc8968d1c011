/** constraintOf: SQLite's constraint errors mapped by their code (not their message), through drizzle as the stores raise them. */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { projects, environments } from "../../src/db/schema";
import { constraintOf } from "../../src/db/sqlite-errors";
import { tempDir } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("unique (also a primary key), foreign key, check and not null are told apart; other errors are null", () => {
  const { sqlite, db } = openDatabase(join(dir, "e.db"));
  migrate(sqlite);
  const at = "2026-01-01T00:00:00.000Z";
  const project = { id: "proj_1", slug: "p", name: "P", createdAt: at, updatedAt: at };
  db.insert(projects).values(project).run();
  const caught = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      return constraintOf(e);
    }
    throw new Error("no error");
  };
  expect(caught(() => db.insert(projects).values({ ...project, slug: "q" }).run())).toEqual({ kind: "unique", code: "SQLITE_CONSTRAINT_PRIMARYKEY" });
  expect(caught(() => db.insert(projects).values({ ...project, id: "proj_2" }).run())).toEqual({ kind: "unique", code: "SQLITE_CONSTRAINT_UNIQUE" });
  expect(caught(() => db.insert(environments).values({ id: "env_1", projectId: "proj_x", slug: "e", name: "E", createdAt: at }).run())).toEqual({ kind: "foreign_key", code: "SQLITE_CONSTRAINT_FOREIGNKEY" });
  sqlite.run("CREATE TABLE checked (n INTEGER NOT NULL CHECK (n > 0))");
  expect(caught(() => sqlite.run("INSERT INTO checked VALUES (0)"))).toEqual({ kind: "check", code: "SQLITE_CONSTRAINT_CHECK" });
  expect(caught(() => sqlite.run("INSERT INTO checked VALUES (NULL)"))).toEqual({ kind: "not_null", code: "SQLITE_CONSTRAINT_NOTNULL" });
  expect(caught(() => sqlite.run("INSERT INTO nowhere VALUES (1)"))).toBeNull();
  expect(constraintOf(new Error("UNIQUE constraint failed: projects.slug"))).toBeNull();
  expect(constraintOf("text")).toBeNull();
  sqlite.close();
});
