/**
 * `flagsvc export` / `flagsvc import` (docs/export-import.md).
 *
 * The instance document moves every table of an instance between any two backends: read in
 * one snapshot, written in one change-log commit (all or nothing; running PostgreSQL nodes hear
 * its entries). Rows are matched by id, and by their natural key where the ids differ (a
 * project's slug, a flag's key in its project, a user's email, a key's hash): the target's id is
 * kept and the rows that refer to it follow. Nothing is deleted: a row of the target that the
 * document lacks stays.
 *
 * The flags document is one project's flags as code: applied flag by flag through the flags' and
 * segments' services, with the API's checks and change-log entries.
 */
import { Value } from "@sinclair/typebox/value";
import { diff, whole, type Author, type ChangeDraft, type ResourceType } from "../../changes/entry";
import { iso, type Clock } from "../../lib/clock";
import type { Rule, Variant } from "../../evaluation/types";
import type { FlagService } from "../flags/service";
import type { FlagInsights } from "../insights/service";
import type { InsightsStore } from "../insights/store";
import type { SegmentService } from "../segments/service";
import { DOCUMENT_VERSION, FLAGS_KIND, FlagsDocument, INSTANCE_KIND, InstanceDocument, type Counts, type FlagAsCode, type SegmentAsCode } from "./model";
import { exported, PRIMARY_KEYS, TABLES, type Row, type TableName, type Tables, type TransferStore, type Upserts } from "./store";

/** A document that is not one this version reads: nothing is changed (exit code 2). */
export class DocumentError extends Error {}

export type Format = "json" | "yaml";

/** The document as text: JSON (2-space indented) or YAML, ending with a newline. */
export function formatDocument(doc: unknown, format: Format): string {
  const text = format === "yaml" ? Bun.YAML.stringify(doc, null, 2) : JSON.stringify(doc, null, 2);
  return text.endsWith("\n") ? text : `${text}\n`;
}

/** Parses JSON or YAML (YAML is a superset: one parser would do, but JSON's errors are clearer). */
export function parseDocument(text: string, format: Format): unknown {
  try {
    return format === "yaml" ? Bun.YAML.parse(text) : JSON.parse(text);
  } catch (e) {
    throw new DocumentError(`not valid ${format.toUpperCase()}: ${(e as Error).message}`);
  }
}

/** Which document it is; refuses another kind or version. */
export function kindOf(doc: unknown): typeof INSTANCE_KIND | typeof FLAGS_KIND {
  const head = (doc ?? {}) as { flagsvc?: unknown; version?: unknown };
  if (typeof doc !== "object" || doc === null || (head.flagsvc !== INSTANCE_KIND && head.flagsvc !== FLAGS_KIND)) {
    throw new DocumentError(`not a flagsvc document: "flagsvc" must be "${INSTANCE_KIND}" or "${FLAGS_KIND}"`);
  }
  if (head.version !== DOCUMENT_VERSION) throw new DocumentError(`a "${head.flagsvc}" document of version ${JSON.stringify(head.version)}: this flagsvc reads version ${DOCUMENT_VERSION}`);
  return head.flagsvc;
}

function checked<T>(schema: Parameters<typeof Value.Check>[0], doc: unknown, what: string): T {
  if (Value.Check(schema, doc)) return doc as T;
  const problems = [...Value.Errors(schema, doc)].slice(0, 5).map((e) => `${e.path || "/"}: ${e.message}`);
  throw new DocumentError(`not a valid ${what} document: ${problems.join("; ")}`);
}

// ---- stable JSON ---------------------------------------------------------------------------

/** JSON with object keys sorted at every depth: equal values give equal text, whatever order a backend keeps (jsonb reorders keys). */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const keyOf = (name: TableName, row: Row) => PRIMARY_KEYS[name].map((k) => String(row[k])).join("\u0000");

// ---- the instance --------------------------------------------------------------------------

/** Every table of the instance, rows sorted by primary key (code-unit order: the same from either backend). */
export async function exportInstance(store: TransferStore, clock: Clock, source: string): Promise<InstanceDocument> {
  const tables = await store.snapshot();
  const sorted = Object.fromEntries(TABLES.map((name) => [name, [...tables[name]].sort((a, b) => byText(keyOf(name, a), keyOf(name, b)))])) as Tables;
  return { flagsvc: INSTANCE_KIND, version: DOCUMENT_VERSION, exportedAt: iso(clock.now()), source, tables: sorted };
}

