/**
 * Flags and their states (decisions §6). Every write is checked in full before anything is
 * stored (a refused write changes nothing), then committed by the store with its change-log
 * entry; the entry's subscribers (the evaluation snapshot, the webhook outbox) run before the
 * response goes out (read-your-writes).
 */
import { diff, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { operandProblem } from "../../evaluation/engine";
import { OPERATOR_VALUE_TYPES, PREREQUISITE_MAX_DEPTH, SEGMENT_OPERATORS, VALUE_OPTIONAL, type Condition, type Prerequisite, type Rule, type Variant } from "../../evaluation/types";
import { conflict, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { strongEtag, type IfMatch } from "../../http/etag";
import { iso, type Clock } from "../../lib/clock";
import { pageRequest } from "../../db/paging";
import { newId } from "../../lib/ids";
import { requireEnvironment, requireProject } from "../projects/service";
import type { Environment, Project, ProjectReader } from "../projects/store";
import type { FlagInsights, Stale } from "../insights/service";
import { checkedWrite, requireVersion, type ResourceHistory } from "../audit/precondition";
import { LIMITS } from "./model";
import { flagOf, type Flag, type FlagLink, type FlagStore, type FlagSummary, type FlagWriteReads } from "./store";

export type { Flag } from "./store";

/** A flag as the API answers it: with its staleness (docs/insights.md, Stale flags). */
export type FlagView = Flag & { stale: Stale | null };

export interface FlagState {
  flagKey: string;
  environment: string;
  enabled: boolean;
  rolloutPercentage: number | null;
  updatedAt: string;
  /** The last production evaluation there (docs/insights.md); null: never. */
  lastEvaluatedAt: string | null;
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
  bucketBy?: string;
  prerequisites?: Prerequisite[];
}

export interface FlagPatchInput {
  name?: string;
  description?: string | null;
  variants?: Variant[];
  rules?: RuleInput[];
  /** null (or `userId`): back to the default. */
  bucketBy?: string | null;
  /** Replaces them; null or empty: none. */
  prerequisites?: Prerequisite[] | null;
}

export interface ListQuery {
  environment?: string;
  enabled?: boolean;
  q?: string;
  /** Keep stale flags (true) or the others (false). */
  stale?: boolean;
  page?: number;
  perPage?: number;
  /** `states`: each listed flag with its state in every environment. */
  include?: "states";
}

// ---- versions (ETag, If-Match: docs/decisions.md, "Live audit log and edit conflicts") ---------------------

/** A flag's ETag: a hash of its definition as answered (its staleness aside: not an edit). */
export const flagEtag = (flag: Flag | FlagView): string => {
  const { stale: _, ...definition } = flag as FlagView;
  return strongEtag(definition);
};

/** A state's ETag: a hash of the state as answered (its last evaluation aside: not an edit). */
export const stateEtag = (s: Omit<FlagState, "lastEvaluatedAt">): string => strongEtag([s.flagKey, s.environment, s.enabled, s.rolloutPercentage, s.updatedAt]);

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
function checkDefinition(
  variants: readonly Variant[],
  rules: readonly RuleInput[],
  variantsPath: string,
  rulesPath: string | null,
  segmentKeys: ReadonlySet<string>,
): ErrorDetail[] {
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
    details.push(...checkConditions(rule.conditions ?? [], `${at}.conditions`, segmentKeys));
  });
  return details;
}

/**
 * Each condition's value against its operator (type, list length, compiled operand), at
 * `path[i].value`: a flag rule's conditions, and a segment's (src/modules/segments/). In a flag
 * rule, `segmentKeys` holds the project's segment keys: in_segment/not_in_segment must name one
 * and read `userId`; null (a segment's conditions) refuses them: a segment names no segment.
 */
export function checkConditions(conditions: readonly Condition[], path: string, segmentKeys: ReadonlySet<string> | null): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  conditions.forEach((c, i) => {
    const at = `${path}[${i}]`;
    if (SEGMENT_OPERATORS.has(c.operator)) {
      if (segmentKeys === null) {
        details.push({ path: `${at}.operator`, message: `${c.operator} is not allowed in a segment's conditions: a segment cannot name another segment` });
        return;
      }
      if (c.attribute !== "userId") details.push({ path: `${at}.attribute`, message: `${c.operator} reads the user id: attribute must be userId` });
    }
    const valuePath = `${at}.value`;
    const allowed: readonly string[] = OPERATOR_VALUE_TYPES[c.operator];
    if (c.value === undefined) {
      if (!VALUE_OPTIONAL.has(c.operator)) details.push({ path: valuePath, message: `Required for ${c.operator}` });
      return;
    }
    if (!allowed.includes(typeOf(c.value))) {
      details.push({ path: valuePath, message: `${c.operator} takes ${allowed.join(" or ")}, not ${typeOf(c.value)}` });
    } else if (Array.isArray(c.value) && c.value.length > LIMITS.listValues) {
      details.push({ path: valuePath, message: `At most ${LIMITS.listValues} values` });
    } else if (SEGMENT_OPERATORS.has(c.operator)) {
      if (!segmentKeys!.has(c.value as string)) details.push({ path: valuePath, message: `Unknown segment ${JSON.stringify(c.value)} in this project` });
    } else {
      const problem = operandProblem(c.operator, c.value);
      if (problem !== null) details.push({ path: valuePath, message: problem });
    }
  });
  return details;
}

