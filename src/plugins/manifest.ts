/**
 * A plugin package (decisions §11): a folder holding `plugin.json`, the ES module its `entry`
 * names and (optionally) `README.md`. `readPackage` judges one from its files, whatever holds them
 * (the binary's embedded first-party packages, a marketplace folder, a .tgz), and throws
 * `PackageError` with one line saying what is wrong. Also here: what the format's `configSchema`
 * means for a config (validation, secrets, masking).
 *
 * `configSchema` is JSON Schema draft 2020-12 (ajv's 2020 class, in strict mode: an unknown
 * keyword or format is an invalid schema, not a silently ignored one), plus the boolean keyword
 * `secret` on top-level properties.
 */
import { posix } from "node:path";
import Ajv2020, { type ErrorObject, type ValidateFunction } from "ajv/dist/2020";
import semver from "semver";
import { unknownConfigField } from "../http/errors";

export const CATEGORIES = ["analytics", "monitoring", "crm"] as const;
export type Category = (typeof CATEGORIES)[number];
export const HOOKS = ["activate", "onEvent", "onEvaluations", "deactivate"] as const;
export type HookName = (typeof HOOKS)[number];

/** A `plugin.json`, checked. `publishedAt` is normalised to ISO 8601 UTC with milliseconds (decisions §2). */
export interface PluginManifest {
  packageName: string;
  name: string;
  description: string;
  category: Category;
  version: string;
  author: string;
  entry: string;
  hooks: HookName[];
  configSchema: Record<string, unknown>;
  publishedAt: string;
  homepage?: string;
}

/** A package as read: its manifest, the entry module's text and the readme ("" when absent). */
export interface PluginPackage extends PluginManifest {
  source: string;
  readme: string;
}

/** What is wrong with a package, as one line. */
export class PackageError extends Error {}

export const MANIFEST = "plugin.json";
export const README = "README.md";

// npm's rule for package names (validate-npm-package-name, new packages): lower case, scoped allowed.
const PACKAGE_NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
const PACKAGE_NAME_MAX = 214;
const ISO_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/;
const TEXT_LIMITS = { name: 100, description: 2000, author: 200 } as const;
const FIELDS = new Set(["packageName", "name", "description", "category", "version", "author", "entry", "hooks", "configSchema", "publishedAt", "homepage"]);

/** ISO 8601 with a zone, and a real calendar date (Date.parse takes February 31st as March 3rd). */
const isTimestamp = (v: string): boolean => {
  if (!ISO_TIMESTAMP.test(v) || Number.isNaN(Date.parse(v))) return false;
  const [y, mo, d] = v.slice(0, 10).split("-").map(Number) as [number, number, number];
  return new Date(Date.UTC(y, mo - 1, d)).getUTCDate() === d;
};

const isUrl = (value: string, protocols: readonly string[]): boolean => {
  try {
    return protocols.includes(new URL(value).protocol);
  } catch {
    return false;
  }
};

/**
 * One compiler for every package. Strict mode refuses what a schema author would expect to
 * work and would not (unknown keywords, formats, `required` properties not declared). The
 * formats are a few common ones written here: ajv-formats would add a dependency for them.
 */
const ajv = new Ajv2020({ strict: true, allErrors: true });
ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });
ajv.addFormat("uri", (v) => URL.canParse(v));
ajv.addFormat("email", /^[^\s@]+@[^\s@]+\.[^\s@]+$/);
ajv.addFormat("hostname", /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i);
ajv.addFormat("date-time", isTimestamp);
ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);

/** Compiled validators by schema object: a package's schema is compiled once, when it is read. */
const compiled = new WeakMap<object, ValidateFunction>();

function fail(message: string): never {
  throw new PackageError(message);
}

function text(m: Record<string, unknown>, field: keyof typeof TEXT_LIMITS): string {
  const v = m[field];
  if (typeof v !== "string" || v.trim() === "" || v.length > TEXT_LIMITS[field]) fail(`${MANIFEST}: "${field}" must be a non-empty string of at most ${TEXT_LIMITS[field]} characters`);
  return v;
}

/** `entry` as a path inside the package: relative, no `..`, normalised (`./index.js` is `index.js`). */
function entryPath(v: unknown): string {
  if (typeof v !== "string" || v === "" || v.includes("\\") || v.includes("\0")) fail(`${MANIFEST}: "entry" must be a relative path inside the package (e.g. index.js)`);
  const p = posix.normalize(v);
  if (posix.isAbsolute(p) || p === "." || p.split("/").includes("..")) fail(`${MANIFEST}: "entry" must be a relative path inside the package, without ".." (got ${JSON.stringify(v)})`);
  return p;
}

function checkSchema(schema: unknown): Record<string, unknown> {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) fail(`${MANIFEST}: "configSchema" must be a JSON Schema object`);
  const s = schema as Record<string, unknown>;
  if (s.type !== "object") fail(`${MANIFEST}: "configSchema" must describe an object ("type": "object")`);
  // The first error only: one keyword error drags anyOf/type follow-ups that say nothing more.
  if (!ajv.validateSchema(s)) fail(`${MANIFEST}: "configSchema" is not valid JSON Schema: ${ajv.errorsText(ajv.errors?.slice(0, 1), { dataVar: "configSchema" })}`);
  try {
    compiled.set(s, ajv.compile(s));
  } catch (e) {
    fail(`${MANIFEST}: "configSchema" is not valid JSON Schema: ${(e as Error).message}`);
  } finally {
    // A schema's `$id` would stay registered: the next version of the package, same `$id`, could not compile.
    ajv.removeSchema(s);
  }
  return s;
}

