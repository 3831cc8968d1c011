/**
 * Plugin packages (src/plugins/manifest.ts) and the catalog (src/plugins/catalog.ts): every way a
 * plugin.json can be wrong, configSchema through ajv, configs and their secrets, semver order,
 * duplicates, malformed folders skipped with one log line, and the watched marketplace folder.
 * Real folders in a temp dir; the fixtures are test/fixtures/plugins.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { cpSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { Catalog } from "../../src/plugins/catalog";
import { createLogger } from "../../src/lib/log";
import { maskConfig, patchConfig, secretKeys, secretValues } from "../../src/lib/config-secrets";
import { readPackage, validateConfig, type PluginManifest } from "../../src/plugins/manifest";
import { packageTree, readInside } from "../../src/plugins/package-files";
import { secretForms, secretMask } from "../../src/lib/secret-text";
import { INDEX_FILE, renderPluginIndex } from "../../scripts/embed-plugins";
import { leakTargets, linkedPackage, ownEnviron, tempDir, until } from "../helpers";

const FIXTURES = join(import.meta.dir, "../fixtures/plugins");
const ECHO = JSON.parse(readFileSync(join(FIXTURES, "echo-1.0.0/plugin.json"), "utf8")) as PluginManifest;
const SOURCE = "export function activate(ctx) {}";

/** A package's files in memory, as the embedded first-party ones are. */
const files = (manifest: unknown, extra: Record<string, string> = { "index.js": SOURCE }) => ({ "plugin.json": typeof manifest === "string" ? manifest : JSON.stringify(manifest), ...extra });
const read = (f: Record<string, string>) => () => readPackage((p) => f[p]);
const problem = (manifest: unknown, extra?: Record<string, string>) => {
  try {
    read(files(manifest, extra))();
    return "accepted";
  } catch (e) {
    return (e as Error).message;
  }
};

/** Every file of a fixture folder, as the generated plugins/index.ts holds it. */
function folderFiles(dir: string, root = dir): Record<string, string> {
  return Object.assign(
    {},
    ...readdirSync(dir).map((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? folderFiles(path, root) : { [relative(root, path)]: readFileSync(path, "utf8") };
    }),
  );
}

