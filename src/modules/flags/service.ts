/**
 * Flags and their states (decisions §6). Every write is checked in full before anything is
 * stored (a refused write changes nothing), then committed, then put into the evaluation
 * snapshot before the response goes out (read-your-writes). A write that changes something
 * stores its webhook events and deliveries in the same transaction (webhooks/events.ts) and
 * kicks the sender after the commit.
 */
import { and, asc, eq, exists, sql } from "drizzle-orm";
import type { AppContext } from "../../context";
import { isUniqueViolation, prepared, transaction } from "../../db/client";
import { flags, flagStates } from "../../db/schema";
import { OPERATOR_VALUE_TYPES, VALUE_OPTIONAL, type Condition, type Rule, type Variant } from "../../evaluation/types";
import { conflict, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { iso } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { requireEnvironment, requireProject, type Environment, type Project } from "../projects/service";
import { flagLevelChanges, recordEvents, stateChange } from "../webhooks/events";
import { LIMITS } from "./model";

export interface Flag {
  id: string;
  key: string;
  name: string;
  /** Absent when not set (the spec: "string, optional"). */
  description?: string;
  variants: Variant[];
  rules: Rule[];
  createdAt: string;
  updatedAt: string;
}

export interface FlagState {
  flagKey: string;
  environment: string;
  enabled: boolean;
  rolloutPercentage: number | null;
  updatedAt: string;
}

/** A rule as the API accepts it (model.ts RuleInput): optional fields get their defaults here. */
export interface RuleInput {
  id?: string;
  name?: string;
  conditions?: Condition[];
  enabled?: boolean;
  variant?: string | null;
}

export interface NewFlagInput {
  key: string;
  name: string;
  description?: string | null;
  variants?: Variant[];
  rules?: RuleInput[];
}

export interface FlagPatchInput {
  name?: string;
  description?: string | null;
  variants?: Variant[];
  rules?: RuleInput[];
}

export interface ListQuery {
  environment?: string;
  enabled?: boolean;
  q?: string;
  page?: number;
  perPage?: number;
}

// ---- validation --------------------------------------------------------------------------

/** At most 3 decimal places (rollout percentages and weights, decisions §7). */
export const hasAtMost3Decimals = (n: number): boolean => Math.round(n * 1000) / 1000 === n;

const typeOf = (v: unknown) => (Array.isArray(v) ? "array" : typeof v);

/**
 * Checks what the schema cannot: variants as a whole, each rule against the variants, each
 * condition's value against its operator. `rulesPath`: where the rules came from, `body.rules`,
 * or null for the stored rules when a PATCH changes only the variants: a variant a stored rule
 * still serves is then reported at `body.variants`, the part of the request at fault.
 */
function checkDefinition(variants: readonly Variant[], rules: readonly RuleInput[], variantsPath: string, rulesPath: string | null): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const keys = new Set<string>();
  variants.forEach((v, i) => {
    if (keys.has(v.key)) details.push({ path: `${variantsPath}[${i}].key`, message: `Duplicate variant key ${v.key}` });
    keys.add(v.key);
    if (v.weight !== undefined && !hasAtMost3Decimals(v.weight)) details.push({ path: `${variantsPath}[${i}].weight`, message: "At most 3 decimal places" });
  });
  const weighted = variants.filter((v) => v.weight !== undefined).length;
  if (weighted > 0 && weighted < variants.length) {
    details.push({ path: variantsPath, message: "Either every variant has a weight or none has" });
  } else if (weighted > 0 && variants.reduce((sum, v) => sum + Math.round(v.weight! * 1000), 0) !== 100_000) {
    details.push({ path: variantsPath, message: "Variant weights must sum to 100" });
  }
  const ruleIds = new Set<string>();
  rules.forEach((rule, r) => {
    const at = `${rulesPath ?? "rules"}[${r}]`;
    if (rule.id !== undefined) {
      if (ruleIds.has(rule.id)) details.push({ path: `${at}.id`, message: `Duplicate rule id ${rule.id}` });
      ruleIds.add(rule.id);
    }
    if (rule.variant != null && !keys.has(rule.variant)) {
      details.push(
        rulesPath === null
          ? { path: variantsPath, message: `Variant ${rule.variant} is served by the flag's rule ${at} (${rule.id}): change that rule in the same request` }
          : {
              path: `${at}.variant`,
              message: variants.length === 0 ? "The flag has no variants: variant must be null" : `Unknown variant ${rule.variant}; the flag's variants are ${[...keys].join(", ")}`,
            },
      );
    }
    (rule.conditions ?? []).forEach((c, i) => {
      const path = `${at}.conditions[${i}].value`;
      const allowed: readonly string[] = OPERATOR_VALUE_TYPES[c.operator];
      if (c.value === undefined) {
        if (!VALUE_OPTIONAL.has(c.operator)) details.push({ path, message: `Required for ${c.operator}` });
        return;
      }
      if (!allowed.includes(typeOf(c.value))) {
        details.push({ path, message: `${c.operator} takes ${allowed.join(" or ")}, not ${typeOf(c.value)}` });
      } else if (Array.isArray(c.value) && c.value.length > LIMITS.listValues) {
        details.push({ path, message: `At most ${LIMITS.listValues} values` });
      }
    });
  });
  return details;
}