export type InstanceReport = Record<TableName, Counts>;

/** Applies an instance document (or, `dryRun`, says what it would do): one commit, all or nothing. */
export async function importInstance(store: TransferStore, author: Author, doc: unknown, dryRun: boolean): Promise<InstanceReport> {
  const { tables } = checked<InstanceDocument>(InstanceDocument, doc, "instance");
  if (dryRun) return planInstance(await store.snapshot(), tables).result;
  return store.write(author, (current) => planInstance(current, tables));
}

const RESOURCE_OF: Partial<Record<TableName, ResourceType>> = {
  projects: "project",
  environments: "environment",
  flags: "flag",
  flagStates: "flag_state",
  segments: "segment",
  schedules: "schedule",
  users: "user",
  adminKeys: "admin_key",
  apiKeys: "api_key",
  webhooks: "webhook",
  plugins: "plugin",
  integrations: "integration",
};

/** Fields shown as "********" in the entries (as the modules' own entries show them). */
const SECRETS: Partial<Record<TableName, string[]>> = {
  users: ["passwordHash"],
  adminKeys: ["keyHash"],
  apiKeys: ["keyHash", "previousHash"],
  webhooks: ["secret"],
  plugins: ["config"],
  integrations: ["config"],
};

/** A row's natural key, unique in its table: what matches it when the ids differ. */
const NATURAL: Partial<Record<TableName, (r: Row) => string>> = {
  users: (r) => String(r.email),
  adminKeys: (r) => String(r.keyHash),
  projects: (r) => String(r.slug),
  environments: (r) => `${r.projectId} ${r.slug}`,
  segments: (r) => `${r.projectId} ${r.key}`,
  flags: (r) => `${r.projectId} ${r.key}`,
  apiKeys: (r) => String(r.keyHash),
};

/** Columns that refer to another table's id: rewritten when that row was matched under another id. */
const REFERENCES: Record<string, TableName> = { projectId: "projects", environmentId: "environments", flagId: "flags" };

function planInstance(current: Tables, incoming: Tables) {
  const report = Object.fromEntries(TABLES.map((n) => [n, { created: 0, updated: 0, unchanged: 0 }])) as InstanceReport;
  const upserts: Upserts = {};
  const changes: ChangeDraft[] = [];
  /** Per table: the document's id -> the target's id, where they differ. */
  const renamed = new Map<TableName, Map<string, string>>();
  /** What the entries name: every project, environment and flag of the target and of the document. */
  const known = { projects: new Map<string, Row>(), environments: new Map<string, Row>(), flags: new Map<string, Row>() };
  for (const name of ["projects", "environments", "flags"] as const) for (const r of current[name]) known[name].set(r.id as string, r);

  for (const name of TABLES) {
    const existing = new Map(current[name].map((r) => [keyOf(name, r), r]));
    const natural = NATURAL[name];
    const byNatural = natural ? new Map(current[name].map((r) => [natural(r), r])) : undefined;
    for (const source of incoming[name]) {
      const row = { ...source };
      for (const [column, table] of Object.entries(REFERENCES)) {
        const id = renamed.get(table)?.get(row[column] as string);
        if (id !== undefined) row[column] = id;
      }
      let found = existing.get(keyOf(name, row));
      if (!found && natural) {
        found = byNatural!.get(natural(row));
        if (found) {
          if (!renamed.has(name)) renamed.set(name, new Map());
          renamed.get(name)!.set(row.id as string, found.id as string);
          row.id = found.id;
        }
      }
      if (name in known) known[name as keyof typeof known].set(row.id as string, row);
      const before = found ? exported(found) : undefined;
      if (before && canonical(before) === canonical(row)) {
        report[name].unchanged++;
        continue;
      }
      report[name][before ? "updated" : "created"]++;
      (upserts[name] ??= { insert: [], update: [] })[before ? "update" : "insert"].push(row);
      const resource = RESOURCE_OF[name];
      if (resource) {
        const secrets = SECRETS[name] ?? [];
        const delta = before ? diff(before, row, { secrets }) : whole(row, "created", secrets);
        changes.push(entryOf(name, resource, row, before ? "updated" : "created", delta, known));
      }
    }
  }
  return { result: report, upserts, changes };
}

