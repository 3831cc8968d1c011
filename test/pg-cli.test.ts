/**
 * The CLI on PostgreSQL (SVC_DATABASE_URL / --database-url): `migrate` applies the PostgreSQL
 * migrations (then finds nothing to do), `admin create-key` writes through the PostgreSQL stores,
 * `backup` points to pg_dump instead of copying a SQLite file. Skipped without PostgreSQL.
 */
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { createDatabase, pgAvailable } from "./pg";
import { tempDir } from "./helpers";

const cli = async (args: string[], env: Record<string, string>) => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", ...args], { env: { ...process.env, SVC_DATA_DIR: tempDir(), ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code: await proc.exited, stdout, stderr };
};

describe.skipIf(!pgAvailable())("the CLI on PostgreSQL", () => {
  test("migrate, then nothing to do; admin create-key stores a key there; backup says pg_dump", async () => {
    const url = await createDatabase();
    const first = await cli(["migrate", "--database-url", url], {});
    expect([first.code, first.stdout]).toEqual([0, expect.stringMatching(/^applied \d+ migration\(s\); the schema is up to date\n$/)]);
    const again = await cli(["migrate"], { SVC_DATABASE_URL: url });
    expect([again.code, again.stdout]).toEqual([0, "the schema is up to date\n"]);

    const created = await cli(["admin", "create-key", "--name", "ops"], { SVC_DATABASE_URL: url });
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/svc_admin_[A-Za-z0-9]{32,}/);
    const sql = new SQL(url, { max: 1 });
    try {
      expect((await sql`SELECT name FROM admin_keys`).map((r: { name: string }) => r.name)).toEqual(["ops"]);
      expect((await sql`SELECT resource_type, action, actor_type FROM change_log`).map((r: Record<string, string>) => Object.values(r))).toEqual([["admin_key", "created", "cli"]]);
    } finally {
      await sql.close();
    }

    const backup = await cli(["backup", "copy.db"], { SVC_DATABASE_URL: url });
    expect(backup.code).toBe(1);
    expect(backup.stderr).toContain("pg_dump");
  }, 60_000);
});
