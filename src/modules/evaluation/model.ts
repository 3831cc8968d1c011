/** Evaluation: request and response schemas (api-spec: Evaluation; decisions §7). */
import type { TProperties } from "@sinclair/typebox";
import { t, type Static } from "elysia";
import { REASONS } from "../../evaluation/types";
import { UNKNOWN_FIELD_HINTS } from "../../http/errors";

export const MAX_BATCH_FLAGS = 50;

const Scalar = [t.String(), t.Number(), t.Boolean(), t.Null()];

const ContextValue = t.Union([...Scalar, t.Array(t.Union(Scalar))], {
  description: "A string, number, boolean, null, or an array of those",
  error: "Must be a string, number, boolean, null, or an array of those",
});

// Every key's value is checked (a Record's key pattern `^(.*)$` would skip keys holding a newline).
const Context = t.Object({}, {
  additionalProperties: ContextValue,
  description:
    "Attributes of the user or request, matched by the targeting rules' conditions (each condition names a top-level key). " +
    "`userId` (a string, or a number turned into its decimal string) is what percentage rollouts and weighted variants bucket by; without it a rollout under 100 % excludes. Default: empty.",
  error: "Must be an object whose values are strings, numbers, booleans, null, or arrays of those",
});

/**
 * A request object that takes these fields and no other; `environment`, which callers send by
 * habit, is refused with why (a 400 `Unknown field: <why>`).
 */
const request = <P extends TProperties>(properties: P, title: string, why: string) =>
  t.Object(properties, { additionalProperties: false, title, [UNKNOWN_FIELD_HINTS]: { environment: why } });

const KEY_CHOOSES = "the API key chooses the environment (each key belongs to one environment)";
const PATH_CHOOSES = "the path chooses the environment";

export const EvaluateRequest = request(
  {
    flagKey: t.String({ minLength: 1, description: "Key of the flag to evaluate", error: "Must be a non-empty string" }),
    context: t.Optional(Context),
  },
  "EvaluateRequest",
  KEY_CHOOSES,
);
export type EvaluateRequest = Static<typeof EvaluateRequest>;

export const BatchRequest = request(
  {
    flags: t.Array(t.String({ minLength: 1, error: "Must be a non-empty string" }), {
      minItems: 1,
      maxItems: MAX_BATCH_FLAGS,
      description: `Flag keys to evaluate, 1 to ${MAX_BATCH_FLAGS} as sent (repeats count); a key sent twice gets one result`,
      error: `Must be an array of 1 to ${MAX_BATCH_FLAGS} flag keys`,
    }),
    context: t.Optional(Context),
  },
  "BatchEvaluateRequest",
  KEY_CHOOSES,
);
export type BatchRequest = Static<typeof BatchRequest>;

/** The same bodies for evaluating in the environment a path names (src/modules/evaluation/preview.ts). */
export const PathEvaluateRequest = request(EvaluateRequest.properties, "PathEvaluateRequest", PATH_CHOOSES);
export const PathBatchRequest = request(BatchRequest.properties, "PathBatchEvaluateRequest", PATH_CHOOSES);

export const EvaluationResult = t.Object(
  {
    flagKey: t.String({ description: "The evaluated flag key, as sent" }),
    enabled: t.Boolean({ description: "Whether the flag is on for this context" }),
    variant: t.Union([t.String(), t.Null()], {
      description: "The variant served (multi-variant flags); null for boolean flags and for disabled or excluded results",
    }),
    // No default: it would read as one in the API document.
    reason: t.UnionEnum(REASONS, { description: `Why: ${REASONS.join(", ")}`, default: undefined }),
    ruleId: t.Union([t.String(), t.Null()], { description: "Id of the targeting rule that matched (reason TARGETING_RULE_MATCH); else null" }),
    evaluatedAt: t.String({ format: "date-time", description: "When the service evaluated it (ISO 8601 UTC, milliseconds)" }),
  },
  { title: "EvaluationResult" },
);

export const BatchResult = t.Object(
  {
    results: t.Record(t.String(), EvaluationResult, { description: "One result per distinct flag key sent, keyed by it" }),
    evaluatedAt: t.String({ format: "date-time", description: "When the batch was evaluated; every result carries the same time" }),
  },
  { title: "BatchEvaluationResult" },
);

// ---- quick acceptance tests for the hot path (src/http/native.ts `accepts`) -------------------
// For a value from JSON.parse: true only when the schema above accepts it too (a differential
// property test holds them together: test/unit/evaluation-model.test.ts). They allocate
// nothing, unlike the compiled schema's checks of records and unknown fields; whatever they
// do not vouch for goes to the compiled schema, which decides and explains.

const isScalar = (v: unknown): boolean =>
  typeof v === "string" || typeof v === "boolean" || v === null || (typeof v === "number" && Number.isFinite(v));

function isContext(c: unknown): boolean {
  if (typeof c !== "object" || c === null || Array.isArray(c)) return false;
  for (const key in c) {
    const v = (c as Record<string, unknown>)[key];
    if (isScalar(v)) continue;
    if (!Array.isArray(v)) return false;
    for (let i = 0; i < v.length; i++) if (!isScalar(v[i])) return false;
  }
  return true;
}

export function isEvaluateRequest(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  for (const key in body) if (key !== "flagKey" && key !== "context") return false;
  const { flagKey, context } = body as Record<string, unknown>;
  return typeof flagKey === "string" && flagKey.length > 0 && (context === undefined || isContext(context));
}

export function isBatchRequest(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  for (const key in body) if (key !== "flags" && key !== "context") return false;
  const { flags, context } = body as Record<string, unknown>;
  if (!Array.isArray(flags) || flags.length < 1 || flags.length > MAX_BATCH_FLAGS) return false;
  for (let i = 0; i < flags.length; i++) {
    const key = flags[i];
    if (typeof key !== "string" || key.length === 0) return false;
  }
  return context === undefined || isContext(context);
}