describe("plugin.json", () => {
  test("a fixture reads whole: entry normalised, publishedAt as ISO UTC with milliseconds, readme", () => {
    const pkg = readPackage((p) => folderFiles(join(FIXTURES, "echo-1.0.0"))[p]);
    expect({ entry: pkg.entry, publishedAt: pkg.publishedAt, readme: pkg.readme, source: pkg.source.includes("export async function activate") }).toEqual({
      entry: "index.js",
      publishedAt: "2026-11-01T00:00:00.000Z",
      readme: "# Echo\n\nA test fixture.\n",
      source: true,
    });
    const other = readPackage((p) => files({ ...ECHO, entry: "./lib/main.js", publishedAt: "2026-11-01T01:00:00+01:00", homepage: undefined }, { "lib/main.js": SOURCE })[p as "plugin.json"]);
    expect({ entry: other.entry, publishedAt: other.publishedAt, readme: other.readme, homepage: other.homepage }).toEqual({ entry: "lib/main.js", publishedAt: "2026-11-01T00:00:00.000Z", readme: "", homepage: undefined });
  });

  test("each malformed field: one line naming it", () => {
    const cases: [unknown, string][] = [
      ["{not json", "plugin.json: not valid JSON"],
      [[], "plugin.json: must be a JSON object"],
      [{ ...ECHO, extra: 1 }, 'plugin.json: unknown field "extra"'],
      [{ ...ECHO, packageName: "Acme/Echo" }, 'plugin.json: "packageName" must be an npm package name'],
      [{ ...ECHO, packageName: `a${"b".repeat(214)}` }, '"packageName" must be an npm package name'],
      [{ ...ECHO, packageName: undefined }, '"packageName" must be'],
      [{ ...ECHO, name: "" }, 'plugin.json: "name" must be a non-empty string of at most 100 characters'],
      [{ ...ECHO, description: 3 }, '"description" must be a non-empty string'],
      [{ ...ECHO, author: undefined }, '"author" must be a non-empty string'],
      [{ ...ECHO, category: "chat" }, 'plugin.json: "category" must be one of analytics, monitoring, crm'],
      [{ ...ECHO, version: "1.0" }, 'plugin.json: "version" must be a semver version (e.g. 1.2.0)'],
      [{ ...ECHO, version: "v1.0.0" }, '"version" must be a semver version'],
      [{ ...ECHO, entry: "../outside.js" }, 'plugin.json: "entry" must be a relative path inside the package, without ".."'],
      [{ ...ECHO, entry: "/etc/passwd" }, '"entry" must be a relative path inside the package'],
      [{ ...ECHO, entry: 5 }, '"entry" must be a relative path'],
      [{ ...ECHO, entry: "main.js" }, "entry main.js (from plugin.json): no such file in the package"],
      [{ ...ECHO, hooks: [] }, 'plugin.json: "hooks" must be a non-empty list of distinct hook names among activate, onEvent, onEvaluations, deactivate'],
      [{ ...ECHO, hooks: ["activate", "onInstall"] }, '"hooks" must be a non-empty list'],
      [{ ...ECHO, hooks: ["activate", "activate"] }, '"hooks" must be a non-empty list'],
      [{ ...ECHO, publishedAt: "yesterday" }, 'plugin.json: "publishedAt" must be an ISO 8601 timestamp'],
      [{ ...ECHO, publishedAt: "2026-02-31T00:00:00Z" }, '"publishedAt" must be an ISO 8601 timestamp'],
      [{ ...ECHO, homepage: "javascript:alert(1)" }, 'plugin.json: "homepage" must be an http or https URL'],
      [{ ...ECHO, configSchema: undefined }, 'plugin.json: "configSchema" must be a JSON Schema object'],
      [{ ...ECHO, configSchema: { type: "array" } }, 'plugin.json: "configSchema" must describe an object ("type": "object")'],
    ];
    for (const [manifest, expected] of cases) expect({ manifest, message: problem(manifest) }).toEqual({ manifest, message: expect.stringContaining(expected) });
    expect(problem(ECHO, {})).toBe("entry index.js (from plugin.json): no such file in the package");
    expect(() => readPackage(() => undefined)).toThrow("plugin.json: missing");
  });

  test("configSchema is judged by ajv (JSON Schema 2020-12, strict, with the secret keyword)", () => {
    const schema = (s: Record<string, unknown>) => problem({ ...ECHO, configSchema: { type: "object", ...s } });
    expect(schema({ properties: { a: { type: "strin" } } })).toStartWith('plugin.json: "configSchema" is not valid JSON Schema: configSchema/properties/a/type must be equal to one of the allowed values');
    expect(schema({ properties: { a: { type: "string", secret: "yes" } } })).toStartWith('plugin.json: "configSchema" is not valid JSON Schema');
    expect(schema({ properties: { a: { type: "string", sekret: true } } })).toBe('plugin.json: "configSchema" is not valid JSON Schema: strict mode: unknown keyword: "sekret"');
    expect(schema({ properties: { a: { type: "string", format: "colour" } } })).toBe('plugin.json: "configSchema" is not valid JSON Schema: unknown format "colour" ignored in schema at path "#/properties/a"');
    expect(schema({ required: ["token"] })).toContain('strict mode: required property "token" is not defined');
    expect(schema({ properties: { a: { $ref: "#/$defs/missing" } } })).toContain("can't resolve reference #/$defs/missing");
    expect(schema({ properties: { url: { type: "string", format: "uri" }, n: { type: "integer", minimum: 1 } }, $id: "https://example.com/s" })).toBe("accepted");
    // The same `$id` in two packages (two versions of one) is no conflict.
    expect(schema({ properties: {}, $id: "https://example.com/s" })).toBe("accepted");
  });
});

