/**
 * `flagsvc export FILE` / `flagsvc import FILE` of a whole instance, through the CLI's `main()`:
 * SQLite (with its server running) -> PostgreSQL -> SQLite, every resource's API answers
 * identical, keys and passwords still valid; idempotent; a dry run and a bad document change
 * nothing. The PostgreSQL leg is skipped when PostgreSQL is not installed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createDatabase, pgAvailable } from "../pg";
import { bearer, json, runCli, tempDir, testApp, until, type TestApp } from "../helpers";
import { answers, credentialsWork, nodeOn, PRO, seed, type Seeded } from "./helpers";

let source: TestApp;
let seeded: Seeded;
let before: Record<string, unknown>;
const work = tempDir("flagsvc-transfer-");
const exported = join(work, "instance.json");

beforeAll(async () => {
  source = await testApp(PRO);
  seeded = await seed(source);
  before = await answers(source, seeded.admin);
  // Beside the running server: the data dir is locked by it.
  const out = await runCli(source.dir, "export", exported);
  expect([out.code, out.stderr]).toEqual([0, `instance exported to ${exported}\n`]);
}, 60_000);
afterAll(() => source.close());

const doc = (file: string) => JSON.parse(readFileSync(file, "utf8"));
/** The report's lines for the tables, as "name: counts". */
const counts = (stdout: string) => Object.fromEntries(stdout.trim().split("\n").slice(1).map((l) => l.trim().split(/\s{2,}/) as [string, string]));

describe("export and import of a whole instance", () => {
  test("flagsvc --help lists both commands; export --help and import --help show their options", async () => {
    const help = await runCli(work, "--help");
    expect(help.stdout).toMatch(/\n  export +Write the whole instance/);
    expect(help.stdout).toMatch(/\n  import +Apply an exported document/);
    expect((await runCli(work, "export", "--help")).stdout).toContain("Usage: flagsvc export FILE [--project SLUG] [--format json|yaml]");
    const own = await runCli(work, "import", "--help");
    expect(own.stdout).toContain("  --dry-run       Report what the import would change; write nothing\n");
    expect((await runCli(work, "import", exported, "--prune", "--dry-run")).code).toBe(2); // --prune is for flags documents
  });

  test("the document: versioned, every table, secrets only as stored (hashes), no change-log bookkeeping", () => {
    const d = doc(exported);
    expect(d).toMatchObject({ flagsvc: "instance", version: 1, source: "sqlite", exportedAt: expect.any(String) });
    expect(Object.keys(d.tables)).toEqual(["settings", "users", "adminKeys", "projects", "environments", "segments", "flags", "flagStates", "schedules", "apiKeys", "webhooks", "plugins", "integrations", "pluginDownloads"]);
    expect(d.tables.settings.map((s: { key: string }) => s.key)).toEqual(["bootstrapped_at", "jwt_secret"]);
    const text = readFileSync(exported, "utf8");
    expect(text).not.toContain(seeded.password);
    expect(text).not.toContain(seeded.evalKey);
    expect(d.tables.plugins[0]).not.toHaveProperty("eventPosition");
    expect(d.tables.projects.map((p: { slug: string }) => p.slug)).toEqual(expect.arrayContaining(["default", "shop"]));
  });

  test("into a fresh SQLite data dir: identical answers, the old keys and password work; a second import changes nothing", async () => {
    const dir = tempDir();
    const first = await runCli(dir, "import", exported);
    expect(first.code).toBe(0);
    expect(first.stdout.split("\n")[0]).toBe("imported");
    expect(counts(first.stdout).flags).toBe("3 created, 0 updated, 0 unchanged");
    const again = await runCli(dir, "import", exported);
    expect(again.code).toBe(0);
    for (const line of Object.values(counts(again.stdout))) expect(line).toMatch(/^0 created, 0 updated, \d+ unchanged$/);
    const node = await nodeOn({ SVC_DATA_DIR: dir });
    try {
      expect(await answers(node, seeded.admin)).toEqual(before);
      await credentialsWork(node, seeded);
    } finally {
      node.close();
    }
  }, 60_000);

  test("a dry run reports the same and writes nothing; a bad document is refused (exit 2) and changes nothing", async () => {
    const dir = tempDir();
    expect((await runCli(dir, "migrate")).code).toBe(0); // a dry run reads the target: it must exist
    const dry = await runCli(dir, "import", exported, "--dry-run");
    expect(dry.code).toBe(0);
    expect(dry.stdout.split("\n")[0]).toBe("dry run: nothing written; the import would make these changes");
    expect(counts(dry.stdout).users).toBe("2 created, 0 updated, 0 unchanged");
    // Nothing written: a real import still creates everything.
    const real = await runCli(dir, "import", exported);
    expect(counts(real.stdout)).toEqual(counts(dry.stdout));

    const d = doc(exported);
    const bad = join(work, "bad.json");
    for (const [what, body, message] of [
      ["another version", { ...d, version: 2 }, 'a "instance" document of version 2: this flagsvc reads version 1'],
      ["another kind", { ...d, flagsvc: "backup" }, 'not a flagsvc document: "flagsvc" must be "instance" or "flags"'],
      ["a table missing", { ...d, tables: { ...d.tables, users: undefined } }, "not a valid instance document: /tables/users"],
    ] as const) {
      writeFileSync(bad, JSON.stringify(body));
      const out = await runCli(dir, "import", bad);
      expect([what, out.code]).toEqual([what, 2]);
      expect(out.stderr).toContain(message);
    }
    // A document whose rows break a constraint (a state of an unknown flag): refused in one transaction, nothing changed.
    const renamed = structuredClone(d);
    renamed.tables.projects.find((p: { slug: string }) => p.slug === "shop").name = "Shop renamed";
    renamed.tables.flagStates.push({ ...renamed.tables.flagStates[0], flagId: "flag_missing" });
    writeFileSync(bad, JSON.stringify(renamed));
    const refused = await runCli(dir, "import", bad);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringMatching(/^flagsvc: import failed, nothing changed: /)]);
    const node = await nodeOn({ SVC_DATA_DIR: dir });
    try {
      expect(await answers(node, seeded.admin)).toEqual(before);
    } finally {
      node.close();
    }
  }, 60_000);

  test("matched by natural key where ids differ: a project of the same slug keeps the target's id; its rows follow", async () => {
    const d = doc(exported);
    const shop = d.tables.projects.find((p: { slug: string }) => p.slug === "shop");
    const dir = tempDir();
    expect((await runCli(dir, "import", exported)).code).toBe(0);
    // The same instance, but the project "shop" under another id (as if created apart on each side).
    const other = JSON.parse(JSON.stringify(d).replaceAll(shop.id, "prj_otherid"));
    const file = join(work, "other.json");
    writeFileSync(file, JSON.stringify(other));
    const out = await runCli(dir, "import", file);
    expect(out.code).toBe(0);
    for (const line of Object.values(counts(out.stdout))) expect(line).toMatch(/^0 created, 0 updated, \d+ unchanged$/);
  }, 60_000);
});