/**
 * Checks a flag's prerequisites against the project's flags (`links`, as stored, this flag's own
 * entry included when it exists): each names another flag of the project, and a variant that
 * flag has, at most once; the graph with these prerequisites has no cycle (the message names
 * it: `a -> b -> a`), and no chain through this flag is longer than PREREQUISITE_MAX_DEPTH.
 */
export function checkPrerequisites(key: string, prerequisites: readonly Prerequisite[], links: readonly FlagLink[]): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const byKey = new Map(links.map((l) => [l.key, l]));
  const seen = new Set<string>();
  prerequisites.forEach((p, i) => {
    const at = `body.prerequisites[${i}]`;
    if (seen.has(p.flagKey)) details.push({ path: `${at}.flagKey`, message: `Duplicate prerequisite ${p.flagKey}` });
    seen.add(p.flagKey);
    if (p.flagKey === key) return details.push({ path: `${at}.flagKey`, message: `A flag cannot be its own prerequisite: ${key} -> ${key}` });
    const target = byKey.get(p.flagKey);
    if (target === undefined) return details.push({ path: `${at}.flagKey`, message: `Unknown flag ${p.flagKey}` });
    if (p.variant !== undefined && !target.variants.includes(p.variant)) {
      details.push({
        path: `${at}.variant`,
        message:
          target.variants.length === 0
            ? `Flag ${p.flagKey} has no variants: omit variant`
            : `Flag ${p.flagKey} has no variant ${p.variant}; its variants are ${target.variants.join(", ")}`,
      });
    }
  });
  if (details.length > 0) return details;
  // The graph as it would be: this flag's edges replaced.
  const edges = (k: string): readonly string[] => (k === key ? prerequisites : (byKey.get(k)?.prerequisites ?? [])).map((p) => p.flagKey);
  const cycle = cycleFrom(key, edges);
  if (cycle !== null) return [{ path: "body.prerequisites", message: `Prerequisites would form a cycle: ${cycle.join(" -> ")}` }];
  // Acyclic: the longest chain through this flag is the longest one leading to it, then the longest from it.
  const down = longestFrom(key, edges);
  const dependantsOf = new Map<string, string[]>();
  for (const l of links) {
    if (l.key === key) continue;
    for (const p of l.prerequisites) dependantsOf.set(p.flagKey, [...(dependantsOf.get(p.flagKey) ?? []), l.key]);
  }
  const up = longestFrom(key, (k) => dependantsOf.get(k) ?? []).reverse();
  const chain = [...up, ...down.slice(1)];
  if (chain.length - 1 > PREREQUISITE_MAX_DEPTH) {
    return [{ path: "body.prerequisites", message: `Prerequisite chains are at most ${PREREQUISITE_MAX_DEPTH} deep; this one would be ${chain.length - 1}: ${chain.join(" -> ")}` }];
  }
  return [];
}

/** A path from `start` back to it (`[start, ..., start]`), or null: the graph reached from `start` has no cycle through it. */
function cycleFrom(start: string, edges: (key: string) => readonly string[]): string[] | null {
  const done = new Set<string>();
  const path: string[] = [start];
  const walk = (k: string): boolean => {
    for (const next of edges(k)) {
      if (next === start) return path.push(next), true;
      if (done.has(next) || path.includes(next)) continue;
      path.push(next);
      if (walk(next)) return true;
      path.pop();
      done.add(next);
    }
    return false;
  };
  return walk(start) ? path : null;
}