describe("configs", () => {
  const pkg = readPackage((p) => folderFiles(join(FIXTURES, "echo-1.0.0"))[p]);

  test("validateConfig: one detail per failing property, at config.<name>", () => {
    expect(validateConfig(pkg, { apiKey: "k", url: "https://example.com", batchSize: 10 })).toEqual([]);
    expect(validateConfig(pkg, { url: "not a url", batchSize: 0, colour: "red", extra: 1 })).toEqual([
      { path: "config.apiKey", message: "Required" },
      { path: "config.colour", message: "Unknown field; known: apiKey, url, batchSize" },
      { path: "config.extra", message: "Unknown field; known: apiKey, url, batchSize" },
      { path: "config.url", message: 'Must match format "uri"' },
      { path: "config.batchSize", message: "Must be >= 1" },
    ]);
    expect(validateConfig(pkg, { apiKey: 5, batchSize: 1.5 })).toEqual([
      { path: "config.apiKey", message: "Must be string" },
      { path: "config.batchSize", message: "Must be integer" },
    ]);
    expect(validateConfig(pkg, "key")).toEqual([{ path: "config", message: "Must be object" }]);
  });

  test("secrets: named by the schema, masked in configs and log lines, kept when sent back masked", () => {
    expect(secretKeys(pkg)).toEqual(["apiKey"]);
    expect(maskConfig(pkg, { apiKey: "k-123", url: "https://e.com" })).toEqual({ apiKey: "********", url: "https://e.com" });
    expect(maskConfig(pkg, { url: "https://e.com" })).toEqual({ url: "https://e.com" });
    expect(patchConfig(pkg, { apiKey: "k-123", url: "https://a.com" }, { apiKey: "********", url: "https://b.com" })).toEqual({ apiKey: "k-123", url: "https://b.com" });
    expect(patchConfig(pkg, { apiKey: "k-123" }, { apiKey: "k-456" })).toEqual({ apiKey: "k-456" });
    // Key by key: null removes, a key not sent stays.
    expect(patchConfig(pkg, { apiKey: "k-123", url: "https://a.com", level: "info" }, { url: null })).toEqual({ apiKey: "k-123", level: "info" });
    // Nothing stored to keep: dropped, so a required secret is reported missing rather than "********" taken for it.
    expect(patchConfig(pkg, {}, { apiKey: "********" })).toEqual({});
    expect(secretMask(secretForms(secretValues(pkg, { apiKey: "k-123" })))("sent k-123 twice: k-123")).toBe("sent ******** twice: ********");
    expect(secretMask(secretForms(secretValues(pkg, {})))("nothing secret")).toBe("nothing secret");
    // A key once stored as a secret stays one (a plugin's `secretKeys`), whatever the schema says.
    expect(maskConfig(pkg, { url: "https://e.com", level: "x" }, ["level"])).toEqual({ url: "https://e.com", level: "********" });
    expect(patchConfig(pkg, { level: "x" }, { level: "********" }, ["level"])).toEqual({ level: "x" });
  });
});