/** Rules as stored: defaults filled, ids kept or assigned. */
function normalizeRules(rules: readonly RuleInput[]): Rule[] {
  return rules.map((r) => ({
    id: r.id ?? newId("rule"),
    name: r.name ?? "",
    conditions: (r.conditions ?? []).map((c) => (c.value === undefined ? { attribute: c.attribute, operator: c.operator } : { attribute: c.attribute, operator: c.operator, value: c.value })),
    enabled: r.enabled ?? true,
    variant: r.variant ?? null,
  }));
}

/** Variants as stored: only the fields of the contract, in a fixed order. */
function normalizeVariants(variants: readonly Variant[]): Variant[] {
  return variants.map(({ key, name, description, weight }) => ({
    key,
    ...(name !== undefined ? { name } : {}),
    ...(description !== undefined ? { description } : {}),
    ...(weight !== undefined ? { weight } : {}),
  }));
}

// ---- reads -------------------------------------------------------------------------------

const lookups = prepared((db) => ({
  flag: db
    .select({
      id: flags.id,
      key: flags.key,
      name: flags.name,
      description: flags.description,
      variants: flags.variants,
      rules: flags.rules,
      createdAt: flags.createdAt,
      updatedAt: flags.updatedAt,
    })
    .from(flags)
    .where(and(eq(flags.projectId, sql.placeholder("projectId")), eq(flags.key, sql.placeholder("key"))))
    .prepare(),
  state: db
    .select({ enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage, updatedAt: flagStates.updatedAt })
    .from(flagStates)
    .where(and(eq(flagStates.flagId, sql.placeholder("flagId")), eq(flagStates.environmentId, sql.placeholder("environmentId"))))
    .prepare(),
  states: db
    .select({ environmentId: flagStates.environmentId, enabled: flagStates.enabled })
    .from(flagStates)
    .where(eq(flagStates.flagId, sql.placeholder("flagId")))
    .prepare(),
  /** A state PUT's write: the row, created or replaced. */
  upsertState: db
    .insert(flagStates)
    .values({
      flagId: sql.placeholder("flagId"),
      environmentId: sql.placeholder("environmentId"),
      enabled: sql.placeholder("enabled"),
      rolloutPercentage: sql.placeholder("rolloutPercentage"),
      updatedAt: sql.placeholder("updatedAt"),
    })
    .onConflictDoUpdate({
      target: [flagStates.flagId, flagStates.environmentId],
      set: { enabled: sql`excluded.enabled`, rolloutPercentage: sql`excluded.rollout_percentage`, updatedAt: sql`excluded.updated_at` },
    })
    .prepare(),
}));

function findFlag(ctx: AppContext, projectId: string, key: string): Flag | undefined {
  const row = lookups(ctx).flag.get({ projectId, key });
  return row && flagOf(row);
}

/** A flag in its answer's field order, without a description when it has none (null, undefined). */
function flagOf(f: Omit<Flag, "description"> & { description?: string | null }): Flag {
  const { id, key, name, description, variants, rules, createdAt, updatedAt } = f;
  return { id, key, name, ...(description != null ? { description } : {}), variants, rules, createdAt, updatedAt };
}

function requireFlag(ctx: AppContext, project: Project, key: string): Flag {
  const flag = findFlag(ctx, project.id, key);
  if (!flag) throw notFound(`Flag ${key} in project ${project.slug}`);
  return flag;
}

export function getFlag(ctx: AppContext, slug: string, key: string): Flag {
  return requireFlag(ctx, requireProject(ctx, slug), key);
}