/** The longest path from `start` (start included) along `edges`, in an acyclic graph. */
function longestFrom(start: string, edges: (key: string) => readonly string[]): string[] {
  const memo = new Map<string, string[]>();
  const walk = (k: string, depth: number): string[] => {
    const known = memo.get(k);
    if (known) return known;
    let best: string[] = [];
    // The stored graph is acyclic and bounded; the depth guard only keeps bad data from recursing forever.
    if (depth <= PREREQUISITE_MAX_DEPTH * 2) {
      for (const next of edges(k)) {
        const path = walk(next, depth + 1);
        if (path.length > best.length) best = path;
      }
    }
    const path = [k, ...best];
    memo.set(k, path);
    return path;
  };
  return walk(start, 0);
}

/** Variants a PATCH removes that other flags require of this one: each at `body.variants`. */
function requiredVariants(key: string, variants: readonly Variant[], links: readonly FlagLink[]): ErrorDetail[] {
  const keys = new Set(variants.map((v) => v.key));
  const details: ErrorDetail[] = [];
  for (const l of links) {
    for (const p of l.prerequisites) {
      if (p.flagKey === key && p.variant !== undefined && !keys.has(p.variant)) {
        details.push({ path: "body.variants", message: `Variant ${p.variant} is required by flag ${l.key}'s prerequisites: change that flag first` });
      }
    }
  }
  return details;
}