/** The entry of one imported row, named as the module's own entries name it. */
function entryOf(name: TableName, type: ResourceType, row: Row, action: "created" | "updated", changes: ChangeDraft["changes"], known: Record<"projects" | "environments" | "flags", Map<string, Row>>): ChangeDraft {
  const flag = name === "flagStates" ? known.flags.get(row.flagId as string) : undefined;
  const projectId = (name === "projects" ? row.id : (flag?.projectId ?? row.projectId)) as string | undefined;
  const projectRow = projectId === undefined ? undefined : known.projects.get(projectId);
  const project = projectRow ? { id: projectRow.id as string, slug: projectRow.slug as string } : null;
  const environment =
    name === "environments" ? (row.slug as string) : name === "schedules" ? (row.environment as string) : row.environmentId ? ((known.environments.get(row.environmentId as string)?.slug as string | undefined) ?? null) : null;
  const key: Record<string, unknown> = {
    projects: row.slug,
    environments: row.slug,
    flags: row.key,
    segments: row.key,
    flagStates: flag?.key,
    schedules: row.flagKey,
    users: row.email,
    adminKeys: row.name,
    apiKeys: row.name,
    plugins: row.packageName,
    integrations: row.type,
  };
  return { project, environment, resource: { type, id: (row.id ?? row.flagId) as string, key: (key[name] as string | undefined) ?? null }, action, changes };
}

// ---- flags as code -------------------------------------------------------------------------

/** One project's flags as code, from an instance snapshot: sorted by key, no ids, no times. */
export function flagsDocument(tables: Tables, slug: string): FlagsDocument {
  const project = tables.projects.find((p) => p.slug === slug);
  if (!project) throw new DocumentError(`no project "${slug}"`);
  const envs = tables.environments.filter((e) => e.projectId === project.id).sort((a, b) => (a.seq as number) - (b.seq as number));
  const flags = tables.flags.filter((f) => f.projectId === project.id).sort((a, b) => byText(a.key as string, b.key as string));
  const used = new Set<string>();
  const out: FlagAsCode[] = flags.map((f) => {
    const rules = f.rules as Rule[];
    for (const r of rules) for (const c of r.conditions) if (c.operator === "in_segment" || c.operator === "not_in_segment") used.add(c.value as string);
    const states: Record<string, { enabled: boolean; rolloutPercentage: number | null }> = {};
    for (const env of envs) {
      const s = tables.flagStates.find((x) => x.flagId === f.id && x.environmentId === env.id);
      states[env.slug as string] = { enabled: (s?.enabled as boolean | undefined) ?? false, rolloutPercentage: (s?.rolloutPercentage as number | null | undefined) ?? null };
    }
    return flagAsCode({ ...f, states } as unknown as FlagAsCode);
  });
  const segments = tables.segments
    .filter((s) => s.projectId === project.id && used.has(s.key as string))
    .sort((a, b) => byText(a.key as string, b.key as string))
    .map((s) => segmentAsCode(s as unknown as SegmentAsCode));
  return { flagsvc: FLAGS_KIND, version: DOCUMENT_VERSION, project: slug, flags: out, ...(segments.length > 0 ? { segments } : {}) };
}

/** A flag as code in its one written form (defaults filled, fields in a fixed order, rule ids dropped): what is compared and written. */
function flagAsCode(f: FlagAsCode): FlagAsCode {
  return {
    key: f.key,
    name: f.name,
    ...(f.description != null ? { description: f.description } : {}),
    variants: (f.variants ?? []).map(({ key, name, description, weight }: Variant) => ({
      key,
      ...(name !== undefined ? { name } : {}),
      ...(description !== undefined ? { description } : {}),
      ...(weight !== undefined ? { weight } : {}),
    })),
    rules: (f.rules ?? []).map((r) => ({
      name: r.name ?? "",
      conditions: (r.conditions ?? []).map((c) => (c.value === undefined ? { attribute: c.attribute, operator: c.operator } : { attribute: c.attribute, operator: c.operator, value: c.value })),
      enabled: r.enabled ?? true,
      variant: r.variant ?? null,
    })),
    ...(f.bucketBy != null && f.bucketBy !== "userId" ? { bucketBy: f.bucketBy } : {}),
    ...(f.prerequisites?.length ? { prerequisites: f.prerequisites.map(({ flagKey, variant }) => (variant === undefined ? { flagKey } : { flagKey, variant })) } : {}),
    ...(f.states ? { states: Object.fromEntries(Object.entries(f.states).map(([env, s]) => [env, { enabled: s.enabled, rolloutPercentage: s.rolloutPercentage ?? null }])) } : {}),
  };
}