/** Ordered by key; `q` matches key or name, case-insensitive (Unicode-aware, so filtered here). */
export function listFlags(ctx: AppContext, slug: string, query: ListQuery) {
  const project = requireProject(ctx, slug);
  if (query.enabled !== undefined && query.environment === undefined) {
    throw validationError("Invalid request", [{ path: "query.enabled", message: "Filtering by enabled needs an environment" }]);
  }
  const page = query.page ?? 1;
  const perPage = query.perPage ?? 20;
  const conditions = [eq(flags.projectId, project.id)];
  if (query.environment !== undefined) {
    const env = requireEnvironment(project, query.environment);
    const state = [eq(flagStates.flagId, flags.id), eq(flagStates.environmentId, env.id)];
    if (query.enabled !== undefined) state.push(eq(flagStates.enabled, query.enabled));
    conditions.push(exists(ctx.db.select({ one: flagStates.flagId }).from(flagStates).where(and(...state))));
  }
  let rows = ctx.db
    .select({ id: flags.id, key: flags.key, name: flags.name, createdAt: flags.createdAt, updatedAt: flags.updatedAt })
    .from(flags)
    .where(and(...conditions))
    .orderBy(asc(flags.key))
    .all();
  if (query.q !== undefined && query.q !== "") {
    const q = foldCase(query.q);
    rows = rows.filter((f) => f.key.includes(q) || foldCase(f.name).includes(q));
  }
  return { flags: rows.slice((page - 1) * perPage, page * perPage), total: rows.length, page, perPage };
}

/**
 * Text folded for a case-insensitive comparison: each character on its own lower-cased,
 * upper-cased and lower-cased again. Unlike lower-casing the whole string, it folds the variants
 * of a letter together (ς and Σ to σ, ſ to s, µ to μ, ß and ẞ to ss) and applies no rule that
 * depends on the neighbouring letters (a word-final Σ would lower-case to ς, and a search for Σ
 * would miss it).
 */
export function foldCase(text: string): string {
  if (ASCII.test(text)) return text.toLowerCase();
  let folded = "";
  for (const ch of text) folded += ch.toLowerCase().toUpperCase().toLowerCase();
  return folded;
}

const ASCII = /^[\x00-\x7f]*$/;

// ---- writes ------------------------------------------------------------------------------

export async function createFlag(ctx: AppContext, slug: string, input: NewFlagInput): Promise<Flag> {
  const project = requireProject(ctx, slug);
  const variants = input.variants ?? [];
  const rules = input.rules ?? [];
  const details = checkDefinition(variants, rules, "body.variants", "body.rules");
  if (details.length > 0) throw validationError("Invalid flag", details);
  const now = iso(ctx.clock.now());
  const flag = flagOf({
    id: newId("flag"),
    key: input.key,
    name: input.name,
    description: input.description,
    variants: normalizeVariants(variants),
    rules: normalizeRules(rules),
    createdAt: now,
    updatedAt: now,
  });
  let queued: string[];
  try {
    queued = transaction(ctx, () => {
      ctx.db.insert(flags).values({ ...flag, projectId: project.id }).run();
      return recordEvents(ctx, project, flagLevelChanges("flag.created", project.environments, flag.key, new Map()), now);
    });
  } catch (e) {
    if (isUniqueViolation(e)) throw conflict(`Flag ${input.key} already exists in project ${slug}`);
    throw e;
  }
  ctx.snapshot.putFlag(project.id, flag);
  await ctx.deliveries.kick(queued);
  return flag;
}

export async function updateFlag(ctx: AppContext, slug: string, key: string, patch: FlagPatchInput): Promise<Flag> {
  const project = requireProject(ctx, slug);
  const current = requireFlag(ctx, project, key);
  const variants = patch.variants ?? current.variants;
  const rules = patch.rules ?? current.rules;
  // Stored rules are checked too: new variants must still cover the variants they serve.
  const details = checkDefinition(variants, rules, "body.variants", patch.rules ? "body.rules" : null);
  if (details.length > 0) throw validationError("Invalid flag", details);
  const next = flagOf({
    ...current,
    name: patch.name ?? current.name,
    description: patch.description === undefined ? current.description : patch.description,
    variants: normalizeVariants(variants),
    rules: patch.rules ? normalizeRules(patch.rules) : current.rules,
  });
  if (JSON.stringify(next) === JSON.stringify(current)) return current;
  next.updatedAt = iso(ctx.clock.now());
  const { name, updatedAt } = next;
  const queued = transaction(ctx, () => {
    ctx.db.update(flags).set({ name, description: next.description ?? null, variants: next.variants, rules: next.rules, updatedAt }).where(eq(flags.id, current.id)).run();
    return recordEvents(ctx, project, flagLevelChanges("flag.updated", project.environments, key, enabledByEnvironment(ctx, current.id)), updatedAt);
  });
  ctx.snapshot.putFlag(project.id, next);
  await ctx.deliveries.kick(queued);
  return next;
}