/** Prerequisites as stored: only the fields of the contract, in a fixed order. */
function normalizePrerequisites(prerequisites: readonly Prerequisite[]): Prerequisite[] {
  return prerequisites.map(({ flagKey, variant }) => (variant === undefined ? { flagKey } : { flagKey, variant }));
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



const NO_KEYS: ReadonlySet<string> = new Set();
/** Stands for the stored rules' segments: every key passes. */
const ALL_KEYS: ReadonlySet<string> = { has: () => true } as unknown as ReadonlySet<string>;

const UNSET = { enabled: false, rolloutPercentage: null };

/** A change-log entry of a flag (`environment`: of its state there). */
function flagChange(project: Project, flag: { id: string; key: string }, action: ChangeDraft["action"], changes: ChangeDraft["changes"], environment: string | null = null): ChangeDraft {
  return { project: { id: project.id, slug: project.slug }, environment, resource: { type: environment === null ? "flag" : "flag_state", id: flag.id, key: flag.key }, action, changes };
}

export interface FlagServiceDeps {
  flags: FlagStore;
  projects: ProjectReader;
  clock: Clock;
  /** Each state's last evaluation and each flag's staleness (src/modules/insights/). */
  insights: FlagInsights;
  /** The change log read back: who changed a flag or a state when `If-Match` no longer matches. */
  history: ResourceHistory;
}

export type FlagService = ReturnType<typeof flagService>;

export function flagService({ flags, projects, clock, insights, history }: FlagServiceDeps) {
  /**
   * The project's segment keys, read in the write's transaction, when the rules name segments
   * (else none is read): a segment deleted meanwhile is refused here, as its delete refuses a used one.
   */
  const keysFor = (reads: FlagWriteReads, rules: readonly RuleInput[] | undefined): ReadonlySet<string> =>
    rules?.some((r) => r.conditions?.some((c) => SEGMENT_OPERATORS.has(c.operator))) ? reads.segmentKeys() : NO_KEYS;
  const flagIn = (project: Project, key: string, flag: Flag | undefined): Flag => {
    if (!flag) throw notFound(`Flag ${key} in project ${project.slug}`);
    return flag;
  };
  const requireFlag = async (project: Project, key: string) => flagIn(project, key, await flags.find(project.id, key));

  /** The flag's state in one environment: its row, or (no row) disabled there since the flag was created. */
  const stateIn = async (flag: Flag, env: Environment, evaluated: ReadonlyMap<string, string>): Promise<FlagState> => {
    const row = await flags.state(flag.id, env.id);
    return { flagKey: flag.key, environment: env.slug, ...(row ?? { ...UNSET, updatedAt: flag.createdAt }), lastEvaluatedAt: evaluated.get(env.id) ?? null };
  };
  const evaluatedIn = (flag: { id: string; key: string }, envs: readonly Environment[]) => insights.lastEvaluated(flag.id, flag.key, envs.map((e) => e.id));
  /** A list page's flags with their states, as `getStates` answers them: two queries for the page (states, last evaluations), whatever its size. */
  const withStates = async <F extends FlagSummary>(project: Project, page: F[]): Promise<(F & { states: (FlagState & { etag: string })[] })[]> => {
    const ids = page.map((f) => f.id);
    const [rows, evaluated] = await Promise.all([flags.statesOf(ids), insights.lastEvaluatedOf(page, project.environments.map((e) => e.id))]);
    const stored = new Map(rows.map(({ flagId, environmentId, ...row }) => [`${flagId} ${environmentId}`, row]));
    return page.map((f) => ({
      ...f,
      states: project.environments.map((env) => {
        const state = { flagKey: f.key, environment: env.slug, ...(stored.get(`${f.id} ${env.id}`) ?? { ...UNSET, updatedAt: f.createdAt }), lastEvaluatedAt: evaluated.get(f.id)?.get(env.id) ?? null };
        // Its ETag too: what a PUT of it sends as If-Match (a list has no header per state).
        return { ...state, etag: stateEtag(state) };
      }),
    }));
  };
  const viewOf = async (flag: Flag): Promise<FlagView> => ({ ...flag, stale: await insights.staleOf(flag.id) });

  return {
    async getFlag(slug: string, key: string): Promise<FlagView> {
      const project = await requireProject(projects, slug);
      return viewOf(await requireFlag(project, key));
    },

    /** Ordered by key; `q` matches key or name, case-insensitive (Unicode-aware, so filtered here). */
    async listFlags(slug: string, query: ListQuery) {
      const project = await requireProject(projects, slug);
      if (query.enabled !== undefined && query.environment === undefined) {
        throw validationError("Invalid request", [{ path: "query.enabled", message: "Filtering by enabled needs an environment" }]);
      }
      const page = query.page ?? 1;
      const perPage = query.perPage ?? 20;
      const environmentId = query.environment === undefined ? undefined : requireEnvironment(project, query.environment).id;
      const { rows, total } = await flags.list(project.id, { environmentId, enabled: query.enabled, stale: query.stale, q: query.q }, pageRequest(page, perPage));
      return { flags: query.include === "states" ? await withStates(project, rows) : rows, total, page, perPage };
    },

    async createFlag(author: Author, slug: string, input: NewFlagInput): Promise<FlagView> {
      const project = await requireProject(projects, slug);
      const variants = input.variants ?? [];
      const rules = input.rules ?? [];
      const now = iso(clock.now());
      const flag = flagOf({
        id: newId("flag"),
        key: input.key,
        name: input.name,
        description: input.description,
        variants: normalizeVariants(variants),
        rules: normalizeRules(rules),
        bucketBy: input.bucketBy,
        prerequisites: input.prerequisites === undefined ? undefined : normalizePrerequisites(input.prerequisites),
        createdAt: now,
        updatedAt: now,
      });
      // Checked in full before anything is stored, in the write's transaction: against the
      // project's flags (prerequisites) and segment keys (in_segment) as they are there.
      const created = await flags.create(author, project.id, flag, flagChange(project, flag, "created", whole({ ...flag }, "created")), (reads) => {
        const details = checkDefinition(variants, rules, "body.variants", "body.rules", keysFor(reads, rules));
        if (details.length === 0 && flag.prerequisites !== undefined) details.push(...checkPrerequisites(flag.key, flag.prerequisites, reads.links()));
        if (details.length > 0) throw validationError("Invalid flag", details);
      });
      if (!created) throw conflict(`Flag ${input.key} already exists in project ${slug}`);
      return { ...flag, stale: null };
    },

    /** `ifMatch`: the flag's ETag the client loaded (null: none sent), checked in the write's transaction (412 when stale). */
    async updateFlag(author: Author, slug: string, key: string, patch: FlagPatchInput, ifMatch: IfMatch | null = null): Promise<FlagView> {
      const project = await requireProject(projects, slug);
      const updated = await checkedWrite(history, () => flags.update(author, project.id, key, (found, reads) => {
        const current = flagIn(project, key, found);
        requireVersion(ifMatch, flagEtag(current), `Flag ${key}`, { type: "flag", id: current.id, key });
        const variants = patch.variants ?? current.variants;
        const rules = patch.rules ?? current.rules;
        const prerequisites = patch.prerequisites === undefined ? current.prerequisites : patch.prerequisites === null ? undefined : normalizePrerequisites(patch.prerequisites);
        // Stored rules are checked too: new variants must still cover the variants they serve.
        // Stored rules name segments that exist (a used segment cannot be deleted): only new rules are checked for them.
        const details = checkDefinition(variants, rules, "body.variants", patch.rules ? "body.rules" : null, patch.rules ? keysFor(reads, patch.rules) : ALL_KEYS);
        // The project's flags are read only when prerequisites or variants change.
        if (details.length === 0 && (patch.prerequisites != null || patch.variants !== undefined)) {
          const all = reads.links();
          if (patch.variants !== undefined) details.push(...requiredVariants(key, variants, all));
          if (patch.prerequisites != null) details.push(...checkPrerequisites(key, prerequisites ?? [], all));
        }
        if (details.length > 0) throw validationError("Invalid flag", details);
        const next = flagOf({
          ...current,
          name: patch.name ?? current.name,
          description: patch.description === undefined ? current.description : patch.description,
          variants: normalizeVariants(variants),
          rules: patch.rules ? normalizeRules(patch.rules) : current.rules,
          bucketBy: patch.bucketBy === undefined ? current.bucketBy : patch.bucketBy,
          prerequisites,
        });
        const changes = diff({ ...current }, { ...next });
        if (Object.keys(changes).length === 0) return { result: current, changes: [] };
        next.updatedAt = iso(clock.now());
        return { result: next, changes: [flagChange(project, next, "updated", changes)] };
      }));
      return viewOf(updated);
    },

    async deleteFlag(author: Author, slug: string, key: string): Promise<void> {
      const project = await requireProject(projects, slug);
      await flags.remove(author, project.id, key, (found, states, dependants) => {
        const flag = flagIn(project, key, found);
        if (dependants.length > 0) {
          throw conflict(
            `Flag ${key} is a prerequisite of ${dependants.join(", ")}: remove it from their prerequisites first`,
            dependants.map((d) => ({ path: `flags.${d}.prerequisites`, message: `Flag ${d} has ${key} as a prerequisite` })),
          );
        }
        // Its states go with it: the entry holds them, by environment.
        return flagChange(project, flag, "deleted", whole({ ...flag, states }, "deleted"));
      });
    },

    async getState(slug: string, key: string, environment: string): Promise<FlagState> {
      const project = await requireProject(projects, slug);
      const env = requireEnvironment(project, environment);
      const flag = await requireFlag(project, key);
      return stateIn(flag, env, await evaluatedIn(flag, [env]));
    },

    /**
     * GET .../flags/{key}/states: the state in every environment of the project, each exactly as
     * `getState` answers it, in the environments' order (the order they were added).
     */
    async getStates(slug: string, key: string): Promise<{ flagKey: string; states: FlagState[] }> {
      const project = await requireProject(projects, slug);
      const flag = await requireFlag(project, key);
      const evaluated = await evaluatedIn(flag, project.environments);
      return { flagKey: flag.key, states: await Promise.all(project.environments.map((env) => stateIn(flag, env, evaluated))) };
    },

    /**
     * `rolloutPercentage` omitted keeps the current value; `null` clears it. The first PUT in an
     * environment creates the state row (the flag then counts as set there for the list filter,
     * and its entry shows `before: null`); a later PUT that changes nothing writes nothing.
     * The entry's action: `enabled` or `disabled` when that changed (a state never set is
     * disabled), else `updated`. `enabled` omitted (a scheduled change that sets only the
     * rollout; the route requires it) keeps the current value.
     */
    async putState(
      author: Author,
      slug: string,
      key: string,
      environment: string,
      input: { enabled?: boolean; rolloutPercentage?: number | null },
      ifMatch: IfMatch | null = null,
    ): Promise<FlagState> {
      if (input.rolloutPercentage != null && !hasAtMost3Decimals(input.rolloutPercentage)) {
        throw validationError("Invalid request", [{ path: "body.rolloutPercentage", message: "At most 3 decimal places" }]);
      }
      const project = await requireProject(projects, slug);
      const env = requireEnvironment(project, environment);
      let flagId = "";
      const row = await checkedWrite(history, () => flags.putState(author, project.id, key, env.id, (found, current) => {
        const flag = flagIn(project, key, found);
        flagId = flag.id;
        const stored = { flagKey: key, environment, ...(current ?? { ...UNSET, updatedAt: flag.createdAt }) };
        requireVersion(ifMatch, stateEtag(stored), `Flag ${key}'s state in ${environment}`, { type: "flag_state", id: flag.id, key }, environment);
        const next = {
          enabled: input.enabled ?? (current ?? UNSET).enabled,
          rolloutPercentage: input.rolloutPercentage === undefined ? (current?.rolloutPercentage ?? null) : input.rolloutPercentage,
        };
        if (current && next.enabled === current.enabled && next.rolloutPercentage === current.rolloutPercentage) return { result: current, changes: [] };
        const changes = current ? diff({ enabled: current.enabled, rolloutPercentage: current.rolloutPercentage }, next) : whole(next, "created");
        const action = next.enabled !== (current ?? UNSET).enabled ? (next.enabled ? "enabled" : "disabled") : "updated";
        return { result: { ...next, updatedAt: iso(clock.now()) }, changes: [flagChange(project, flag, action, changes, environment)] };
      }));
      const evaluated = await evaluatedIn({ id: flagId, key }, [env]);
      return { flagKey: key, environment, ...row, lastEvaluatedAt: evaluated.get(env.id) ?? null };
    },
  };
}
