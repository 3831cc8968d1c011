/**
 * Evaluation routes (api-spec: Evaluation; decisions §7), each declared once as a hot route
 * (src/http/native.ts): Bun's router serves them, the app's twins document them.
 */
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { hotRoute, type HotRoute } from "../../http/native";
import { EnvironmentParams } from "../projects/model";
import { BatchRequest, BatchResult, EvaluateRequest, EvaluationResult, isBatchRequest, isEvaluateRequest, MAX_BATCH_FLAGS, PathBatchRequest, PathEvaluateRequest } from "./model";
import type { PreviewService } from "./preview";
import { SESSION_HEADER, type EvaluationService } from "./service";

const TAGS = ["Evaluation"];

const COMMON = `Project and environment come from the API key (scope eval, test, full or client; a mgmt key gets 403 "This key scope does not have access to this endpoint" with \`details\` naming its scope and the scopes evaluation takes, an admin key or a login token 403 "Evaluation takes a project API key of scope eval, test, full or client"; no \`Authorization\` header at all, or a key sent without \`Bearer \`: 401 with \`details\` at \`headers.authorization\`). The answer is computed from memory: a flag or state change is visible from the next request on, including the very next one after the write's response.

Resolution order, first applicable step decides: (1) with a valid \`X-Service-Session\` token of the key's project whose session overrides this flag: the override, reason TEST_OVERRIDE (even for a key that does not exist; \`true\`/\`false\` set \`enabled\`, a string is served as the variant with \`enabled\` true); (2) the flag is disabled in the environment (or has no state there): FLAG_DISABLED; (3) only for a flag with \`prerequisites\` (docs/targeting.md): one is not met (that flag, evaluated for the same context, environment and session, is off or serves another variant than the one named): PREREQUISITE_FAILED, enabled false, variant null; (4) the first enabled targeting rule whose conditions all hold: TARGETING_RULE_MATCH with \`ruleId\`; (5) a rollout percentage is set: the user is bucketed by murmur3 of \`flagKey:userId\`, PERCENTAGE_ROLLOUT or PERCENTAGE_ROLLOUT_EXCLUDED (without a userId: included only at 100 %); (6) FLAG_ENABLED. A batch evaluates each flag on its own. Only \`context.userId\` is bucketed: \`user_id\`, \`id\` or \`targetingKey\` are ordinary attributes there (rules may match them), so a context without \`userId\` is excluded from a rollout under 100 % (PERCENTAGE_ROLLOUT_EXCLUDED, not an error), and where a weighted variant is picked for it, it gets the first variant. A flag key that does not exist in the project is not an error: 200 with enabled false and reason FLAG_NOT_FOUND.

Web pages of the origins listed in \`SVC_CORS_ORIGINS\` may call it (preflight, \`Access-Control-Allow-Origin\` on answers and errors, \`Vary: Origin\`). An unknown, expired or other project's session token is ignored. The answer's \`X-Flagsvc-Environment\` header names the environment evaluated in (the key's; the result object keeps the contract's fields). (OFREP answers TARGETING_KEY_MISSING where this API excludes a context without \`userId\`.) \`context\` values are strings, numbers, booleans, null or arrays of those; unknown body fields are a 400, \`environment\` among them: the API key chooses the environment (each key belongs to one; its 400 says so).`;

export const SESSION_PARAMETER = {
  in: "header",
  name: "X-Service-Session",
  required: false,
  description: "A test-session token (Testing API): the session's overrides apply to this request only",
  schema: { type: "string" as const },
};

export const sessionOf = (request: Request) => request.headers.get(SESSION_HEADER);

