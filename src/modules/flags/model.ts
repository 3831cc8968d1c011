/**
 * Flags and their per-environment states: request and response schemas (api-spec: Flag, Flag
 * state, Targeting rule; decisions §6). The schemas check shapes; what depends on several
 * fields at once (weights summing to 100, a rule's variant existing, a condition's value type
 * for its operator) is checked by the service, before anything is stored.
 */
import { t } from "elysia";
import { ONE_OR_MORE, ONE_TO_100, QueryInt, ResponseInt, Slug, SLUG_PATTERN, Timestamp } from "../../http/schema";
import { OPERATORS, PREREQUISITE_MAX_DEPTH, type Operator } from "../../evaluation/types";
import { StaleSchema } from "../insights/model";

const VARIANT_KEY_PATTERN = "^[A-Za-z0-9_-]{1,64}$";
const RULE_ID_PATTERN = "^rule_[A-Za-z0-9]{1,64}$";
export const LIMITS = { rules: 200, conditions: 50, listValues: 1000, variants: 100, prerequisites: 50 } as const;
const NAME_MAX = 200;
const DESCRIPTION_MAX = 2000;
export const PER_PAGE_MAX = 100;

const Name = () => t.String({ minLength: 1, maxLength: NAME_MAX, error: `Must be a string of 1 to ${NAME_MAX} characters` });
const Description = () => t.String({ maxLength: DESCRIPTION_MAX, error: `Must be a string of at most ${DESCRIPTION_MAX} characters` });
const NullableDescription = (description: string) =>
  t.Union([t.String({ maxLength: DESCRIPTION_MAX }), t.Null()], { description, error: `Must be a string of at most ${DESCRIPTION_MAX} characters, or null` });

export const FlagKey = (description = "kebab-case, 1 to 128 characters, unique in the project, immutable") =>
  t.String({
    pattern: SLUG_PATTERN,
    minLength: 1,
    maxLength: 128,
    description,
    error: "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters",
  });

const Weight = () =>
  t.Number({
    minimum: 0,
    maximum: 100,
    description: "Percentage of users served this variant, at most 3 decimals",
    error: "Must be a number from 0 to 100",
  });

export const Variant = t.Object(
  {
    key: t.String({ pattern: VARIANT_KEY_PATTERN, description: "A-Z, a-z, 0-9, _ and -, 1 to 64 characters, unique in the flag", error: "Must be 1 to 64 characters of A-Z, a-z, 0-9, _ or -" }),
    name: t.Optional(t.String({ maxLength: NAME_MAX })),
    description: t.Optional(Description()),
    weight: t.Optional(Weight()),
  },
  { additionalProperties: false, title: "Variant", description: "Either no variant has a weight, or all have and they sum to 100" },
);

const ConditionValue = t.Union([t.String(), t.Number(), t.Boolean(), t.Array(t.Union([t.String(), t.Number(), t.Boolean()]))], {
  description:
    "Typed by the operator (docs/targeting.md): equals string|number|boolean; not_equals string|number; in, not_in an array (at most 1,000); contains, starts_with string; greater_than, less_than, greater_than_or_equal, less_than_or_equal number; is_true, is_false boolean or omitted; semver_equals, semver_greater_than, semver_less_than a semantic version string (e.g. 1.2.3); matches a regular expression in RE2 syntax (searched anywhere in the attribute; an attribute over 1,024 characters never matches); before, after an ISO 8601 date-time with a zone (e.g. 2026-01-01T00:00:00Z; the attribute an ISO string or epoch milliseconds); in_segment, not_in_segment the key of a segment of the project (attribute userId; GET /v1/projects/{slug}/segments)",
  error: "Must be a string, number, boolean or an array of those",
});

export const Condition = t.Object(
  {
    attribute: t.String({ minLength: 1, maxLength: 256, description: "A top-level key of the evaluation context (userId included)", error: "Must be a string of 1 to 256 characters" }),
    operator: t.UnionEnum(OPERATORS as [Operator, ...Operator[]], { description: OPERATORS.join(", "), error: `Must be one of ${OPERATORS.join(", ")}` }),
    value: t.Optional(ConditionValue),
  },
  { additionalProperties: false, title: "Condition" },
);

