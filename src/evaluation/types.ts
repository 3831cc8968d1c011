/**
 * The data of evaluation (api-spec: Flag, Flag state, Targeting rule, Evaluation result;
 * decisions §6, §7). Plain types shared by the pure engine, the snapshot and the flags module,
 * which validates writes against the same operator table the engine runs.
 */

/** A context attribute value (decisions §7): string, number, boolean, null, or an array of those. */
export type Scalar = string | number | boolean | null;
export type ContextValue = Scalar | readonly Scalar[];
export type EvalContext = Readonly<Record<string, ContextValue>>;

/** Operators and the value types each accepts (api-spec: Targeting rule). */
export const OPERATOR_VALUE_TYPES = {
  equals: ["string", "number", "boolean"],
  not_equals: ["string", "number"],
  in: ["array"],
  not_in: ["array"],
  contains: ["string"],
  starts_with: ["string"],
  greater_than: ["number"],
  less_than: ["number"],
  is_true: ["boolean"],
  is_false: ["boolean"],
  greater_than_or_equal: ["number"],
  less_than_or_equal: ["number"],
  /** A valid semantic version (semver.org 2.0.0), checked at write time. */
  semver_equals: ["string"],
  semver_greater_than: ["string"],
  semver_less_than: ["string"],
  /** A regular expression in RE2 syntax, checked at write time (docs/targeting.md). */
  matches: ["string"],
  /** An ISO 8601 date-time with a zone (`Z` or `±hh:mm`), checked at write time. */
  before: ["string"],
  after: ["string"],
  /**
   * A segment key of the project (docs/targeting.md, Segments): the context's user is a member.
   * The attribute must be `userId`; not allowed in a segment's own conditions.
   */
  in_segment: ["string"],
  not_in_segment: ["string"],
} as const satisfies Record<string, readonly ("string" | "number" | "boolean" | "array")[]>;

export type Operator = keyof typeof OPERATOR_VALUE_TYPES;
export const OPERATORS = Object.keys(OPERATOR_VALUE_TYPES) as Operator[];
/** Operators whose value names a segment of the project. */
export const SEGMENT_OPERATORS: ReadonlySet<Operator> = new Set(["in_segment", "not_in_segment"]);
/** Operators whose `value` may be omitted. */
export const VALUE_OPTIONAL: ReadonlySet<Operator> = new Set(["is_true", "is_false"]);

export interface Condition {
  attribute: string;
  operator: Operator;
  /** Typed by the operator (checked at write time); `in`/`not_in`: an array of scalars. */
  value?: string | number | boolean | (string | number | boolean)[];
}

export interface Rule {
  /** `rule_...`, assigned by the server, stable across PATCHes. */
  id: string;
  name: string;
  conditions: Condition[];
  enabled: boolean;
  /** One of the flag's variant keys, or null. */
  variant: string | null;
}

export interface Variant {
  key: string;
  name?: string;
  description?: string;
  /** Either every variant has a weight (summing to 100, at most 3 decimals) or none has. */
  weight?: number;
}

/** The attribute rollouts and weights bucket by when a flag does not say (decisions: Targeting). */
export const DEFAULT_BUCKET_BY = "userId";

/**
 * A flag another flag depends on (docs/targeting.md, Prerequisites): met when that flag,
 * evaluated for the same context in the same environment, is enabled and, when `variant` is
 * given, serves it.
 */
export interface Prerequisite {
  flagKey: string;
  variant?: string;
}

/** The longest chain of prerequisites a flag may start (edges: `a -> b` is 1); longer is refused at write. */
export const PREREQUISITE_MAX_DEPTH = 10;

/** What the engine needs of a flag: its key, variants and rules (as stored, already valid). */
export interface FlagDefinition {
  key: string;
  variants: readonly Variant[];
  rules: readonly Rule[];
  /** The context attribute rollouts and variant weights hash on; absent or null: `userId`. */
  bucketBy?: string | null;
  /** The flags that must be met first; absent, null or empty: none. */
  prerequisites?: readonly Prerequisite[] | null;
}

/** What the engine needs of a segment (docs/targeting.md, Segments), as stored, already valid. */
export interface SegmentDefinition {
  key: string;
  /** AND-ed; none: only `included` users are members. Never in_segment/not_in_segment. */
  conditions: readonly Condition[];
  /** User ids that are members whatever the conditions. */
  included: readonly string[];
  /** User ids that are not members unless included. */
  excluded: readonly string[];
}

/** The segment keys a flag's rules name (disabled rules included), in first-use order. */
export function segmentKeysOf(rules: readonly Rule[]): string[] {
  const keys = new Set<string>();
  for (const rule of rules) for (const c of rule.conditions) if (SEGMENT_OPERATORS.has(c.operator) && typeof c.value === "string") keys.add(c.value);
  return [...keys];
}

/** A flag's state in one environment; no state row reads as `{ enabled: false, rolloutPercentage: null }`. */
export interface FlagState {
  enabled: boolean;
  /** 0 to 100, at most 3 decimals; null: everyone. */
  rolloutPercentage: number | null;
}

export const REASONS = [
  "TEST_OVERRIDE",
  "FLAG_DISABLED",
  /** A prerequisite is not met (seen only by flags that have prerequisites). */
  "PREREQUISITE_FAILED",
  "TARGETING_RULE_MATCH",
  "PERCENTAGE_ROLLOUT",
  "PERCENTAGE_ROLLOUT_EXCLUDED",
  "FLAG_ENABLED",
  "FLAG_NOT_FOUND",
] as const;
export type Reason = (typeof REASONS)[number];

export interface EvaluationResult {
  flagKey: string;
  enabled: boolean;
  variant: string | null;
  reason: Reason;
  ruleId: string | null;
  evaluatedAt: string;
}

/** A test-session override (decisions §7): a boolean sets `enabled`; a string serves that variant. */
export type Override = boolean | string;

/** Where the overrides of a test session come from (the Testing API). */
export interface OverrideSource {
  /**
   * The overrides (flag key -> value) of the live session with this token, when it belongs to
   * `projectId`; undefined for an unknown, expired or destroyed session, or another project's
   * (such a token is ignored: evaluation resolves normally). `now`: ms since the epoch.
   */
  overridesFor(token: string, projectId: string, now: number): ReadonlyMap<string, Override> | undefined;
}