/** Checks a parsed `plugin.json`, every field of the format, unknown fields refused (typos must not pass). */
export function checkManifest(m: unknown): PluginManifest {
  if (typeof m !== "object" || m === null || Array.isArray(m)) fail(`${MANIFEST}: must be a JSON object`);
  const o = m as Record<string, unknown>;
  const unknown = Object.keys(o).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) fail(`${MANIFEST}: unknown field ${JSON.stringify(unknown)}`);
  const { packageName, category, version, hooks, publishedAt, homepage } = o;
  if (typeof packageName !== "string" || packageName.length > PACKAGE_NAME_MAX || !PACKAGE_NAME.test(packageName)) {
    fail(`${MANIFEST}: "packageName" must be an npm package name (lower case, scoped allowed: @scope/name), at most ${PACKAGE_NAME_MAX} characters`);
  }
  const name = text(o, "name");
  const description = text(o, "description");
  if (!CATEGORIES.includes(category as Category)) fail(`${MANIFEST}: "category" must be one of ${CATEGORIES.join(", ")}`);
  // semver.valid() drops build metadata ("1.0.0+b" is "1.0.0"), which order ignores too: refused, as is a leading "v".
  if (typeof version !== "string" || semver.valid(version) !== version) fail(`${MANIFEST}: "version" must be a semver version (e.g. 1.2.0)`);
  const author = text(o, "author");
  const entry = entryPath(o.entry);
  if (!Array.isArray(hooks) || hooks.length === 0 || new Set(hooks).size !== hooks.length || !hooks.every((h) => HOOKS.includes(h))) {
    fail(`${MANIFEST}: "hooks" must be a non-empty list of distinct hook names among ${HOOKS.join(", ")}`);
  }
  if (typeof publishedAt !== "string" || !isTimestamp(publishedAt)) {
    fail(`${MANIFEST}: "publishedAt" must be an ISO 8601 timestamp (e.g. 2026-11-20T00:00:00.000Z)`);
  }
  if (homepage !== undefined && (typeof homepage !== "string" || !isUrl(homepage, ["http:", "https:"]))) fail(`${MANIFEST}: "homepage" must be an http or https URL`);
  const configSchema = checkSchema(o.configSchema);
  return {
    packageName,
    name,
    description,
    category: category as Category,
    version,
    author,
    entry,
    hooks: hooks as HookName[],
    configSchema,
    publishedAt: new Date(publishedAt).toISOString(),
    ...(homepage !== undefined ? { homepage: homepage as string } : {}),
  };
}

/**
 * Reads and checks a package from its files: `read(path)` gives a file's text by its path
 * inside the package, undefined when there is no such file.
 */
export function readPackage(read: (path: string) => string | undefined): PluginPackage {
  const raw = read(MANIFEST);
  if (raw === undefined) fail(`${MANIFEST}: missing`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    fail(`${MANIFEST}: not valid JSON (${(e as Error).message})`);
  }
  const manifest = checkManifest(parsed);
  const source = read(manifest.entry);
  if (source === undefined) fail(`entry ${manifest.entry} (from ${MANIFEST}): no such file in the package`);
  return { ...manifest, source, readme: read(README) ?? "" };
}

// ---- configs ---------------------------------------------------------------------------------

type WithSchema = Pick<PluginManifest, "configSchema">;

const validatorOf = (pkg: WithSchema): ValidateFunction => {
  let v = compiled.get(pkg.configSchema);
  if (!v) compiled.set(pkg.configSchema, (v = ajv.compile(pkg.configSchema)));
  return v;
};

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** A JSON pointer's segments, unescaped. */
const pointer = (p: string) => p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));

/** The properties the schema object holding the failed keyword declares (for "known: ..."). */
function knownProperties(schema: Record<string, unknown>, schemaPath: string): string[] {
  let node: unknown = schema;
  for (const s of pointer(schemaPath).slice(0, -1)) node = (node as Record<string, unknown> | undefined)?.[s];
  const properties = (node as { properties?: unknown } | undefined)?.properties;
  return typeof properties === "object" && properties !== null ? Object.keys(properties) : [];
}

function detail(e: ErrorObject, schema: Record<string, unknown>): { path: string; message: string } {
  const at = pointer(e.instancePath);
  if (e.keyword === "required") return { path: ["config", ...at, e.params.missingProperty].join("."), message: "Required" };
  if (e.keyword === "additionalProperties") {
    return { path: ["config", ...at, e.params.additionalProperty].join("."), message: unknownConfigField(knownProperties(schema, e.schemaPath)) };
  }
  const allowed = e.keyword === "enum" ? `: ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` : "";
  return { path: ["config", ...at].join("."), message: `${capitalise(e.message ?? "is invalid")}${allowed}` };
}

/** The ways `config` does not match the package's `configSchema`: one detail per failing property (empty: it matches). */
export function validateConfig(pkg: WithSchema, config: unknown): { path: string; message: string }[] {
  const validate = validatorOf(pkg);
  if (validate(config)) return [];
  const details = new Map<string, string>();
  for (const e of validate.errors ?? []) {
    const d = detail(e, pkg.configSchema);
    if (!details.has(d.path)) details.set(d.path, d.message);
  }
  return [...details].map(([path, message]) => ({ path, message }));
}
