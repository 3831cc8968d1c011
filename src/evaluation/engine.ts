/**
 * The evaluation engine: every rule of evaluation in one pure file (api-spec: Evaluation;
 * decisions §6, §7). Operator semantics, the compile step, bucketing, the variant pick and the
 * resolution order. No I/O and no clock: the caller passes `evaluatedAt`.
 *
 * A flag is compiled once per write (`compileFlag`, `compileState`) so that `evaluate`, which
 * runs per request and per flag, allocates nothing but its result: conditions are plain data
 * switched on, list operators use Sets, weights are integer thousandths, hash prefixes are
 * prebuilt, equal states are one shared object.
 */
import { murmur3 } from "./murmur3";
import type {
  Condition,
  ContextValue,
  EvalContext,
  EvaluationResult,
  FlagDefinition,
  FlagState,
  Override,
  Reason,
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
};

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
  readonly value: string | number | boolean | ReadonlySet<unknown> | null;
}

export interface CompiledRule {
  readonly id: string;
  /** Conditions AND-ed; empty: matches everyone. */
  readonly conditions: readonly CompiledCondition[];
  /** The variant the rule serves; null on boolean flags, or when the rule names none. */
  readonly variant: string | null;
}

export interface CompiledFlag {
  readonly key: string;
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

export function compileFlag(def: FlagDefinition): CompiledFlag {
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
      conditions: rule.conditions.length === 0 ? NONE : rule.conditions.map(compileCondition),
      variant: multiVariant ? rule.variant : null,
    });
  }
  return {
    key: def.key,
    rules: rules.length === 0 ? NONE : rules,
    variants,
    cumulativeWeights,
    rolloutPrefix: `${def.key}:`,
    variantPrefix: cumulativeWeights === null ? "" : `${def.key}:variant:`,
  };
}

type ListValue = string | number | boolean;

const isScalar = (v: ContextValue | undefined): v is ListValue =>
  typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/**
 * Values were type-checked at write time; one of the wrong type for its operator compiles to a
 * condition that never matches rather than a throw (as does an operator stored by a newer version).
 */
function compileCondition(condition: Condition): CompiledCondition {
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
      return typeof value === "number" ? { op, attribute, userId, value } : never;
    case Op.IsTrue:
    case Op.IsFalse:
      return { op, attribute, userId, value: null };
    default:
      return never;
  }
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

/** The userId bucketing uses: a non-empty string as is, a number as its decimal string; else null. */
function usableUserId(context: EvalContext): string | null {
  const userId = context.userId;
  if (typeof userId === "string") return userId === "" ? null : userId;
  if (typeof userId === "number") return decimalString(userId);
  return null;
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
 * context's `userId` (what rules read and rollouts bucket by) without copying the context to
 * set it: OpenFeature's targeting key, in the local provider.
 */
export function evaluate(
  flag: CompiledFlag | undefined,
  flagKey: string,
  state: CompiledState,
  context: EvalContext,
  evaluatedAt: string,
  override?: Override,
  userId?: string,
): EvaluationResult {
  if (override !== undefined) {
    return typeof override === "boolean"
      ? result(flagKey, override, null, "TEST_OVERRIDE", null, evaluatedAt)
      : result(flagKey, true, override, "TEST_OVERRIDE", null, evaluatedAt);
  }
  if (flag === undefined) return result(flagKey, false, null, "FLAG_NOT_FOUND", null, evaluatedAt);
  if (!state.enabled) return result(flagKey, false, null, "FLAG_DISABLED", null, evaluatedAt);

  const multiVariant = flag.variants.length > 0;
  const rules = flag.rules;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const conditions = rule.conditions;
    let j = 0;
    while (j < conditions.length && matches(conditions[j]!, context, userId)) j++;
    if (j === conditions.length) {
      const variant = rule.variant ?? (multiVariant ? pickVariant(flag, userId ?? usableUserId(context)) : null);
      return result(flagKey, true, variant, "TARGETING_RULE_MATCH", rule.id, evaluatedAt);
    }
  }

  const threshold = state.threshold;
  if (threshold !== null) {
    const bucketed = userId ?? usableUserId(context);
    const included =
      bucketed === null ? threshold >= BUCKETS : murmur3(flag.rolloutPrefix + bucketed) % BUCKETS < threshold;
    if (!included) return result(flagKey, false, null, "PERCENTAGE_ROLLOUT_EXCLUDED", null, evaluatedAt);
    return result(flagKey, true, multiVariant ? pickVariant(flag, bucketed) : null, "PERCENTAGE_ROLLOUT", null, evaluatedAt);
  }
  const variant = multiVariant ? pickVariant(flag, userId ?? usableUserId(context)) : null;
  return result(flagKey, true, variant, "FLAG_ENABLED", null, evaluatedAt);
}
