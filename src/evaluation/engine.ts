/**
 * The evaluation engine: every rule of evaluation in one pure file (api-spec: Evaluation;
 * decisions §6, §7). Operator semantics, the compile step, bucketing, the variant pick and the
 * resolution order. No I/O and no clock: the caller passes `evaluatedAt`.
 *
 * A flag is compiled once per write (`compileFlag`, `compileState`) so that `evaluate`, which
 * runs per request and per flag, allocates nothing but its result: conditions are plain data
 * switched on, list operators use Sets, weights are integer thousandths, hash prefixes are
 * prebuilt, equal states are one shared object. Operands that need parsing are parsed here once:
 * a semantic version (a SemVer), a pattern (an RE2 program), a time (epoch ms). The one
 * allocation on evaluation besides the result: `semver_*` parse the attribute (docs/targeting.md).
 */
import { RE2JS } from "re2js";
import type { SemVer } from "semver";
import compareSemver from "semver/functions/compare";
import parseSemver from "semver/functions/parse";
import { murmur3 } from "./murmur3";
import {
  DEFAULT_BUCKET_BY,
  type Condition,
  type ContextValue,
  type EvalContext,
  type EvaluationResult,
  type FlagDefinition,
  type FlagState,
  type Override,
  PREREQUISITE_MAX_DEPTH,
  type Reason,
  type SegmentDefinition,
} from "./types";

/** Buckets per hash: percentages and weights have at most 3 decimals, so thousandths of a percent. */
const BUCKETS = 100_000;

/** Operators as small integers: `matches` switches on them. */
const enum Op {
  Equals,
  NotEquals,
  In,
  NotIn,
  Contains,
  StartsWith,
  GreaterThan,
  LessThan,
  IsTrue,
  IsFalse,
  GreaterThanOrEqual,
  LessThanOrEqual,
  SemverEquals,
  SemverGreaterThan,
  SemverLessThan,
  Matches,
  Before,
  After,
  InSegment,
  NotInSegment,
  Never,
}

const OPS: Record<Condition["operator"], Op> = {
  equals: Op.Equals,
  not_equals: Op.NotEquals,
  in: Op.In,
  not_in: Op.NotIn,
  contains: Op.Contains,
  starts_with: Op.StartsWith,
  greater_than: Op.GreaterThan,
  less_than: Op.LessThan,
  is_true: Op.IsTrue,
  is_false: Op.IsFalse,
  greater_than_or_equal: Op.GreaterThanOrEqual,
  less_than_or_equal: Op.LessThanOrEqual,
  semver_equals: Op.SemverEquals,
  semver_greater_than: Op.SemverGreaterThan,
  semver_less_than: Op.SemverLessThan,
  matches: Op.Matches,
  before: Op.Before,
  after: Op.After,
  in_segment: Op.InSegment,
  not_in_segment: Op.NotInSegment,
};

/**
 * The longest attribute `matches` reads: a longer string never matches. RE2 is linear in the
 * input, so this bounds the time of one condition whatever the pattern (docs/targeting.md).
 */
export const MATCHES_MAX_INPUT = 1024;

/** An ISO 8601 date-time with a zone: `Z` or `±hh:mm` (RFC 3339's profile; seconds and fraction optional). */
const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,9})?)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