describe.skipIf(!pgAvailable())("SQLite -> PostgreSQL -> SQLite", () => {
  test("every resource's API answers identical at each step; the old eval key and the user's password work", async () => {
    const url = await createDatabase();
    const cliDir = tempDir();
    const imported = await runCli(cliDir, "import", exported, "--database-url", url);
    expect([imported.code, imported.stderr]).toEqual([0, ""]);
    expect(counts(imported.stdout).flagStates).toBe("3 created, 0 updated, 0 unchanged");
    const again = await runCli(cliDir, "import", exported, "--database-url", url);
    for (const line of Object.values(counts(again.stdout))) expect(line).toMatch(/^0 created, 0 updated, \d+ unchanged$/);

    const pg = await nodeOn({ SVC_DATABASE_URL: url });
    const back = join(work, "from-pg.json");
    try {
      expect(await answers(pg, seeded.admin)).toEqual(before);
      await credentialsWork(pg, seeded);
      // Exported from PostgreSQL with the node running.
      const out = await runCli(cliDir, "export", back, "--database-url", url);
      expect(out.code).toBe(0);

      // An import beside the running node: it hears the change log (a state, a name) and the audit log names the import.
      const changed = doc(exported);
      const checkout = changed.tables.flags.find((f: { key: string }) => f.key === "checkout");
      checkout.name = "Checkout v2";
      changed.tables.flagStates.find((s: { flagId: string }) => s.flagId === checkout.id).enabled = false;
      const file = join(work, "changed.json");
      writeFileSync(file, JSON.stringify(changed));
      const applied = await runCli(cliDir, "import", file, "--database-url", url);
      expect([counts(applied.stdout).flags, counts(applied.stdout).flagStates]).toEqual(["0 created, 1 updated, 2 unchanged", "0 created, 1 updated, 2 unchanged"]);
      await until("the node to hear the import", async () => {
        const res = await pg.request("POST", "/v1/evaluate", { body: { flagKey: "checkout", context: { userId: "u1" } }, headers: bearer(seeded.evalKey) });
        return (await res.json()).reason === "FLAG_DISABLED";
      });
      expect((await json(await pg.request("GET", "/v1/projects/default/flags/checkout", { headers: seeded.admin }), 200)).name).toBe("Checkout v2");
      const audit = await json(await pg.request("GET", "/v1/projects/default/audit-log?resourceType=flag", { headers: seeded.admin }), 200);
      expect(audit.entries[0]).toMatchObject({ action: "updated", actor: { type: "cli", id: "cli:import", label: "import" }, resource: { key: "checkout" } });
    } finally {
      pg.close();
    }
    expect(doc(back).source).toBe("postgres");
    expect(doc(back).tables).toEqual(doc(exported).tables);

    const dir = tempDir();
    expect((await runCli(dir, "import", back)).code).toBe(0);
    const sqlite = await nodeOn({ SVC_DATA_DIR: dir });
    try {
      expect(await answers(sqlite, seeded.admin)).toEqual(before);
      await credentialsWork(sqlite, seeded);
    } finally {
      sqlite.close();
    }
  }, 120_000);
});
