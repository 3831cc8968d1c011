/**
 * OpenFeature's view of an evaluation (docs/openfeature.md): the one mapping that both the
 * OFREP endpoints (src/modules/ofrep/) and the local-evaluation provider (packages/) apply to
 * the engine's result, so that a flag reads the same through either. Pure: no I/O, no clock.
 *
 * - Context: OpenFeature's `targetingKey` is our `userId`; the other attributes are our context.
 * - Value: a boolean flag's is `enabled`; a multi-variant flag's is the served variant's key,
 *   and when none is served (disabled, excluded) there is no value: OFREP's code default
 *   (ADR 0006), the application's own default applies.
 * - Reason: ours mapped onto OpenFeature's, ours and the matched rule kept in `metadata`.
 * - A result that depends on bucketing a user who was not identified is an error,
 *   TARGETING_KEY_MISSING, instead of a silent "excluded" (only for a flag that buckets by
 *   userId, the default: `bucketBy` names another attribute otherwise).
 */
import type { CompiledFlag } from "./engine";
import type { ContextValue, EvalContext, EvaluationResult, Reason, Scalar } from "./types";

/** OpenFeature's resolution reasons that our results map onto. */
export type OpenFeatureReason = "STATIC" | "DEFAULT" | "TARGETING_MATCH" | "SPLIT" | "DISABLED";

/** OpenFeature's error codes that an evaluation can end in (OFREP's `errorCode`). */
export type OpenFeatureErrorCode = "FLAG_NOT_FOUND" | "PARSE_ERROR" | "INVALID_CONTEXT" | "TARGETING_KEY_MISSING" | "GENERAL";

/** Flag metadata: OpenFeature takes only strings, numbers and booleans. */
export type FlagMetadata = Record<string, string | number | boolean>;

export interface Resolution {
  /** Absent: the code default (a multi-variant flag that serves no variant). */
  value?: boolean | string;
  variant?: string;
  reason: OpenFeatureReason;
  metadata: FlagMetadata;
}

/**
 * An evaluation's failure. A class, so that telling it from a context is a prototype check: a
 * context may well have an attribute named `errorCode`.
 */
export class ResolutionError {
  constructor(
    readonly errorCode: OpenFeatureErrorCode,
    readonly errorDetails: string,
  ) {}
}

/**
 * The mapping of our reasons (docs/openfeature.md has the table). FLAG_ENABLED depends on the
 * flag: a variant picked by weight is a SPLIT, a fall-through past targeting rules that did not
 * match is the DEFAULT, a flag without rules or weights is STATIC.
 */
export function openFeatureReason(result: EvaluationResult, flag: CompiledFlag | undefined): OpenFeatureReason {
  switch (result.reason) {
    case "TEST_OVERRIDE":
      return "STATIC";
    case "FLAG_DISABLED":
      return "DISABLED";
    // The flag is on in the environment; what it answers turned on how another flag evaluates
    // for this context: a dynamic evaluation, not a flag switched off (docs/openfeature.md).
    case "PREREQUISITE_FAILED":
    case "TARGETING_RULE_MATCH":
      return "TARGETING_MATCH";
    case "PERCENTAGE_ROLLOUT":
    case "PERCENTAGE_ROLLOUT_EXCLUDED":
      return "SPLIT";
    case "FLAG_ENABLED":
      if (flag !== undefined && flag.cumulativeWeights !== null) return "SPLIT";
      return flag !== undefined && flag.rules.length > 0 ? "DEFAULT" : "STATIC";
    case "FLAG_NOT_FOUND":
      return "DEFAULT";
  }
}

/** Every reason of ours with the OpenFeature reason it maps to (for the docs and their test). */
export const REASON_MAPPING: Readonly<Record<Reason, string>> = {
  TEST_OVERRIDE: "STATIC",
  FLAG_DISABLED: "DISABLED",
  PREREQUISITE_FAILED: "TARGETING_MATCH",
  TARGETING_RULE_MATCH: "TARGETING_MATCH",
  PERCENTAGE_ROLLOUT: "SPLIT",
  PERCENTAGE_ROLLOUT_EXCLUDED: "SPLIT (TARGETING_KEY_MISSING without a targeting key)",
  FLAG_ENABLED: "STATIC; SPLIT when weights pick the variant; DEFAULT past targeting rules that did not match",
  FLAG_NOT_FOUND: "error FLAG_NOT_FOUND",
};