/** The epoch milliseconds of a `before`/`after` operand, or null when it is not an ISO 8601 time with a zone. */
export function parseInstant(text: string): number | null {
  const m = INSTANT.exec(text);
  if (m === null) return null;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // Date.parse rolls February 30 over into March: refuse a day the month does not have.
  if (month < 1 || month > 12 || day < 1 || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

/**
 * Why an operand its operator cannot use (already of the type OPERATOR_VALUE_TYPES names), or
 * null: the write-time check of the operators whose operand is compiled (a semantic version, a
 * pattern, a time). The flags service reports it at the condition's `value`.
 */
export function operandProblem(operator: Condition["operator"], value: unknown): string | null {
  if (typeof value !== "string") return null;
  switch (operator) {
    case "semver_equals":
    case "semver_greater_than":
    case "semver_less_than":
      return parseSemver(value) === null ? `${operator} takes a semantic version such as 1.2.3 or 2.0.0-rc.1, not ${JSON.stringify(value)}` : null;
    case "matches":
      try {
        RE2JS.compile(value);
        return null;
      } catch (e) {
        return `Not a regular expression in RE2 syntax: ${e instanceof Error ? e.message : String(e)}`;
      }
    case "before":
    case "after":
      return parseInstant(value) === null ? `${operator} takes an ISO 8601 date-time with a zone, such as 2026-01-01T00:00:00Z, not ${JSON.stringify(value)}` : null;
    default:
      return null;
  }
}

/**
 * One condition, compiled: plain data of one shape (no closure per condition, which would cost
 * a function and a scope object each: at 10,000 flags that is most of the snapshot's memory).
 * `value` is the operand as `matches` needs it: a Set for in/not_in.
 */
export interface CompiledCondition {
  readonly op: Op;
  readonly attribute: string;
  /** The attribute is `userId`: an evaluation given its user apart (`evaluate`'s `userId`) reads that. */
  readonly userId: boolean;
  /** semver_*: the operand parsed; matches: the compiled pattern; before/after: epoch ms; in/not_in_segment: the segment. */
  readonly value: string | number | boolean | ReadonlySet<unknown> | SemVer | RE2JS | CompiledSegment | null;
}

/**
 * A segment, compiled once per write of it (docs/targeting.md, Segments): membership is two Set
 * lookups and its conditions, never a scan of the lists.
 */
export interface CompiledSegment {
  readonly key: string;
  readonly included: ReadonlySet<string>;
  readonly excluded: ReadonlySet<string>;
  /** AND-ed; empty: only included users are members. */
  readonly conditions: readonly CompiledCondition[];
}

/** Compiled segments of a project by key: what `compileFlag` resolves in_segment/not_in_segment against. */
export type SegmentTable = ReadonlyMap<string, CompiledSegment>;

const NO_SEGMENTS: SegmentTable = new Map();

/** A segment's conditions may not name segments (no cycles): such a condition never matches. */
export function compileSegment(def: SegmentDefinition): CompiledSegment {
  return {
    key: def.key,
    included: new Set(def.included),
    excluded: new Set(def.excluded),
    conditions: def.conditions.length === 0 ? NONE : def.conditions.map((c) => compileCondition(c, NO_SEGMENTS)),
  };
}

/**
 * Whether the evaluated user is a member: in `included`; otherwise not in `excluded`, and the
 * segment has conditions and all match. The user id is read as bucketing reads `userId` (a
 * non-empty string, or a number in decimal form); `userId`: the user given apart.
 */
export function isMember(segment: CompiledSegment, context: EvalContext, userId?: string): boolean {
  const id = userId ?? usable(context.userId);
  if (id !== null) {
    if (segment.included.has(id)) return true;
    if (segment.excluded.has(id)) return false;
  }
  const conditions = segment.conditions;
  if (conditions.length === 0) return false;
  for (let i = 0; i < conditions.length; i++) if (!matches(conditions[i]!, context, userId)) return false;
  return true;
}

export interface CompiledRule {
  readonly id: string;
  /** Conditions AND-ed; empty: matches everyone. */
  readonly conditions: readonly CompiledCondition[];
  /** The variant the rule serves; null on boolean flags, or when the rule names none. */
  readonly variant: string | null;
}

/** A prerequisite, compiled: the key of the flag and the variant it must serve (null: any, enabled). */
export interface CompiledPrerequisite {
  readonly flagKey: string;
  readonly variant: string | null;
}

/**
 * Where prerequisites are looked up: the flags of the environment being evaluated, by key (the
 * snapshot's `environment(id)` map on the server, the local provider's definitions). Lookups
 * happen only for flags that have prerequisites, one per prerequisite: evaluation cost grows
 * with the depth of the chain, not with the number of flags.
 */
export interface PrerequisiteLookup {
  get(flagKey: string): { readonly flag: CompiledFlag; readonly state: CompiledState } | undefined;
}

export interface CompiledFlag {
  readonly key: string;
  /** The prerequisites, in order; the shared empty array when none (the hot path tests its length). */
  readonly prerequisites: readonly CompiledPrerequisite[];
  /** The enabled rules, in order. */
  readonly rules: readonly CompiledRule[];
  /** Variant keys in order; empty for a boolean flag. */
  readonly variants: readonly string[];
  /** Running sums of the weights in thousandths (the last is 100000); null when unweighted. */
  readonly cumulativeWeights: readonly number[] | null;
  /** `key + ":"`: the rollout hash input is this plus the userId. */
  readonly rolloutPrefix: string;
  /** `key + ":variant:"`: the variant hash input is this plus the userId ("" when unweighted: unused). */
  readonly variantPrefix: string;
  /** The context attribute rollouts and weights hash on (`bucketBy`; default `userId`). */
  readonly bucketBy: string;
  /** `bucketBy` is `userId`: an evaluation given its user apart (`evaluate`'s `userId`) buckets by that. */
  readonly byUserId: boolean;
}

export interface CompiledState {
  readonly enabled: boolean;
  /** round(rolloutPercentage * 1000), compared with the bucket; null: no rollout. */
  readonly threshold: number | null;
}

/** A flag with no state row in the environment (decisions §6). */
export const DISABLED_STATE: CompiledState = Object.freeze({ enabled: false, threshold: null });

/** States are immutable and few distinct ones exist: one shared object per value. */
const states = new Map<string, CompiledState>([["false:null", DISABLED_STATE]]);

export function compileState(state: FlagState | null): CompiledState {
  if (state === null) return DISABLED_STATE;
  const threshold = state.rolloutPercentage === null ? null : Math.round(state.rolloutPercentage * 1000);
  const id = `${state.enabled}:${threshold}`;
  let compiled = states.get(id);
  if (compiled === undefined) states.set(id, (compiled = Object.freeze({ enabled: state.enabled, threshold })));
  return compiled;
}

const NONE: readonly never[] = Object.freeze([]);

/**
 * `segments`: the project's compiled segments; a rule's in_segment/not_in_segment holds the one
 * it names (a flag is compiled again when a segment it uses changes: evaluation/snapshot.ts).
 */
export function compileFlag(def: FlagDefinition, segments: SegmentTable = NO_SEGMENTS): CompiledFlag {
  const variants = def.variants.length === 0 ? NONE : def.variants.map((v) => v.key);
  const multiVariant = variants.length > 0;
  let cumulativeWeights: number[] | null = null;
  if (multiVariant && def.variants.every((v) => v.weight !== undefined)) {
    let sum = 0;
    cumulativeWeights = def.variants.map((v) => (sum += Math.round(v.weight! * 1000)));
  }
  const rules: CompiledRule[] = [];
  for (const rule of def.rules) {
    if (!rule.enabled) continue;
    rules.push({
      id: rule.id,
      conditions: rule.conditions.length === 0 ? NONE : rule.conditions.map((c) => compileCondition(c, segments)),
      variant: multiVariant ? rule.variant : null,
    });
  }
  const prerequisites = def.prerequisites;
  return {
    key: def.key,
    prerequisites:
      prerequisites == null || prerequisites.length === 0 ? NONE : prerequisites.map((p) => ({ flagKey: p.flagKey, variant: p.variant ?? null })),
    rules: rules.length === 0 ? NONE : rules,
    variants,
    cumulativeWeights,
    rolloutPrefix: `${def.key}:`,
    variantPrefix: cumulativeWeights === null ? "" : `${def.key}:variant:`,
    bucketBy: def.bucketBy ?? DEFAULT_BUCKET_BY,
    byUserId: (def.bucketBy ?? DEFAULT_BUCKET_BY) === DEFAULT_BUCKET_BY,
  };
}

type ListValue = string | number | boolean;

const isScalar = (v: ContextValue | undefined): v is ListValue =>
  typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/**
 * Values were type-checked at write time; one of the wrong type for its operator compiles to a
 * condition that never matches rather than a throw (as does an operator stored by a newer version).
 */
function compileCondition(condition: Condition, segments: SegmentTable): CompiledCondition {
  const { attribute, value } = condition;
  const op = OPS[condition.operator] ?? Op.Never;
  const userId = attribute === "userId";
  const never: CompiledCondition = { op: Op.Never, attribute, userId, value: null };
  switch (op) {
    case Op.Equals:
    case Op.NotEquals:
      return isScalar(value) ? { op, attribute, userId, value } : never;
    case Op.In:
    case Op.NotIn:
      return Array.isArray(value) ? { op, attribute, userId, value: new Set<unknown>(value) } : never;
    case Op.Contains:
    case Op.StartsWith:
      return typeof value === "string" ? { op, attribute, userId, value } : never;
    case Op.GreaterThan:
    case Op.LessThan:
    case Op.GreaterThanOrEqual:
    case Op.LessThanOrEqual:
      return typeof value === "number" ? { op, attribute, userId, value } : never;
    case Op.IsTrue:
    case Op.IsFalse:
      return { op, attribute, userId, value: null };
    case Op.SemverEquals:
    case Op.SemverGreaterThan:
    case Op.SemverLessThan: {
      const version = typeof value === "string" ? parseSemver(value) : null;
      return version !== null ? { op, attribute, userId, value: version } : never;
    }
    case Op.Matches:
      if (typeof value !== "string") return never;
      try {
        return { op, attribute, userId, value: RE2JS.compile(value) };
      } catch {
        return never;
      }
    case Op.Before:
    case Op.After: {
      const at = typeof value === "string" ? parseInstant(value) : null;
      return at !== null ? { op, attribute, userId, value: at } : never;
    }
    case Op.InSegment:
    case Op.NotInSegment: {
      // An unknown segment (refused at write time) never matches, either way.
      const segment = typeof value === "string" ? segments.get(value) : undefined;
      return segment !== undefined ? { op, attribute, userId, value: segment } : never;
    }
    default:
      return never;
  }
}

/** A semver attribute compared with the operand: null when the attribute is not a valid semantic version. */
function semverOrder(v: ContextValue | undefined, operand: SemVer): number | null {
  if (typeof v !== "string") return null;
  const version = parseSemver(v);
  return version === null ? null : compareSemver(version, operand);
}

/** A time attribute in epoch ms: an ISO string (Date.parse) or a number of ms; NaN when neither. */
function instantOf(v: ContextValue | undefined): number {
  if (typeof v === "number") return v;
  if (typeof v === "string") return Date.parse(v);
  return NaN;
}

/**
 * Operator semantics (decisions §6). A missing attribute makes every operator false. Missing
 * means absent or null: the spec lets context values be null, and a null attribute carries no
 * value to compare, so it reads as absent. On a present attribute, `not_equals` and `not_in` are
 * the negations of `equals` and `in` (an array is neither equal to a scalar nor in a list of
 * them). "Present" is tested by type (string, number, boolean or array) rather than by
 * own-property lookup: it is cheaper, and it also keeps Object.prototype members (`toString`,
 * `__proto__`) from passing as attributes.
 */
export function matches(condition: CompiledCondition, context: EvalContext, userId?: string): boolean {
  const v = userId !== undefined && condition.userId ? userId : context[condition.attribute];
  switch (condition.op) {
    case Op.Equals:
      return v === condition.value;
    case Op.NotEquals:
      return (isScalar(v) || Array.isArray(v)) && v !== condition.value;
    case Op.In:
      return isScalar(v) && (condition.value as ReadonlySet<unknown>).has(v);
    case Op.NotIn:
      return Array.isArray(v) || (isScalar(v) && !(condition.value as ReadonlySet<unknown>).has(v));
    case Op.Contains:
      return typeof v === "string" ? v.includes(condition.value as string) : Array.isArray(v) && v.includes(condition.value as string);
    case Op.StartsWith:
      return typeof v === "string" && v.startsWith(condition.value as string);
    case Op.GreaterThan:
      return typeof v === "number" && v > (condition.value as number);
    case Op.LessThan:
      return typeof v === "number" && v < (condition.value as number);
    case Op.IsTrue:
      return v === true;
    case Op.IsFalse:
      return v === false;
    default:
      return matchesMore(condition, v, context, userId);
  }
}

/**
 * The operators added later (issue 31), apart: kept out of `matches` so that its switch, which
 * every condition runs, stays as small as it was (the engine bench measured 20 % off "rules +
 * rollout" with them inline).
 */
function matchesMore(condition: CompiledCondition, v: ContextValue | undefined, context: EvalContext, userId: string | undefined): boolean {
  switch (condition.op) {
    case Op.GreaterThanOrEqual:
      return typeof v === "number" && v >= (condition.value as number);
    case Op.LessThanOrEqual:
      return typeof v === "number" && v <= (condition.value as number);
    case Op.SemverEquals:
      return semverOrder(v, condition.value as SemVer) === 0;
    case Op.SemverGreaterThan:
      return (semverOrder(v, condition.value as SemVer) ?? 0) > 0;
    case Op.SemverLessThan:
      return (semverOrder(v, condition.value as SemVer) ?? 0) < 0;
    case Op.Matches:
      return typeof v === "string" && v.length <= MATCHES_MAX_INPUT && (condition.value as RE2JS).test(v);
    case Op.Before:
      return instantOf(v) < (condition.value as number); // NaN: false
    case Op.After:
      return instantOf(v) > (condition.value as number);
    case Op.InSegment:
      return isMember(condition.value as CompiledSegment, context, userId);
    case Op.NotInSegment:
      return !isMember(condition.value as CompiledSegment, context, userId);
    default:
      return false;
  }
}

/** The rollout bucket of a user: murmur3(flagKey + ":" + userId) mod 100000. */
export function bucketOf(flagKey: string, userId: string): number {
  return murmur3(`${flagKey}:${userId}`) % BUCKETS;
}

/** The variant bucket of a user: murmur3(flagKey + ":variant:" + userId) mod 100000. */
export function variantBucketOf(flagKey: string, userId: string): number {
  return murmur3(`${flagKey}:variant:${userId}`) % BUCKETS;
}

/** The value bucketing uses: a non-empty string as is, a number as its decimal string; else null. */
function usable(value: ContextValue | undefined): string | null {
  if (typeof value === "string") return value === "" ? null : value;
  if (typeof value === "number") return decimalString(value);
  return null;
}

/**
 * What a flag buckets on: its `bucketBy` attribute of the context, as `userId` always was (a
 * missing or unusable one behaves as a missing userId). `userId`, the user given apart, stands
 * for the context's `userId` only: a flag bucketed by another attribute reads that attribute.
 */
function bucketKey(flag: CompiledFlag, context: EvalContext, userId: string | undefined): string | null {
  if (flag.byUserId) return userId ?? usable(context.userId);
  return usable(context[flag.bucketBy]);
}

/**
 * A number in plain decimal notation (decisions §7): the digits of `String(n)` (the shortest
 * that read back as `n`) without its exponent, which it uses from 1e21 up and below 1e-6: 1e21
 * buckets as "1000000000000000000000", 1e-7 as "0.0000001".
 */
export function decimalString(n: number): string {
  const s = String(n);
  const e = s.indexOf("e");
  if (e === -1) return s;
  const sign = n < 0 ? "-" : "";
  const digits = s.slice(sign.length, e).replace(".", ""); // "d" or "d.ddd": one digit before the point
  const exponent = Number(s.slice(e + 1));
  return exponent > 0 ? sign + digits.padEnd(exponent + 1, "0") : `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
}

/** The variant served by weight, or the first one when unweighted or without a usable userId. */
function pickVariant(flag: CompiledFlag, userId: string | null): string {
  const variants = flag.variants;
  const sums = flag.cumulativeWeights;
  if (sums !== null && userId !== null) {
    const bucket = murmur3(flag.variantPrefix + userId) % BUCKETS;
    for (let i = 0; i < sums.length; i++) {
      if (sums[i]! > bucket) return variants[i]!;
    }
    // Weights sum to 100 (checked at write time), so the walk always ends above; should they
    // fall short, the remainder goes to the last variant.
    return variants[variants.length - 1]!;
  }
  return variants[0]!;
}

function result(
  flagKey: string,
  enabled: boolean,
  variant: string | null,
  reason: Reason,
  ruleId: string | null,
  evaluatedAt: string,
): EvaluationResult {
  return { flagKey, enabled, variant, reason, ruleId, evaluatedAt };
}

/**
 * One evaluation, in the spec's resolution order. `flag` is undefined when the key does not
 * exist; `state` is DISABLED_STATE when the flag has no state row in the environment;
 * `override` is the test session's override for this key, if any. `userId`, when given, is the
 * context's `userId` (what rules read, and what rollouts bucket by unless the flag's `bucketBy`
 * names another attribute) without copying the context to set it: OpenFeature's targeting key,
 * in the local provider.
 *
 * `entries` and `overrides` are read only by a flag with prerequisites (docs/targeting.md,
 * Prerequisites): the environment's flags, where each prerequisite is looked up and evaluated
 * with the same context, and the test session's overrides by key, which apply to the
 * prerequisites as they would to those flags evaluated on their own. A flag with prerequisites
 * evaluated without `entries` finds none of them: PREREQUISITE_FAILED.
 */
export function evaluate(
  flag: CompiledFlag | undefined,
  flagKey: string,
  state: CompiledState,
  context: EvalContext,
  evaluatedAt: string,
  override?: Override,
  userId?: string,
  entries?: PrerequisiteLookup,
  overrides?: ReadonlyMap<string, Override>,
): EvaluationResult {
  return evaluateAt(flag, flagKey, state, context, evaluatedAt, override, userId, entries, overrides, 0);
}

/**
 * Whether every prerequisite of `flag` is met, in order (the first unmet one decides). `depth`:
 * how many prerequisite edges led here. Writes refuse cycles and chains deeper than
 * PREREQUISITE_MAX_DEPTH; should stored data hold one anyway, a chain past that depth is unmet
 * rather than endless.
 */
function prerequisitesMet(
  flag: CompiledFlag,
  context: EvalContext,
  evaluatedAt: string,
  userId: string | undefined,
  entries: PrerequisiteLookup | undefined,
  overrides: ReadonlyMap<string, Override> | undefined,
  depth: number,
): boolean {
  if (depth >= PREREQUISITE_MAX_DEPTH) return false;
  const prerequisites = flag.prerequisites;
  for (let i = 0; i < prerequisites.length; i++) {
    const p = prerequisites[i]!;
    const entry = entries?.get(p.flagKey);
    const served = evaluateAt(entry?.flag, p.flagKey, entry?.state ?? DISABLED_STATE, context, evaluatedAt, overrides?.get(p.flagKey), userId, entries, overrides, depth + 1);
    if (!served.enabled || (p.variant !== null && served.variant !== p.variant)) return false;
  }
  return true;
}

function evaluateAt(
  flag: CompiledFlag | undefined,
  flagKey: string,
  state: CompiledState,
  context: EvalContext,
  evaluatedAt: string,
  override: Override | undefined,
  userId: string | undefined,
  entries: PrerequisiteLookup | undefined,
  overrides: ReadonlyMap<string, Override> | undefined,
  depth: number,
): EvaluationResult {
  if (override !== undefined) {
    return typeof override === "boolean"
      ? result(flagKey, override, null, "TEST_OVERRIDE", null, evaluatedAt)
      : result(flagKey, true, override, "TEST_OVERRIDE", null, evaluatedAt);
  }
  if (flag === undefined) return result(flagKey, false, null, "FLAG_NOT_FOUND", null, evaluatedAt);
  if (!state.enabled) return result(flagKey, false, null, "FLAG_DISABLED", null, evaluatedAt);
  if (flag.prerequisites.length > 0 && !prerequisitesMet(flag, context, evaluatedAt, userId, entries, overrides, depth)) {
    return result(flagKey, false, null, "PREREQUISITE_FAILED", null, evaluatedAt);
  }

  const multiVariant = flag.variants.length > 0;
  const rules = flag.rules;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const conditions = rule.conditions;
    let j = 0;
    while (j < conditions.length && matches(conditions[j]!, context, userId)) j++;
    if (j === conditions.length) {
      const variant = rule.variant ?? (multiVariant ? pickVariant(flag, bucketKey(flag, context, userId)) : null);
      return result(flagKey, true, variant, "TARGETING_RULE_MATCH", rule.id, evaluatedAt);
    }
  }

  const threshold = state.threshold;
  if (threshold !== null) {
    const bucketed = bucketKey(flag, context, userId);
    const included =
      bucketed === null ? threshold >= BUCKETS : murmur3(flag.rolloutPrefix + bucketed) % BUCKETS < threshold;
    if (!included) return result(flagKey, false, null, "PERCENTAGE_ROLLOUT_EXCLUDED", null, evaluatedAt);
    return result(flagKey, true, multiVariant ? pickVariant(flag, bucketed) : null, "PERCENTAGE_ROLLOUT", null, evaluatedAt);
  }
  const variant = multiVariant ? pickVariant(flag, bucketKey(flag, context, userId)) : null;
  return result(flagKey, true, variant, "FLAG_ENABLED", null, evaluatedAt);
}