/** The two evaluation routes; web pages of `SVC_CORS_ORIGINS` may call them. */
export const evaluationRoutes = (service: EvaluationService): HotRoute[] => [
  hotRoute({
    method: "POST",
    path: "/v1/evaluate",
    access: "evaluate",
    body: EvaluateRequest,
    accepts: isEvaluateRequest,
    cors: true,
    environmentHeader: true,
    handle: (body, principal, request) => service.evaluateOne(principal, body, sessionOf(request)),
    doc: {
      response: { 200: EvaluationResult },
      detail: {
        tags: TAGS,
        summary: "Evaluate one flag",
        description: `Evaluates \`flagKey\` for \`context\`. ${COMMON}`,
        parameters: [SESSION_PARAMETER],
      },
    },
  }),
  hotRoute({
    method: "POST",
    path: "/v1/evaluate/batch",
    access: "evaluate",
    body: BatchRequest,
    accepts: isBatchRequest,
    cors: true,
    environmentHeader: true,
    handle: (body, principal, request) => service.evaluateBatch(principal, body, sessionOf(request)),
    doc: {
      response: { 200: BatchResult },
      detail: {
        tags: TAGS,
        summary: "Evaluate several flags",
        description: `Evaluates each key of \`flags\` (1 to ${MAX_BATCH_FLAGS}, counted as sent: ${MAX_BATCH_FLAGS + 1} entries are a 400 even when some repeat) for the one \`context\`. \`results\` has one entry per distinct key; every result and the top-level \`evaluatedAt\` carry the same time. ${COMMON}`,
        parameters: [SESSION_PARAMETER],
      },
    },
  }),
];

const AS_READER = `The answer is what \`/v1/evaluate\` (\`/v1/evaluate/batch\`) answers to an API key of this environment, computed by the same engine from the same snapshot: same resolution order, same fields, a flag key that does not exist is 200 with reason FLAG_NOT_FOUND, and an \`X-Service-Session\` token of this project applies its overrides (TEST_OVERRIDE). For people and tools that read the flags, not for applications (the console's playground evaluates here, with no API key of its own): it is not counted as traffic, so it changes neither insights, \`lastEvaluatedAt\`, staleness nor the evaluation metrics, and plugins and integrations do not receive it (docs/decisions.md, Evaluate as a reader). Access as for reading flags, although it is a POST: API keys of scope mgmt or full (their own project only: another project's slug is 403), admin keys, and login JWTs of every role, viewers included (by cookie, with the CSRF header, or bearer). Unknown project or environment: 404. \`environment\` in the body is a 400 (the path chooses it); other bad bodies are the 400s of \`/v1/evaluate\`.`;

/** Evaluation as a reader of the flags, in the environment the path names (preview.ts). */
export const previewRoutes = (preview: PreviewService) =>
  new Elysia({ name: "flagsvc/evaluate-as-reader" })
    .use(accessGuard())
    .post("/v1/projects/:slug/environments/:environment/evaluate", ({ params, body, request }) => preview.one(params.slug, params.environment, body, sessionOf(request)), {
      access: "evaluateAs",
      params: EnvironmentParams,
      body: PathEvaluateRequest,
      response: { 200: EvaluationResult },
      detail: {
        tags: TAGS,
        summary: "Evaluate one flag in an environment, as a reader",
        description: `Evaluates \`flagKey\` for \`context\` in this environment. ${AS_READER}`,
        parameters: [SESSION_PARAMETER],
      },
    })
    .post("/v1/projects/:slug/environments/:environment/evaluate/batch", ({ params, body, request }) => preview.batch(params.slug, params.environment, body, sessionOf(request)), {
      access: "evaluateAs",
      params: EnvironmentParams,
      body: PathBatchRequest,
      response: { 200: BatchResult },
      detail: {
        tags: TAGS,
        summary: "Evaluate several flags in an environment, as a reader",
        description: `Evaluates each key of \`flags\` (1 to ${MAX_BATCH_FLAGS}) for the one \`context\` in this environment; one result per distinct key, all with the same \`evaluatedAt\`. ${AS_READER}`,
        parameters: [SESSION_PARAMETER],
      },
    });