/**
 * The OpenFeature resolution of one result, or the error it ends in. `flag`: the compiled flag
 * the result came from (undefined when the key does not exist); `identified`: whether the
 * evaluation had a user to bucket (`isIdentified`); `environment`: its slug, carried in the
 * metadata.
 */
export function resolution(result: EvaluationResult, flag: CompiledFlag | undefined, identified: boolean, environment?: string): Resolution | ResolutionError {
  const failure = failureOf(result, flag, identified);
  if (failure !== null) return failure;
  const out: Resolution = { reason: openFeatureReason(result, flag), metadata: metadataOf(result, flag, environment) };
  const value = valueOf(result, flag);
  if (value !== undefined) out.value = value;
  if (typeof value === "string") out.variant = value;
  return out;
}

/**
 * `resolution` in OpenFeature's own shape (a provider's ResolutionDetails), in one object: the
 * local provider's answer. `defaultValue` stands for the code default.
 */
export function resolutionDetails<T>(
  result: EvaluationResult,
  flag: CompiledFlag | undefined,
  identified: boolean,
  environment: string | undefined,
  defaultValue: T,
): { value: T; variant: string | undefined; reason: OpenFeatureReason; flagMetadata: FlagMetadata } | ResolutionError {
  const failure = failureOf(result, flag, identified);
  if (failure !== null) return failure;
  const value = valueOf(result, flag);
  return {
    value: value === undefined ? defaultValue : (value as T),
    variant: typeof value === "string" ? value : undefined,
    reason: openFeatureReason(result, flag),
    flagMetadata: metadataOf(result, flag, environment),
  };
}

function failureOf(result: EvaluationResult, flag: CompiledFlag | undefined, identified: boolean): ResolutionError | null {
  if (result.reason === "FLAG_NOT_FOUND") return new ResolutionError("FLAG_NOT_FOUND", `Flag '${result.flagKey}' was not found`);
  if (!identified && bucketed(result, flag)) {
    return new ResolutionError("TARGETING_KEY_MISSING", `Flag '${result.flagKey}' splits users by targeting key; send context.targetingKey`);
  }
  return null;
}

/** A boolean flag's value is `enabled`; a multi-variant flag's the served variant (none: undefined, the code default). */
function valueOf(result: EvaluationResult, flag: CompiledFlag | undefined): boolean | string | undefined {
  // An override names its type on a flag not (yet) known.
  const multiVariant = flag !== undefined ? flag.variants.length > 0 : result.variant !== null;
  if (!multiVariant) return result.enabled;
  return result.variant ?? undefined;
}

/**
 * The metadata of a result: few distinct ones exist per flag (a reason, a rule, the
 * environment), so each is made once, frozen and shared; made again when a flag's environment
 * changes (the server's flags serve every environment of their project).
 */
interface MetadataCache {
  environment: string | undefined;
  byReason: Partial<Record<Reason, FlagMetadata>>;
  byRule: Map<string, FlagMetadata>;
}
const metadataCaches = new WeakMap<CompiledFlag, MetadataCache>();

function metadataOf(result: EvaluationResult, flag: CompiledFlag | undefined, environment: string | undefined): FlagMetadata {
  if (flag === undefined) return newMetadata(result, environment);
  let cache = metadataCaches.get(flag);
  if (cache === undefined || cache.environment !== environment) metadataCaches.set(flag, (cache = { environment, byReason: {}, byRule: new Map() }));
  if (result.ruleId === null) return (cache.byReason[result.reason] ??= newMetadata(result, environment));
  let metadata = cache.byRule.get(result.ruleId);
  if (metadata === undefined) cache.byRule.set(result.ruleId, (metadata = newMetadata(result, environment)));
  return metadata;
}

