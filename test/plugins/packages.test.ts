/**
 * The first-party packages of plugins/ as a whole: each folder is a well-formed package version
 * (plugin.json fields, a strict JSON Schema config with its secrets marked, the hooks it declares
 * exported by its entry in the sandbox, a readme that documents it and cites the vendor's API),
 * and together they cover the marketplace: two per category, one package with two versions.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import semver from "semver";
import { ajv, loadUnchecked, manifest, packageFolders, PLUGINS_DIR } from "./harness";

const CATEGORIES = ["analytics", "monitoring", "crm"];
const HOOKS = ["activate", "onEvent", "onEvaluations", "deactivate"];
const PACKAGE_NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
/** Config keys that hold credentials: they must be marked secret. */
const CREDENTIAL = /key|token|password|secret/i;

const folders = packageFolders();

describe.each(folders)("plugins/%s", (folder) => {
  const m = manifest(folder);
  const readme = existsSync(join(PLUGINS_DIR, folder, "README.md")) ? readFileSync(join(PLUGINS_DIR, folder, "README.md"), "utf8") : "";

  test("plugin.json: names, category, semver version named by the folder, author, entry, hooks, publishedAt, homepage", () => {
    expect(m.packageName).toMatch(PACKAGE_NAME);
    expect(m.packageName.startsWith("@flagsvc/")).toBe(true);
    expect(folder).toBe(`${m.packageName.slice("@flagsvc/".length)}-${m.version}`);
    expect(m.name.length).toBeGreaterThan(0);
    expect(m.description.length).toBeGreaterThan(20);
    expect(CATEGORIES).toContain(m.category);
    expect(semver.valid(m.version)).toBe(m.version);
    expect(m.author).toBe("flagsvc");
    expect(m.entry.split("/")).not.toContain("..");
    expect(existsSync(join(PLUGINS_DIR, folder, m.entry))).toBe(true);
    expect(m.hooks.length).toBeGreaterThan(0);
    for (const hook of m.hooks) expect(HOOKS).toContain(hook);
    expect(new Date(m.publishedAt).toISOString()).toBe(m.publishedAt);
    expect(m.homepage).toMatch(/^https:\/\/\S+$/);
  });

  test("configSchema: valid strict JSON Schema, closed, every property described, credentials secret", () => {
    expect(ajv.validateSchema(m.configSchema)).toBe(true);
    expect(() => ajv.compile(m.configSchema)).not.toThrow();
    expect(m.configSchema.type).toBe("object");
    expect(m.configSchema.additionalProperties).toBe(false);
    const properties = Object.entries(m.configSchema.properties);
    for (const [key, property] of properties) {
      expect(typeof property.description, key).toBe("string");
      if (CREDENTIAL.test(key)) expect(property.secret, `${key} is a credential`).toBe(true);
      // A default must satisfy its own property (the plugin applies it when the key is absent).
      if ("default" in property) expect(ajv.validate(property, property.default), `${key}'s default`).toBe(true);
    }
    expect(properties.some(([, p]) => p.secret === true)).toBe(true);
  });

  test("the entry, loaded in the sandbox, exports exactly the hooks plugin.json declares", async () => {
    const { sandbox } = await loadUnchecked(folder, {});
    expect([...sandbox.hooks].sort()).toEqual([...m.hooks].sort());
    sandbox.dispose();
  });

  test("README: names the package and version, documents every config key and default and every hook, shows an install that the schema accepts, cites the vendor's API", () => {
    expect(readme).toContain(`\`${m.packageName}\` ${m.version}`);
    for (const [key, property] of Object.entries(m.configSchema.properties)) {
      const row = readme.split("\n").find((line) => line.startsWith(`| \`${key}\``));
      expect(row, `config table row for ${key}`).toBeDefined();
      if (property.secret) expect(row).toContain("**secret**");
      if ("default" in property) {
        const shown = typeof property.default === "string" ? (property.default === "" ? '`""`' : `\`${property.default}\``) : `\`${JSON.stringify(property.default)}\``;
        expect(row, `default of ${key}`).toContain(shown);
      }
    }
    for (const hook of m.hooks) expect(readme).toContain(`\`${hook}\``);
    const install = readme.match(/POST "\$B\/v1\/projects\/[a-z0-9-]+\/plugins"[\s\S]*?-d '(\{[\s\S]*?\})'/);
    expect(install, "install example").not.toBeNull();
    const body = JSON.parse(install![1]!);
    expect(body.packageName).toBe(m.packageName);
    expect(body.version).toBe(m.version);
    expect(ajv.validate(m.configSchema, body.config), ajv.errorsText()).toBe(true);
    expect(readme).toContain(`<${m.homepage}>`);
  });
});

test("the catalog: unique versions, at least two packages per category, one package with two versions", () => {
  const manifests = folders.map(manifest);
  const ids = manifests.map((m) => `${m.packageName}@${m.version}`);
  expect(new Set(ids).size).toBe(ids.length);
  const packages = new Map<string, { category: string; versions: string[] }>();
  for (const m of manifests) {
    const p = packages.get(m.packageName) ?? { category: m.category, versions: [] };
    expect(p.category).toBe(m.category); // a package keeps its category across versions
    p.versions.push(m.version);
    packages.set(m.packageName, p);
  }
  for (const category of CATEGORIES) expect([...packages.values()].filter((p) => p.category === category).length).toBeGreaterThanOrEqual(2);
  expect([...packages.values()].some((p) => p.versions.length >= 2)).toBe(true);
  expect(packages.size).toBeGreaterThanOrEqual(6);
});
