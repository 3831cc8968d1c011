/**
 * Flags as code: `flagsvc export --project SLUG FILE` writes a project's flags (and the segments
 * they use) as readable JSON or YAML; `flagsvc import FILE` applies it, idempotent, reporting
 * per flag; `--dry-run` writes nothing; `--prune` deletes the flags the document lacks.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bearer, json, runCli, seedAdminKey, tempDir, testApp, type TestApp } from "../helpers";
import { createDatabase, pgAvailable } from "../pg";
import { nodeOn } from "./helpers";

let h: TestApp;
let admin: Record<string, string>;
const work = tempDir("flagsvc-flags-");
const yaml = join(work, "flags.yaml");

beforeAll(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  const call = async (method: string, path: string, body: unknown, status: number) => json(await h.request(method, path, { body, headers: admin }), status);
  await call("POST", "/v1/projects/default/segments", { key: "beta", name: "Beta", conditions: [], included: ["u1"] }, 201);
  await call("POST", "/v1/projects/default/segments", { key: "unused", name: "Unused", conditions: [] }, 201);
  await call("POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout", description: "The new checkout" }, 201);
  await call(
    "POST",
    "/v1/projects/default/flags",
    {
      key: "new-ui",
      name: "New UI",
      variants: [{ key: "on" }, { key: "off" }],
      rules: [{ name: "beta", conditions: [{ attribute: "userId", operator: "in_segment", value: "beta" }], variant: "on" }],
      prerequisites: [{ flagKey: "checkout" }],
    },
    201,
  );
  await call("PUT", "/v1/projects/default/flags/checkout/states/production", { enabled: true, rolloutPercentage: 25 }, 200);
  const out = await runCli(h.dir, "export", "--project", "default", yaml);
  expect([out.code, out.stderr]).toEqual([0, `project default: 2 flag(s) exported to ${yaml}\n`]);
}, 60_000);
afterAll(() => h.close());

/** A data dir with the first start done (the project "default", no flags), no server on it. */
async function freshDir(): Promise<string> {
  const dir = tempDir();
  (await nodeOn({ SVC_DATA_DIR: dir })).close();
  return dir;
}