function newMetadata(result: EvaluationResult, environment: string | undefined): FlagMetadata {
  const metadata: FlagMetadata = { reason: result.reason };
  if (result.ruleId !== null) metadata.ruleId = result.ruleId;
  if (environment !== undefined) metadata.environment = environment;
  return Object.freeze(metadata);
}

export const isResolutionError = <T extends object>(r: T | ResolutionError): r is ResolutionError => r instanceof ResolutionError;

/** Whether bucketing had a user to bucket: the context's `userId` as the engine reads it. */
export function isIdentified(context: EvalContext): boolean {
  const id = context.userId;
  return (typeof id === "string" && id !== "") || typeof id === "number";
}

/**
 * Whether the result came from bucketing by the targeting key (a rollout, or a variant picked by
 * weight). A flag that buckets by another attribute (`bucketBy`) never does: its missing
 * attribute is the application's business, not a missing targeting key, and evaluates as a
 * missing userId does (docs/targeting.md).
 */
function bucketed(result: EvaluationResult, flag: CompiledFlag | undefined): boolean {
  if (flag === undefined || !flag.byUserId) return false;
  switch (result.reason) {
    case "PERCENTAGE_ROLLOUT_EXCLUDED":
      return true;
    case "PERCENTAGE_ROLLOUT":
    case "FLAG_ENABLED":
      return flag.cumulativeWeights !== null;
    case "TARGETING_RULE_MATCH":
      // A rule without a variant of its own serves one by weight.
      return flag.cumulativeWeights !== null && flag.rules.find((r) => r.id === result.ruleId)?.variant === null;
    default:
      return false;
  }
}

const isScalar = (v: unknown): v is Scalar => v === null || typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));

/**
 * An OpenFeature evaluation context as ours: `targetingKey` becomes `userId` (a context's own
 * `userId` stays when there is no targeting key) and stays an attribute of its own; a Date
 * becomes its ISO 8601 text (as JSON sends it); strings, numbers, booleans, null and arrays of
 * those are kept. Anything else (an object, a nested array) is no value a condition can read:
 * an error naming the attribute.
 */
export function toEvalContext(context: Readonly<Record<string, unknown>> | undefined): EvalContext | ResolutionError {
  // No prototype: an attribute named "__proto__" is an ordinary one.
  const out: Record<string, ContextValue> = Object.create(null);
  if (context === undefined || context === null) return out;
  if (typeof context !== "object" || Array.isArray(context)) return invalidContext("context must be an object");
  for (const name of Object.keys(context)) {
    const v = context[name];
    if (name === "targetingKey") {
      if (v === undefined || v === null) continue;
      if (typeof v !== "string") return invalidContext("targetingKey must be a string");
      out.targetingKey = v;
      if (v !== "") out.userId = v;
      continue;
    }
    if (name === "userId" && context.targetingKey !== undefined && context.targetingKey !== null) continue;
    if (v === undefined) continue;
    if (isScalar(v)) out[name] = v;
    else if (v instanceof Date) out[name] = v.toISOString();
    else if (Array.isArray(v) && v.every(isScalar)) out[name] = v;
    else return invalidContext(`attribute '${name}' must be a string, number, boolean, null or an array of those`);
  }
  return out;
}

const invalidContext = (details: string): ResolutionError => new ResolutionError("INVALID_CONTEXT", details);

/**
 * Whether an OpenFeature context can be evaluated as it is, without `toEvalContext`'s copy (the
 * local provider's fast path): every attribute is a value the engine reads (no Date, no object),
 * and the targeting key is absent or a non-empty string. Then the engine given the context and
 * the targeting key as its `userId` answers exactly as on the copy. Allocates nothing.
 */
export function evaluableAsIs(context: Readonly<Record<string, unknown>>): context is EvalContext {
  for (const name in context) {
    const v = context[name];
    if (isScalar(v) || v === undefined) continue;
    if (!Array.isArray(v)) return false;
    for (let i = 0; i < v.length; i++) if (!isScalar(v[i])) return false;
  }
  const key = context.targetingKey;
  return key === undefined || key === null || (typeof key === "string" && key !== "");
}