function segmentAsCode(s: SegmentAsCode): SegmentAsCode {
  return {
    key: s.key,
    name: s.name,
    ...(s.description != null ? { description: s.description } : {}),
    conditions: s.conditions.map((c) => (c.value === undefined ? { attribute: c.attribute, operator: c.operator } : { attribute: c.attribute, operator: c.operator, value: c.value })),
    included: s.included ?? [],
    excluded: s.excluded ?? [],
  };
}

export type Outcome = "created" | "updated" | "unchanged" | "deleted";
export interface FlagsReport {
  project: string;
  flags: { key: string; outcome: Outcome }[];
  segments: { key: string; outcome: Outcome }[];
}

export interface FlagsImportDeps {
  flags: FlagService;
  segments: SegmentService;
  /** The instance as it is now (the flags' and segments' rows of the project). */
  snapshot: () => Promise<Tables>;
}

/**
 * Applies a flags document to its project: segments first, then flags (a flag after the flags
 * it has as prerequisites), each created or updated through its service (the API's checks, one
 * change-log entry per change) and its states PUT where they differ. `prune`: the project's
 * flags the document lacks are deleted. `dryRun`: the same report, nothing written.
 */
export async function importFlags(deps: FlagsImportDeps, author: Author, doc: unknown, opts: { dryRun: boolean; prune: boolean }): Promise<FlagsReport> {
  const parsed = checked<FlagsDocument>(FlagsDocument, doc, "flags");
  const tables = await deps.snapshot();
  const current = flagsDocument(tables, parsed.project);
  const projectId = tables.projects.find((p) => p.slug === parsed.project)!.id;
  const envSlugs = new Set(tables.environments.filter((e) => e.projectId === projectId).map((e) => e.slug as string));
  for (const f of parsed.flags) {
    for (const env of Object.keys(f.states ?? {})) if (!envSlugs.has(env)) throw new DocumentError(`flag ${f.key}: project ${parsed.project} has no environment "${env}"`);
  }
  const currentFlags = new Map(current.flags.map((f) => [f.key, f]));
  const allSegments = new Map(
    tables.segments.filter((s) => s.projectId === projectId).map((s) => [s.key as string, segmentAsCode(s as unknown as SegmentAsCode)]),
  );
  const report: FlagsReport = { project: parsed.project, flags: [], segments: [] };
  const slug = parsed.project;

  for (const wanted of (parsed.segments ?? []).map(segmentAsCode).sort((a, b) => byText(a.key, b.key))) {
    const have = allSegments.get(wanted.key);
    const outcome: Outcome = !have ? "created" : canonical(have) === canonical(wanted) ? "unchanged" : "updated";
    report.segments.push({ key: wanted.key, outcome });
    if (opts.dryRun || outcome === "unchanged") continue;
    if (outcome === "created") await deps.segments.createSegment(author, slug, wanted);
    else await deps.segments.updateSegment(author, slug, wanted.key, { name: wanted.name, description: wanted.description ?? null, conditions: wanted.conditions, included: wanted.included, excluded: wanted.excluded });
  }

  for (const raw of prerequisitesFirst(parsed.flags)) {
    const wanted = flagAsCode(raw);
    const have = currentFlags.get(wanted.key);
    // States: only the environments the document names; the others are left as they are.
    const states = wanted.states && have ? Object.fromEntries(Object.keys(wanted.states).map((env) => [env, have.states![env]!])) : undefined;
    const comparable = have ? { ...have, states } : undefined;
    const outcome: Outcome = !have ? "created" : canonical(comparable) === canonical(wanted) ? "unchanged" : "updated";
    report.flags.push({ key: wanted.key, outcome });
    if (opts.dryRun || outcome === "unchanged") continue;
    const { states: wantedStates, ...definition } = wanted;
    const { states: _, ...haveDefinition } = have ?? { states: undefined };
    if (!have) await deps.flags.createFlag(author, slug, definition);
    else if (canonical(haveDefinition) !== canonical(definition)) {
      await deps.flags.updateFlag(author, slug, wanted.key, {
        name: definition.name,
        description: definition.description ?? null,
        variants: definition.variants,
        rules: keepRuleIds(tables, projectId as string, wanted.key, definition.rules ?? []),
        bucketBy: definition.bucketBy ?? null,
        prerequisites: definition.prerequisites ?? null,
      });
    }
    for (const [env, s] of Object.entries(wantedStates ?? {})) {
      const before = have?.states?.[env] ?? { enabled: false, rolloutPercentage: null };
      if (canonical(before) !== canonical(s)) await deps.flags.putState(author, slug, wanted.key, env, { enabled: s.enabled, rolloutPercentage: s.rolloutPercentage ?? null });
    }
  }

  if (opts.prune) {
    const keep = new Set(parsed.flags.map((f) => f.key));
    // Dependants first: a flag that is another's prerequisite can go only once that one has.
    for (const gone of prerequisitesFirst(current.flags.filter((f) => !keep.has(f.key))).reverse()) {
      report.flags.push({ key: gone.key, outcome: "deleted" });
      if (!opts.dryRun) await deps.flags.deleteFlag(author, slug, gone.key);
    }
  }
  return report;
}