export async function deleteFlag(ctx: AppContext, slug: string, key: string): Promise<void> {
  const project = requireProject(ctx, slug);
  const flag = requireFlag(ctx, project, key);
  const queued = transaction(ctx, () => {
    const before = enabledByEnvironment(ctx, flag.id);
    // States go with it (foreign key cascade).
    ctx.db.delete(flags).where(eq(flags.id, flag.id)).run();
    return recordEvents(ctx, project, flagLevelChanges("flag.deleted", project.environments, key, before), iso(ctx.clock.now()));
  });
  ctx.snapshot.removeFlag(project.id, key);
  await ctx.deliveries.kick(queued);
}

// ---- states ------------------------------------------------------------------------------

function stateRow(ctx: AppContext, flagId: string, environmentId: string) {
  return lookups(ctx).state.get({ flagId, environmentId });
}

/** Environment id -> enabled, for the environments where the flag has a state row. */
function enabledByEnvironment(ctx: AppContext, flagId: string): Map<string, boolean> {
  return new Map(lookups(ctx).states.all({ flagId }).map((r) => [r.environmentId, r.enabled]));
}

/** The flag's state in one environment: its row, or (no row) disabled there since the flag was created. */
function stateIn(ctx: AppContext, flag: Flag, env: Environment): FlagState {
  const row = stateRow(ctx, flag.id, env.id);
  return { flagKey: flag.key, environment: env.slug, ...(row ?? { enabled: false, rolloutPercentage: null, updatedAt: flag.createdAt }) };
}

export function getState(ctx: AppContext, slug: string, key: string, environment: string): FlagState {
  const project = requireProject(ctx, slug);
  return stateIn(ctx, requireFlag(ctx, project, key), requireEnvironment(project, environment));
}

/**
 * GET .../flags/{key}/states: the state in every environment of the project, each exactly as
 * `getState` answers it, in the environments' order (the order they were added).
 */
export function getStates(ctx: AppContext, slug: string, key: string): { flagKey: string; states: FlagState[] } {
  const project = requireProject(ctx, slug);
  const flag = requireFlag(ctx, project, key);
  return { flagKey: flag.key, states: project.environments.map((env) => stateIn(ctx, flag, env)) };
}

/**
 * `rolloutPercentage` omitted keeps the current value; `null` clears it. The first PUT in an
 * environment creates the state row (the flag then counts as set there for the list filter);
 * a later PUT that changes nothing writes nothing.
 */
export async function putState(ctx: AppContext, slug: string, key: string, environment: string, input: { enabled: boolean; rolloutPercentage?: number | null }): Promise<FlagState> {
  if (input.rolloutPercentage != null && !hasAtMost3Decimals(input.rolloutPercentage)) {
    throw validationError("Invalid request", [{ path: "body.rolloutPercentage", message: "At most 3 decimal places" }]);
  }
  const project = requireProject(ctx, slug);
  const flag = requireFlag(ctx, project, key);
  const env = requireEnvironment(project, environment);
  const current = stateRow(ctx, flag.id, env.id);
  const next = {
    enabled: input.enabled,
    rolloutPercentage: input.rolloutPercentage === undefined ? (current?.rolloutPercentage ?? null) : input.rolloutPercentage,
  };
  if (current && next.enabled === current.enabled && next.rolloutPercentage === current.rolloutPercentage) {
    return { flagKey: flag.key, environment, ...current };
  }
  const updatedAt = iso(ctx.clock.now());
  const before = current ?? { enabled: false, rolloutPercentage: null };
  const change = stateChange(environment, flag.key, before, next);
  const queued = transaction(ctx, () => {
    lookups(ctx).upsertState.run({ flagId: flag.id, environmentId: env.id, ...next, updatedAt });
    return recordEvents(ctx, project, change ? [change] : [], updatedAt);
  });
  ctx.snapshot.setState(project.id, flag.key, env.id, next);
  await ctx.deliveries.kick(queued);
  return { flagKey: flag.key, environment, ...next, updatedAt };
}
