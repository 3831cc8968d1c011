/**
 * OFREP v0.3.0 routes (docs/openfeature.md), hot routes as the evaluation routes are
 * (src/http/native.ts): the same admission, access (scope eval, test or full, the key's project
 * and environment), session overrides and CORS; the key may come as `X-API-Key` too; every
 * failure answers in OFREP's shapes.
 */
import type { ApiError } from "../../http/errors";
import { hotRoute, type HotRoute, type Params } from "../../http/native";
import { SESSION_PARAMETER, sessionOf } from "../evaluation/routes";
import { OfrepBulkFailure, OfrepBulkQuery, OfrepBulkSuccess, OfrepFailure, OfrepGeneralError, OfrepRequest, OfrepSuccess } from "./model";
import { EVENTS_PATH } from "../streams/tokens";
import { OfrepError, type OfrepService } from "./service";

const TAGS = ["OpenFeature (OFREP)"];

const COMMON = `OFREP v0.3.0, as OpenFeature's stock OFREP providers speak it. Credential: \`Authorization: Bearer <key>\` or \`X-API-Key: <key>\`, a project API key of scope eval, test or full; its project and environment are evaluated (named in \`metadata.environment\` and the \`X-Flagsvc-Environment\` header). \`context.targetingKey\` is flagsvc's \`userId\`; the other attributes are the context the rules read. \`X-Service-Session\` overrides apply (reason STATIC, metadata.reason TEST_OVERRIDE). A boolean flag's \`value\` is whether it is on; a multi-variant flag's is the served variant's key, and when it serves none (disabled, excluded) \`value\` is absent: the application's code default applies. \`reason\` maps flagsvc's: TEST_OVERRIDE → STATIC, FLAG_DISABLED → DISABLED, TARGETING_RULE_MATCH and PREREQUISITE_FAILED (a prerequisite not met: off, no value) → TARGETING_MATCH, PERCENTAGE_ROLLOUT and PERCENTAGE_ROLLOUT_EXCLUDED → SPLIT, FLAG_ENABLED → STATIC (SPLIT when weights pick the variant, DEFAULT past rules that did not match); \`metadata\` keeps flagsvc's \`reason\` and \`ruleId\`. A result that depends on bucketing (a rollout under 100 %, a weighted variant) without a targeting key is TARGETING_KEY_MISSING. Errors: 400 PARSE_ERROR (not JSON), INVALID_CONTEXT (a context or attribute that is not a string, number, boolean, null or an array of those), GENERAL; 401 and 403 (\`{ errorDetails }\`); 429 with \`Retry-After\` (seconds). Web pages of the origins listed in \`SVC_CORS_ORIGINS\` may call it (preflight, \`Access-Control-Allow-Origin\` on answers and errors, \`Vary: Origin\`).`;

/** OFREP's error code for one of flagsvc's 400s: the body's syntax, the context, or anything else. */
function codeOf(error: ApiError): "PARSE_ERROR" | "INVALID_CONTEXT" | "GENERAL" {
  const path = error.details?.[0]?.path ?? "";
  if (path === "body" || path === "headers.content-type") return "PARSE_ERROR";
  return path.startsWith("body.context") ? "INVALID_CONTEXT" : "GENERAL";
}

/** flagsvc's failure as text: its message and each detail. */
const detailsOf = (error: ApiError) => [error.message, ...(error.details ?? []).map((d) => `${d.path}: ${d.message}`)].join("; ");

/** Any failure in OFREP's shape: a flag's own, a 400 as an OFREP error code, else `{ errorDetails }`. */
const failure =
  (single: boolean) =>
  (error: ApiError, params: Params): unknown => {
    if (error instanceof OfrepError) return error.ofrep;
    if (error.status !== 400) return { errorDetails: detailsOf(error) };
    const body = { errorCode: codeOf(error), errorDetails: detailsOf(error) };
    return single ? { key: params.key ?? "", ...body } : body;
  };

const REFUSALS = { 401: OfrepGeneralError, 403: OfrepGeneralError, 429: OfrepGeneralError };

export const ofrepRoutes = (service: OfrepService): HotRoute[] => [
  hotRoute({
    method: "POST",
    path: "/ofrep/v1/evaluate/flags/:key",
    access: "evaluate",
    body: OfrepRequest,
    cors: true,
    apiKeyHeader: true,
    environmentHeader: true,
    failure: failure(true),
    handle: (body, principal, request, params) => service.evaluateFlag(principal, params.key!, body, sessionOf(request)),
    doc: {
      response: { 200: OfrepSuccess, 400: OfrepFailure, 404: OfrepFailure, ...REFUSALS },
      detail: {
        tags: TAGS,
        summary: "Evaluate one flag (OFREP)",
        description: `Evaluates the flag \`key\` for \`context\`; a key that names no flag of the project is 404 FLAG_NOT_FOUND. ${COMMON}`,
        parameters: [SESSION_PARAMETER],
      },
    },
  }),
  hotRoute({
    method: "POST",
    path: "/ofrep/v1/evaluate/flags",
    access: "evaluate",
    body: OfrepRequest,
    cors: true,
    apiKeyHeader: true,
    environmentHeader: true,
    failure: failure(false),
    handle: (body, principal, request) => service.bulk(principal, body, sessionOf(request), request),
    doc: {
      response: { 200: OfrepBulkSuccess, 400: OfrepBulkFailure, ...REFUSALS },
      detail: {
        tags: TAGS,
        summary: "Evaluate every flag (OFREP bulk)",
        description: `Evaluates every flag of the key's environment, sorted by key; a flag's own failure (TARGETING_KEY_MISSING) is an entry of \`flags\`. The answer carries a strong \`ETag\`; \`If-None-Match\` with it answers 304 while nothing this context sees has changed. \`eventStreams\` points at the environment's change stream (\`GET ${EVENTS_PATH}?token=…\`, server-sent events): its \`refetchEvaluation\` messages carry the \`etag\` and \`lastModified\` that a refetch sends back as \`flagConfigEtag\`/\`flagConfigLastModified\`. ${COMMON}`,
        parameters: [
          SESSION_PARAMETER,
          { in: "header", name: "If-None-Match", required: false, description: "The ETag of an earlier answer: 304 while it still holds", schema: { type: "string" } },
          ...Object.entries(OfrepBulkQuery.properties).map(([name, schema]) => ({ in: "query", name, required: false, description: schema.description, schema: { type: "string" } })),
        ],
      },
    },
  }),
];