describe("the catalog", () => {
  let dir: string;
  let catalog: Catalog | undefined;
  let written = "";
  const log = createLogger({ level: "info", format: "json", write: (chunk) => (written += chunk) });
  const warnings = () => {
    log.flush();
    return written.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { level: string; msg: string; folder: string; reason: string });
  };
  const open = (firstParty: Record<string, Record<string, string>> = {}) => (catalog = new Catalog({ dataDir: dir, log, firstParty }));
  const market = (name: string) => join(dir, "marketplace", name);
  /** A marketplace folder holding the echo fixture with these manifest fields changed. */
  const drop = (name: string, fields: Record<string, unknown> = {}, manifest?: string) => {
    cpSync(join(FIXTURES, "echo-1.0.0"), market(name), { recursive: true });
    writeFileSync(join(market(name), "plugin.json"), manifest ?? JSON.stringify({ ...ECHO, ...fields }));
  };

  const setUp = () => {
    dir = tempDir();
    written = "";
  };
  afterEach(() => {
    catalog?.close();
    catalog = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  test("first-party packages are verified, marketplace ones not; latest is the highest in semver order", () => {
    setUp();
    mkdirSync(join(dir, "marketplace"));
    for (const v of ["1.9.0", "1.10.0", "1.10.0-beta.1"]) drop(`echo-${v}`, { version: v });
    const c = open({ "echo-1.0.0": folderFiles(join(FIXTURES, "echo-1.0.0")), "failing-0.1.0": folderFiles(join(FIXTURES, "failing-0.1.0")) });
    expect(c.versions("@acme/echo").map((p) => [p.version, p.verified, p.folder])).toEqual([
      ["1.10.0", false, market("echo-1.10.0")],
      ["1.10.0-beta.1", false, market("echo-1.10.0-beta.1")],
      ["1.9.0", false, market("echo-1.9.0")],
      ["1.0.0", true, "plugins/echo-1.0.0"],
    ]);
    expect(c.packages().map((p) => [p.packageName, p.version])).toEqual([
      ["@acme/echo", "1.10.0"],
      ["failing", "0.1.0"],
    ]);
    expect(c.get("@acme/echo", "latest")!.version).toBe("1.10.0");
    expect(c.get("@acme/echo", "1.0.0")!.verified).toBe(true);
    expect(c.get("failing", "latest")!.source).toContain("cannot reach the vendor");
    expect([c.get("@acme/echo", "2.0.0"), c.get("nope", "latest"), c.versions("nope")]).toEqual([undefined, undefined, []]);
    expect(warnings()).toEqual([]);
  });

  test("the marketplace folder is created when missing", () => {
    setUp();
    open();
    expect(statSync(join(dir, "marketplace")).isDirectory()).toBe(true);
    expect(catalog!.packages()).toEqual([]);
  });

  test("malformed folders and duplicates are skipped, each with one warning naming the folder and why", () => {
    setUp();
    mkdirSync(join(dir, "marketplace"));
    drop("a-bad-version", { version: "one" });
    drop("b-bad-schema", { configSchema: { type: "object", properties: { a: { type: "nope" } } } });
    drop("c-no-entry", { entry: "missing.js" });
    drop("d-not-json", {}, "{");
    mkdirSync(market("e-empty"));
    drop("f-duplicate-of-first-party", {});
    drop("g-echo-2", { version: "2.0.0" });
    drop("h-echo-2-again", { version: "2.0.0" });
    writeFileSync(market("stray-file.txt"), "not a package");
    mkdirSync(market(".staging"));
    const c = open({ "echo-1.0.0": folderFiles(join(FIXTURES, "echo-1.0.0")) });
    expect(c.versions("@acme/echo").map((p) => [p.version, p.folder])).toEqual([
      ["2.0.0", market("g-echo-2")],
      ["1.0.0", "plugins/echo-1.0.0"],
    ]);
    const lines = warnings();
    expect(lines.map((l) => [l.level, l.folder, l.reason])).toEqual([
      ["warn", market("a-bad-version"), 'plugin.json: "version" must be a semver version (e.g. 1.2.0)'],
      ["warn", market("b-bad-schema"), expect.stringContaining('plugin.json: "configSchema" is not valid JSON Schema')],
      ["warn", market("c-no-entry"), "entry missing.js (from plugin.json): no such file in the package"],
      ["warn", market("d-not-json"), expect.stringContaining("plugin.json: not valid JSON")],
      ["warn", market("e-empty"), "plugin.json: missing"],
      ["warn", market("f-duplicate-of-first-party"), "duplicate of @acme/echo 1.0.0 (already in plugins/echo-1.0.0)"],
      ["warn", market("h-echo-2-again"), `duplicate of @acme/echo 2.0.0 (already in ${market("g-echo-2")})`],
    ]);
    expect(lines[0]!.msg).toBe(`plugin package skipped: ${market("a-bad-version")}: plugin.json: "version" must be a semver version (e.g. 1.2.0)`);
  });

  test("watched: a folder dropped in appears, a removed one goes, a fixed one comes back; nothing else is read again", async () => {
    setUp();
    const c = open().watch();
    drop("echo");
    await until("the dropped package", () => c.get("@acme/echo", "1.0.0") !== undefined);
    drop("echo-2", { version: "2.0.0", publishedAt: "not a date" });
    await until("the warning", () => warnings().length === 1);
    expect(warnings()[0]!.folder).toBe(market("echo-2"));
    writeFileSync(join(market("echo-2"), "plugin.json"), JSON.stringify({ ...ECHO, version: "2.0.0" }));
    await until("the fixed package", () => c.get("@acme/echo", "latest")?.version === "2.0.0");
    const before = c.get("@acme/echo", "1.0.0");
    rmSync(market("echo-2"), { recursive: true });
    await until("the removal", () => c.get("@acme/echo", "latest")?.version === "1.0.0");
    // The untouched folder was not read again: the same object.
    expect(c.get("@acme/echo", "1.0.0")).toBe(before!);
    rmSync(market("echo"), { recursive: true });
    await until("the last removal", () => c.packages().length === 0);
    expect(warnings().length).toBe(1);
  });
});

describe("a package never reaches outside its folder", () => {
  const NO_LINKS = "a package may hold none: it could reach outside its folder";
  let dir: string;
  let pkg: string;
  /** A package folder (the echo fixture plus lib/util.js) and, beside it, a folder outside it. */
  const setUp = () => {
    dir = tempDir();
    pkg = linkedPackage(join(dir, "pkg"), {}, {});
    mkdirSync(join(pkg, "lib"));
    writeFileSync(join(pkg, "lib", "util.js"), "inside");
    mkdirSync(join(dir, "outside"));
    writeFileSync(join(dir, "outside", "util.js"), "outside secret");
  };
  const refusal = (f: () => unknown) => {
    try {
      f();
      return "read";
    } catch (e) {
      return (e as Error).message;
    }
  };
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test("readInside: a file's bytes; undefined for no file, a folder or a path through a file; a link anywhere on the path refused", () => {
    setUp();
    expect(readInside(pkg, "lib/util.js")!.toString()).toBe("inside");
    expect([readInside(pkg, "nope.js"), readInside(pkg, "lib"), readInside(pkg, "index.js/x"), readInside(pkg, "nope/x.js")]).toEqual([undefined, undefined, undefined, undefined]);
    symlinkSync("/proc/self/environ", join(pkg, "README.md.env"));
    symlinkSync(join(dir, "outside"), join(pkg, "linked"));
    expect(refusal(() => readInside(pkg, "README.md.env"))).toBe(`README.md.env is a symbolic link; ${NO_LINKS}`);
    expect(refusal(() => readInside(pkg, "linked/util.js"))).toBe(`linked is a symbolic link; ${NO_LINKS}`);
    expect(refusal(() => readInside(pkg, "../outside/util.js"))).toBe("../outside/util.js: not a path inside the package");
    linkSync(join(dir, "outside", "util.js"), join(pkg, "hard.js"));
    expect(refusal(() => readInside(pkg, "hard.js"))).toBe(`hard.js is a hard link (the file has 2 names); ${NO_LINKS}`);
    // A FIFO is refused at once, not waited on.
    expect(Bun.spawnSync(["mkfifo", join(pkg, "fifo")]).exitCode).toBe(0);
    expect(refusal(() => readInside(pkg, "fifo"))).toBe("fifo is neither a file nor a folder");
    // The package folder itself a link: refused; an ancestor of it a link (a data dir reached through one): fine.
    symlinkSync(pkg, join(dir, "pkg-link"));
    expect(refusal(() => readInside(join(dir, "pkg-link"), "index.js"))).toBe(`the package folder is a symbolic link; ${NO_LINKS}`);
    symlinkSync(dir, join(dir, "alias"));
    expect(readInside(join(dir, "alias", "pkg"), "lib/util.js")!.toString()).toBe("inside");
  });

  test("readInside: a link swapped in between the checks and the open is not followed (O_NOFOLLOW, the open file's real path)", () => {
    setUp();
    const open = fs.openSync;
    /** Runs `swap` just before readInside opens the file, after its lstat checks passed. */
    const racing = (swap: () => void, read: () => unknown) => {
      const spy = spyOn(fs, "openSync").mockImplementation(((...args: Parameters<typeof open>) => {
        spy.mockRestore();
        swap();
        return open(...args);
      }) as typeof open);
      try {
        return refusal(read);
      } finally {
        spy.mockRestore();
      }
    };
    // The file itself: O_NOFOLLOW.
    expect(racing(() => (rmSync(join(pkg, "lib", "util.js")), symlinkSync(join(dir, "outside", "util.js"), join(pkg, "lib", "util.js"))), () => readInside(pkg, "lib/util.js"))).toBe(`lib/util.js is a symbolic link; ${NO_LINKS}`);
    // A folder on the way: opened through the link, caught by the open file's real path.
    rmSync(join(pkg, "lib"), { recursive: true });
    mkdirSync(join(pkg, "lib"));
    writeFileSync(join(pkg, "lib", "util.js"), "inside");
    expect(racing(() => (renameSync(join(pkg, "lib"), join(dir, "old-lib")), symlinkSync(join(dir, "outside"), join(pkg, "lib"))), () => readInside(pkg, "lib/util.js"))).toBe(`lib/util.js resolves outside the package folder; ${NO_LINKS}`);
    // The package folder itself.
    writeFileSync(join(dir, "outside", "index.js"), "outside secret");
    expect(racing(() => (renameSync(pkg, join(dir, "old-pkg")), symlinkSync(join(dir, "outside"), pkg)), () => readInside(pkg, "index.js"))).toBe(`index.js resolves outside the package folder; ${NO_LINKS}`);
  });

  test("packageTree: every file in name order; the first link or special file anywhere refused by its path", () => {
    setUp();
    expect(packageTree(pkg)).toEqual(["README.md", "index.js", "lib/util.js", "plugin.json"]);
    symlinkSync("/", join(pkg, "lib", "root"));
    expect(refusal(() => packageTree(pkg))).toBe(`lib/root is a symbolic link; ${NO_LINKS}`);
  });

  test("the catalog: README.md -> the environment, the TLS key, the database; an entry outside; a linked folder: each skipped with a warning", () => {
    setUp();
    const lines: { folder: string; reason: string }[] = [];
    const log = createLogger({ level: "info", format: "json", write: (chunk) => void lines.push(...chunk.split("\n").filter(Boolean).map((l) => JSON.parse(l))) });
    const market = join(dir, "marketplace");
    for (const { name, link } of leakTargets(dir, ownEnviron())) linkedPackage(join(market, name), { packageName: `@leak/${name}` }, { "README.md": link });
    linkedPackage(join(market, "entry"), { packageName: "@leak/entry" }, { "index.js": join(dir, "outside", "util.js") });
    symlinkSync(pkg, join(market, "linked-folder"));
    const c = new Catalog({ dataDir: dir, log, firstParty: {} });
    log.flush();
    expect(c.packages()).toEqual([]);
    expect(lines.map((l) => [l.folder, l.reason])).toEqual([
      [join(market, "database"), `README.md is a symbolic link; ${NO_LINKS}`],
      [join(market, "entry"), `index.js is a symbolic link; ${NO_LINKS}`],
      [join(market, "environ"), `README.md is a symbolic link; ${NO_LINKS}`],
      [join(market, "linked-folder"), `the package folder is a symbolic link; ${NO_LINKS}`],
      [join(market, "tls-key"), `README.md is a symbolic link; ${NO_LINKS}`],
    ]);
    c.close();
  });

  test("the catalog, watched: a link swapped in after the package was read is read again and the package skipped", async () => {
    setUp();
    let written = "";
    const log = createLogger({ level: "info", format: "json", write: (chunk) => void (written += chunk) });
    const c = new Catalog({ dataDir: dir, log, firstParty: {} }).watch();
    try {
      const folder = linkedPackage(join(dir, "marketplace", "echo"), {}, {});
      await until("the package", () => c.get("@acme/echo", "1.0.0")?.readme === "# Echo\n\nA test fixture.\n");
      rmSync(join(folder, "README.md"));
      symlinkSync(join(dir, "outside", "util.js"), join(folder, "README.md"));
      await until("the package skipped", () => c.get("@acme/echo", "1.0.0") === undefined);
      await until("the warning", () => (log.flush(), written.includes(`"reason":"README.md is a symbolic link; ${NO_LINKS}"`)));
      expect(written).not.toContain("outside secret");
    } finally {
      c.close();
    }
  });
});

test("plugins/index.ts embeds the package folders of plugins/ as they are (else: bun scripts/embed-plugins.ts)", () => {
  expect(readFileSync(INDEX_FILE, "utf8")).toBe(renderPluginIndex());
});