/** The rules to store: each keeps the id of the current rule at its place, so an unchanged list stays the same. */
function keepRuleIds(tables: Tables, projectId: string, key: string, rules: FlagAsCode["rules"] & object) {
  const stored = (tables.flags.find((f) => f.projectId === projectId && f.key === key)?.rules ?? []) as Rule[];
  return rules.map((r, i) => (stored[i] ? { ...r, id: stored[i]!.id } : r));
}

/** The flags ordered so that each comes after the document's flags it has as prerequisites (a cycle keeps the document's order; the service refuses it). */
function prerequisitesFirst<F extends { key: string; prerequisites?: { flagKey: string }[] }>(flags: readonly F[]): F[] {
  const byKey = new Map(flags.map((f) => [f.key, f]));
  const out: F[] = [];
  const seen = new Set<string>();
  const visit = (f: F) => {
    if (seen.has(f.key)) return;
    seen.add(f.key);
    for (const p of f.prerequisites ?? []) {
      const dep = byKey.get(p.flagKey);
      if (dep) visit(dep);
    }
    out.push(f);
  };
  for (const f of flags) visit(f);
  return out;
}

/** Report lines: one per resource kind (instance) or per flag and segment (flags as code). */
export function instanceReportLines(report: InstanceReport, dryRun: boolean): string[] {
  const head = dryRun ? "dry run: nothing written; the import would make these changes" : "imported";
  const width = Math.max(...TABLES.map((n) => n.length));
  return [head, ...TABLES.map((n) => `  ${n.padEnd(width)}  ${countsText(report[n])}`)];
}

export function flagsReportLines(report: FlagsReport, dryRun: boolean): string[] {
  const all = [...report.segments.map((s) => ({ what: `segment ${s.key}`, outcome: s.outcome })), ...report.flags.map((f) => ({ what: `flag ${f.key}`, outcome: f.outcome }))];
  const total = (o: Outcome) => all.filter((a) => a.outcome === o).length;
  return [
    `${dryRun ? "dry run: nothing written; " : ""}project ${report.project}: ${total("created")} created, ${total("updated")} updated, ${total("unchanged")} unchanged${total("deleted") > 0 ? `, ${total("deleted")} deleted` : ""}`,
    ...all.map((a) => `  ${a.what}: ${a.outcome}`),
  ];
}

const countsText = (c: Counts) => `${c.created} created, ${c.updated} updated, ${c.unchanged} unchanged`;

/**
 * What the flags' service reads of insights, from the database alone: the CLI counts no
 * evaluations, so there is nothing unflushed to add (the server's own adds its counters).
 */
export function storedFlagInsights(store: Pick<InsightsStore, "lastEvaluated" | "staleOf">): FlagInsights {
  const lastEvaluatedOf: FlagInsights["lastEvaluatedOf"] = async (flags, environmentIds) => {
    const out = new Map(flags.map((f) => [f.id, new Map<string, string>()]));
    for (const r of await store.lastEvaluated(flags.map((f) => f.id))) if (environmentIds.includes(r.environmentId)) out.get(r.flagId)?.set(r.environmentId, iso(r.at));
    return out;
  };
  return {
    lastEvaluatedOf,
    lastEvaluated: async (flagId, flagKey, environmentIds) => (await lastEvaluatedOf([{ id: flagId, key: flagKey }], environmentIds)).get(flagId)!,
    staleOf: (flagId) => store.staleOf(flagId),
  };
}
