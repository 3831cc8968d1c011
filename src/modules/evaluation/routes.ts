/**
 * Evaluation routes (api-spec: Evaluation; decisions §7), each declared once as a hot route
 * (src/http/native.ts): Bun's router serves them, the app's twins document them.
 */
import { hotRoute, type HotRoute } from "../../http/native";
import { BatchRequest, BatchResult, EvaluateRequest, EvaluationResult, isBatchRequest, isEvaluateRequest, MAX_BATCH_FLAGS } from "./model";
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