describe("flags as code", () => {
  test("the YAML document: sorted by key, no ids or times, the segments the flags use, a state per environment", () => {
    const text = readFileSync(yaml, "utf8");
    expect(text).not.toMatch(/flag_|rule_|seg_|createdAt|updatedAt/);
    const doc = Bun.YAML.parse(text) as Record<string, any>;
    expect(doc).toEqual({
      flagsvc: "flags",
      version: 1,
      project: "default",
      flags: [
        {
          key: "checkout",
          name: "Checkout",
          description: "The new checkout",
          variants: [],
          rules: [],
          states: { development: { enabled: false, rolloutPercentage: null }, staging: { enabled: false, rolloutPercentage: null }, production: { enabled: true, rolloutPercentage: 25 } },
        },
        {
          key: "new-ui",
          name: "New UI",
          variants: [{ key: "on" }, { key: "off" }],
          rules: [{ name: "beta", conditions: [{ attribute: "userId", operator: "in_segment", value: "beta" }], enabled: true, variant: "on" }],
          prerequisites: [{ flagKey: "checkout" }],
          states: { development: { enabled: false, rolloutPercentage: null }, staging: { enabled: false, rolloutPercentage: null }, production: { enabled: false, rolloutPercentage: null } },
        },
      ],
      segments: [{ key: "beta", name: "Beta", conditions: [], included: ["u1"], excluded: [] }],
    });
  });

  test("imported again beside the running server: nothing changes, nothing is locked", async () => {
    const out = await runCli(h.dir, "import", yaml);
    expect([out.code, out.stdout]).toEqual([0, "project default: 0 created, 0 updated, 3 unchanged\n  segment beta: unchanged\n  flag checkout: unchanged\n  flag new-ui: unchanged\n"]);
  });

  test("into another instance, JSON and YAML: created, then unchanged; exported there it reads the same", async () => {
    for (const format of ["yaml", "json"] as const) {
      const file = join(work, `flags.${format}`);
      if (format === "json") expect((await runCli(h.dir, "export", "--project", "default", file)).code).toBe(0);
      const dir = await freshDir();
      const first = await runCli(dir, "import", file);
      expect([format, first.code, first.stdout.split("\n")[0]]).toEqual([format, 0, "project default: 3 created, 0 updated, 0 unchanged"]);
      const again = await runCli(dir, "import", file);
      expect(again.stdout.split("\n")[0]).toBe("project default: 0 created, 0 updated, 3 unchanged");
      const back = join(work, `back.${format}`);
      expect((await runCli(dir, "export", "--project", "default", back)).code).toBe(0);
      expect(readFileSync(back, "utf8")).toBe(readFileSync(file, "utf8"));
    }
  }, 60_000);

  test.skipIf(!pgAvailable())("on PostgreSQL, with a node running: created, then unchanged; exported there it reads the same", async () => {
    const url = await createDatabase();
    const node = await nodeOn({ SVC_DATABASE_URL: url });
    try {
      const first = await runCli(tempDir(), "import", yaml, "--database-url", url);
      expect([first.code, first.stdout.split("\n")[0]]).toEqual([0, "project default: 3 created, 0 updated, 0 unchanged"]);
      const again = await runCli(tempDir(), "import", yaml, "--database-url", url);
      expect(again.stdout.split("\n")[0]).toBe("project default: 0 created, 0 updated, 3 unchanged");
      const back = join(work, "back-pg.yaml");
      expect((await runCli(tempDir(), "export", "--project", "default", back, "--database-url", url)).code).toBe(0);
      expect(readFileSync(back, "utf8")).toBe(readFileSync(yaml, "utf8"));
    } finally {
      node.close();
    }
  }, 60_000);

  test("changes: --dry-run reports them and writes nothing; the import applies them; --prune deletes what the file lacks", async () => {
    const dir = await freshDir();
    expect((await runCli(dir, "import", yaml)).code).toBe(0);
    const doc = Bun.YAML.parse(readFileSync(yaml, "utf8")) as Record<string, any>;
    doc.flags = doc.flags.filter((f: { key: string }) => f.key === "checkout");
    doc.flags[0].name = "Checkout v2";
    doc.flags[0].states = { production: { enabled: false } };
    doc.flags.push({ key: "banner", name: "Banner", states: { staging: { enabled: true } } });
    const changed = join(work, "changed.yaml");
    writeFileSync(changed, Bun.YAML.stringify(doc));

    const dry = await runCli(dir, "import", changed, "--dry-run", "--prune");
    expect([dry.code, dry.stdout]).toEqual([
      0,
      "dry run: nothing written; project default: 1 created, 1 updated, 1 unchanged, 1 deleted\n  segment beta: unchanged\n  flag checkout: updated\n  flag banner: created\n  flag new-ui: deleted\n",
    ]);
    const unchanged = join(work, "unchanged.yaml");
    await runCli(dir, "export", "--project", "default", unchanged);
    expect(readFileSync(unchanged, "utf8")).toBe(readFileSync(yaml, "utf8"));

    const kept = await runCli(dir, "import", changed);
    expect(kept.stdout.split("\n")[0]).toBe("project default: 1 created, 1 updated, 1 unchanged");
    const pruned = await runCli(dir, "import", changed, "--prune");
    expect(pruned.stdout).toBe("project default: 0 created, 0 updated, 3 unchanged, 1 deleted\n  segment beta: unchanged\n  flag checkout: unchanged\n  flag banner: unchanged\n  flag new-ui: deleted\n");
    const now = join(work, "now.yaml");
    await runCli(dir, "export", "--project", "default", now);
    const after = Bun.YAML.parse(readFileSync(now, "utf8")) as Record<string, any>;
    expect(after.flags.map((f: { key: string }) => f.key)).toEqual(["banner", "checkout"]);
    expect(after.flags[1]).toMatchObject({ name: "Checkout v2", description: "The new checkout", states: { production: { enabled: false, rolloutPercentage: null } } });
    expect(after.flags[0].states.staging).toEqual({ enabled: true, rolloutPercentage: null });
  }, 60_000);

  test("refused: another version (exit 2), an invalid flag (exit 2), an unknown environment (exit 2), changes beside a running SQLite server (exit 1): nothing changed", async () => {
    const doc = Bun.YAML.parse(readFileSync(yaml, "utf8")) as Record<string, any>;
    const bad = join(work, "bad.yaml");
    for (const [body, message] of [
      [{ ...doc, version: 3 }, 'a "flags" document of version 3: this flagsvc reads version 1'],
      [{ ...doc, flags: [{ ...doc.flags[0], states: { nowhere: { enabled: true } } }] }, 'flag checkout: project default has no environment "nowhere"'],
      [{ ...doc, flags: [{ key: "Bad Key", name: "x" }] }, "not a valid flags document: /flags/0/key"],
    ] as const) {
      writeFileSync(bad, Bun.YAML.stringify(body));
      const out = await runCli(h.dir, "import", bad);
      expect([out.code, out.stderr]).toEqual([2, expect.stringContaining(message)]);
    }
    writeFileSync(bad, Bun.YAML.stringify({ ...doc, flags: [{ ...doc.flags[0], name: "Renamed" }] }));
    const busy = await runCli(h.dir, "import", bad);
    expect([busy.code, busy.stderr]).toEqual([1, expect.stringContaining("another flagsvc process is using")]);
    expect((await json(await h.request("GET", "/v1/projects/default/flags/checkout", { headers: admin }), 200)).name).toBe("Checkout");
  });
});
