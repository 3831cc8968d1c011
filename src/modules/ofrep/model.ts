/**
 * OFREP v0.3.0 (the OpenFeature Remote Evaluation Protocol): request and answer schemas, as the
 * protocol's `service/openapi.yaml` defines them, for validation and the API document.
 */
import { t, type Static } from "elysia";

const Context = t.Object(
  { targetingKey: t.Optional(t.String({ description: "The user: flagsvc's `userId`, what rollouts and weighted variants bucket by" })) },
  {
    additionalProperties: t.Unknown(),
    description:
      "The evaluation context: `targetingKey` and attributes (strings, numbers, booleans, null or arrays of those) that the targeting rules' conditions read",
  },
);

export const OfrepRequest = t.Object(
  { context: t.Optional(Context) },
  { additionalProperties: t.Unknown(), title: "OfrepEvaluationRequest", description: "`{ context }`; an absent context is an empty one" },
);
export type OfrepRequest = Static<typeof OfrepRequest>;

const Metadata = t.Record(t.String(), t.Union([t.String(), t.Number(), t.Boolean()]), {
  description: "flagsvc's own `reason`, the matched `ruleId` (when a rule matched) and the `environment` evaluated in",
});

export const OfrepSuccess = t.Object(
  {
    key: t.String({ description: "The flag key" }),
    value: t.Optional(
      t.Union([t.Boolean(), t.String()], {
        description: "A boolean flag: whether it is on. A multi-variant flag: the served variant's key; absent when it serves none (the code default applies)",
      }),
    ),
    reason: t.UnionEnum(["STATIC", "DEFAULT", "TARGETING_MATCH", "SPLIT", "DISABLED"], { description: "OpenFeature's reason", default: undefined }),
    variant: t.Optional(t.String({ description: "The served variant's key (multi-variant flags)" })),
    metadata: Metadata,
  },
  { title: "OfrepEvaluationSuccess" },
);

const ErrorCode = (codes: readonly string[]) => t.UnionEnum(codes as [string, ...string[]], { description: "OpenFeature's error code", default: undefined });

export const OfrepFailure = t.Object(
  {
    key: t.String(),
    errorCode: ErrorCode(["FLAG_NOT_FOUND", "PARSE_ERROR", "TARGETING_KEY_MISSING", "INVALID_CONTEXT", "GENERAL"]),
    errorDetails: t.String(),
  },
  { title: "OfrepEvaluationFailure" },
);

export const OfrepBulkFailure = t.Object(
  { errorCode: ErrorCode(["PARSE_ERROR", "INVALID_CONTEXT", "GENERAL"]), errorDetails: t.String() },
  { title: "OfrepBulkEvaluationFailure" },
);

export const OfrepGeneralError = t.Object(
  { errorDetails: t.String({ description: "What went wrong (the 401, 403, 413, 429 or 500 of flagsvc's own API, as text)" }) },
  { title: "OfrepGeneralError" },
);

const EventStream = t.Object({
  type: t.Literal("sse"),
  endpoint: t.Object({
    requestUri: t.String({ description: "Path and query of the change stream, on the OFREP base URL's origin; the query carries a signed token, never the API key" }),
  }),
  inactivityDelaySec: t.Number({ minimum: 1, description: "Seconds a hidden page keeps the stream open (120)" }),
});

export const OfrepBulkSuccess = t.Object(
  {
    flags: t.Array(t.Union([OfrepSuccess, OfrepFailure]), { description: "Every flag of the key's environment, by key" }),
    eventStreams: t.Array(EventStream, { description: "The OFREP change stream (SSE) of this environment" }),
    metadata: t.Object({
      version: t.String({ description: "The change-log position of the environment's last change" }),
      environment: t.String({ description: "The environment evaluated in (the key's)" }),
    }),
  },
  { title: "OfrepBulkEvaluationSuccess" },
);

export const OfrepBulkQuery = t.Object({
  flagConfigEtag: t.Optional(t.String({ description: "From a change-stream message: the change it announced (`\"<position>\"`); a node that has not applied it yet waits for it, up to 2 s" })),
  flagConfigLastModified: t.Optional(t.String({ description: "From a change-stream message: when that change was made (Unix seconds or ISO 8601); a node whose last change of the environment is older waits for the next one, up to 2 s" })),
});