/** A rule as sent: without `id` the server assigns one; with it, the rule keeps it. */
export const RuleInput = t.Object(
  {
    id: t.Optional(t.String({ pattern: RULE_ID_PATTERN, description: "Send a rule's id back to keep it stable", error: "Must be a rule id (rule_...)" })),
    name: t.Optional(t.String({ maxLength: NAME_MAX, description: "Display name; default empty" })),
    conditions: t.Optional(t.Array(Condition, { maxItems: LIMITS.conditions, description: `AND-ed; at most ${LIMITS.conditions}; none (the default) matches everyone` })),
    enabled: t.Optional(t.Boolean({ description: "Default true; a disabled rule is skipped" })),
    variant: t.Optional(t.Union([t.String(), t.Null()], { description: "One of the flag's variant keys, or null (default)" })),
  },
  { additionalProperties: false, title: "RuleInput" },
);

const BUCKET_BY_DESCRIPTION = "The context attribute percentage rollouts and variant weights bucket by (hash flagKey:value); default userId. Absent from a flag that buckets by userId";
const BucketBy = () => t.String({ minLength: 1, maxLength: 256, description: BUCKET_BY_DESCRIPTION, error: "Must be an attribute name of 1 to 256 characters" });

const PREREQUISITES_DESCRIPTION = `Flags that must be met first, all of them (docs/targeting.md, Prerequisites): a prerequisite is met when that flag, evaluated for the same context in the same environment, is enabled and, when variant is given, serves that variant; unmet: enabled false, variant null, reason PREREQUISITE_FAILED. Checked after the flag's own state (a disabled flag answers FLAG_DISABLED) and before its rules. At most ${LIMITS.prerequisites}; refused (400): an unknown flag, a variant that flag does not have, a cycle, a chain deeper than ${PREREQUISITE_MAX_DEPTH}`;

export const Prerequisite = t.Object(
  {
    flagKey: FlagKey("The key of a flag of the same project"),
    variant: t.Optional(t.String({ pattern: VARIANT_KEY_PATTERN, description: "Met only when that flag serves this variant (one of its variant keys); omitted: met when it is enabled", error: "Must be 1 to 64 characters of A-Z, a-z, 0-9, _ or -" })),
  },
  { additionalProperties: false, title: "Prerequisite" },
);
const Prerequisites = (description: string) => t.Array(Prerequisite, { maxItems: LIMITS.prerequisites, description });

const Rules = () => t.Array(RuleInput, { maxItems: LIMITS.rules, description: `Evaluated top to bottom, first match wins; at most ${LIMITS.rules}` });
const Variants = () => t.Array(Variant, { maxItems: LIMITS.variants, description: `At most ${LIMITS.variants}; empty: a boolean flag` });

export const NewFlag = t.Object(
  {
    key: FlagKey(),
    name: Name(),
    description: t.Optional(NullableDescription("null or omitted: none")),
    variants: t.Optional(Variants()),
    rules: t.Optional(Rules()),
    bucketBy: t.Optional(BucketBy()),
    prerequisites: t.Optional(Prerequisites(`${PREREQUISITES_DESCRIPTION}. Omitted or empty: none`)),
  },
  { additionalProperties: false, title: "NewFlag" },
);

export const FlagPatch = t.Object(
  {
    // Named so that the 400 says why instead of "Unknown field".
    key: t.Optional(t.Never({ error: "The key of a flag cannot be changed" })),
    name: t.Optional(Name()),
    description: t.Optional(NullableDescription("null clears it")),
    variants: t.Optional(Variants()),
    rules: t.Optional(t.Array(RuleInput, { maxItems: LIMITS.rules, description: `Replaces the whole array; at most ${LIMITS.rules}` })),
    bucketBy: t.Optional(
      t.Union([BucketBy(), t.Null()], { description: `${BUCKET_BY_DESCRIPTION}; null or userId: back to the default`, error: "Must be an attribute name of 1 to 256 characters, or null" }),
    ),
    prerequisites: t.Optional(
      t.Union([Prerequisites(""), t.Null()], {
        description: `${PREREQUISITES_DESCRIPTION}. Replaces the whole array; null or empty: none`,
        error: `Must be an array of at most ${LIMITS.prerequisites} { flagKey, variant? }, or null`,
      }),
    ),
  },
  { additionalProperties: false, title: "FlagPatch" },
);

export const Rule = t.Object(
  {
    id: t.String({ description: "rule_..., stable across PATCHes that send it back" }),
    name: t.String(),
    conditions: t.Array(Condition),
    enabled: t.Boolean(),
    variant: t.Union([t.String(), t.Null()]),
  },
  { title: "Rule" },
);

export const Flag = t.Object(
  {
    id: t.String({ description: "flag_..." }),
    key: t.String(),
    name: t.String(),
    description: t.Optional(t.String({ description: "Absent when not set" })),
    variants: t.Array(Variant),
    rules: t.Array(Rule),
    bucketBy: t.Optional(t.String({ description: "Only when the flag buckets by an attribute other than userId" })),
    prerequisites: t.Optional(t.Array(Prerequisite, { description: "Only when the flag has prerequisites (docs/targeting.md, Prerequisites)" })),
    createdAt: Timestamp(),
    updatedAt: Timestamp("Moves when name, description, variants, rules, bucketBy or prerequisites change"),
    stale: StaleSchema,
  },
  { title: "Flag" },
);

export const FlagListQuery = t.Object(
  {
    environment: t.Optional(Slug("Keep flags that have a state in this environment (malformed: 400; unknown: 404)")),
    enabled: t.Optional(t.Boolean({ description: "With environment only: keep flags enabled (true) or disabled (false) there", error: "Must be true or false" })),
    q: t.Optional(t.String({ maxLength: 200, description: "Case-insensitive substring of key or name" })),
    stale: t.Optional(t.Boolean({ description: "true: only stale flags; false: only the others (docs/insights.md, Stale flags)", error: "Must be true or false" })),
    page: t.Optional(QueryInt(ONE_OR_MORE, "Default 1, at most 999999999", "Must be an integer from 1 to 999999999")),
    perPage: t.Optional(QueryInt(ONE_TO_100, `Default 20, at most ${PER_PAGE_MAX}`, `Must be an integer from 1 to ${PER_PAGE_MAX}`)),
    include: t.Optional(t.UnionEnum(["states"], { description: "states: each flag with its states (as GET .../flags/{key}/states items)", error: "Must be states", default: undefined })),
  },
  { additionalProperties: false },
);

export const FlagParams = t.Object({ slug: Slug("Project slug"), key: FlagKey("Flag key") });
export const StateParams = t.Object({ slug: Slug("Project slug"), key: FlagKey("Flag key"), environment: Slug("Environment slug") });

export const StatePut = t.Object(
  {
    enabled: t.Boolean({ error: "Must be a boolean" }),
    rolloutPercentage: t.Optional(
      t.Union([t.Number({ minimum: 0, maximum: 100 }), t.Null()], {
        description: "0 to 100, at most 3 decimals; null clears it (everyone); omitted keeps the current value",
        error: "Must be a number from 0 to 100, or null",
      }),
    ),
  },
  { additionalProperties: false, title: "FlagStateInput" },
);

export const FlagState = t.Object(
  {
    flagKey: t.String(),
    environment: t.String({ description: "Environment slug" }),
    enabled: t.Boolean(),
    rolloutPercentage: t.Union([t.Number(), t.Null()], { description: "null: all users" }),
    updatedAt: Timestamp("When the state last changed; the flag's createdAt while it has never been set"),
    lastEvaluatedAt: t.Union([Timestamp(), t.Null()], {
      description: "The last production evaluation of the flag in this environment (test-session overrides do not count; evaluations not yet flushed do); null: never (docs/insights.md)",
    }),
  },
  { title: "FlagState" },
);

export const FlagStates = t.Object(
  {
    flagKey: t.String(),
    states: t.Array(FlagState, { description: "One per environment of the project, in the order the environments were added" }),
  },
  { title: "FlagStates" },
);

export const FlagListItem = t.Object(
  {
    id: t.String(),
    key: t.String(),
    name: t.String(),
    createdAt: Timestamp(),
    updatedAt: Timestamp(),
    stale: StaleSchema,
    states: t.Optional(
      t.Array(t.Composite([FlagState, t.Object({ etag: t.String({ description: "The state's ETag, as GET .../states/{environment} answers it in its header: what a PUT of the state sends as If-Match" }) })]), {
        description: "With include=states only: one per environment of the project, in the order the environments were added",
      }),
    ),
  },
  { title: "FlagListItem" },
);

export const FlagList = t.Object(
  {
    flags: t.Array(FlagListItem),
    total: ResponseInt({ description: "Flags matching the filters, over all pages" }),
    page: ResponseInt(),
    perPage: ResponseInt(),
  },
  { title: "FlagList" },
);
