/** Testing API: isolated test sessions with per-flag overrides (api-spec: Testing API; decisions §7, §8, §9). */
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { editionGuard, PRO_ONLY_NOTE } from "../../http/edition";
import { noContent } from "../../http/schema";
import {
  DEFAULT_TTL_SECONDS,
  LABEL_MAX,
  MAX_OVERRIDES,
  MAX_TTL_SECONDS,
  MIN_TTL_SECONDS,
  NewSession,
  OverrideParams,
  PutOverride,
  PutOverrides,
  Session,
  SessionList,
  SessionListQuery,
  SessionOverrides,
  SessionParams,
} from "./model";
import type { Config } from "../../config";
import type { TestingService } from "./service";

const TAGS = ["Testing"];
const WHO =
  'API keys of scope test or full, for their own project (eval and mgmt keys: 403 FORBIDDEN "This key scope does not have access to this endpoint"; admin keys: 403 FORBIDDEN "The Testing API takes a project API key of scope test or full"); login JWTs as for flags, for every project (the console): every role reads, editor and admin write (a viewer\'s write: 403 "The role viewer does not have access to this endpoint"); with a login JWT `projectId` names any project by id or slug (unknown: 404) and is required on the list (400)';
const SESSION_RULES =
  "A session belongs to the key's project: another project's session is 403 FORBIDDEN; an unknown, destroyed or expired session is 404 NOT_FOUND (a session is gone from the instant `expiresAt` is reached, whether or not the hourly clean-up has run yet).";
const VALUES =
  "Values: `true`/`false` for boolean flags (the result's `enabled`, variant null), or a variant key (1 to 64 characters of A-Z, a-z, 0-9, _ or -) for multi-variant flags (served as `variant` with `enabled` true; it is not checked against the flag's variants). Keys are flag keys (kebab-case, 1 to 128 characters); the flag need not exist: an override wins over FLAG_NOT_FOUND.";
const NOT_AUDITED = "Test data: not recorded in the audit log.";
const CAP = `At most ${MAX_OVERRIDES} overrides a session: a write that would go past it is 400 VALIDATION_ERROR and changes nothing.`;

export const testingRoutes = (testing: TestingService, config: Pick<Config, "edition">) =>
  new Elysia({ name: "flagsvc/testing" })
    .use(accessGuard())
    .use(editionGuard(config))
    .post("/v1/testing/sessions", async ({ principal, body, status }) => status(201, await testing.create(principal, body)), {
      access: "testing",
      body: NewSession,
      response: { 201: Session },
      detail: {
        tags: TAGS,
        summary: "Create a test session",
        description: `Creates an isolated test session with no overrides. Evaluation requests of the same project that carry its \`token\` in \`X-Service-Session\` get the session's overrides (reason TEST_OVERRIDE), in every environment of the project and with any evaluation key of it; requests without the token are never affected. \`projectId\`: the key's own project, by id (\`proj_...\`) or slug; any other value, an unknown project included, is 403 FORBIDDEN (with a login JWT: any project, unknown 404). \`label\`: optional, at most ${LABEL_MAX} characters; null or omitted: none (then absent from the answer). \`ttl\` (seconds): Pro honours an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS} (anything else is 400), default ${DEFAULT_TTL_SECONDS}; CE ignores it and always uses ${DEFAULT_TTL_SECONDS}, though a non-number is still 400. \`expiresAt\` = \`createdAt\` + ttl. \`token\`: on CE equal to \`id\`; on Pro a separate random secret (\`svc_sess_...\`), so that the id can be shared without granting override power. Both are returned here and by GET. Sessions and overrides survive restarts. ${NOT_AUDITED} Checks in order: 403 for another project, then 400 for the ttl. ${WHO}.`,
      },
    })
    .get("/v1/testing/sessions", ({ principal, query }) => testing.list(principal, query.projectId), {
      access: "testing",
      query: SessionListQuery,
      response: { 200: SessionList },
      detail: {
        tags: TAGS,
        summary: "List test sessions",
        description: `\`{ sessions }\`: the project's live sessions (neither destroyed nor expired: a session leaves the list at the instant \`expiresAt\` is reached), each as \`GET /v1/testing/sessions/{id}\` answers it, token and overrides included (on CE the token is the id; on Pro it is the secret GET on one session also answers to the same keys), ordered by \`createdAt\`, oldest first (the same millisecond: by id). Not paged. \`projectId\`: the key's own project, by id or slug, as on create (any other value, an unknown project included, is 403 FORBIDDEN); omitted, the key's project; empty, 400. Both editions. ${WHO}.`,
      },
    })
    .get("/v1/testing/sessions/:id", ({ principal, params }) => testing.get(principal, params.id), {
      access: "testing",
      params: SessionParams,
      response: { 200: Session },
      detail: {
        tags: TAGS,
        summary: "Get a test session",
        description: `The session with its token and all its overrides. ${SESSION_RULES} ${WHO}.`,
      },
    })
    .delete(
      "/v1/testing/sessions/:id",
      async ({ principal, params, status }) => {
        await testing.delete(principal, params.id);
        return status(204);
      },
      {
        access: "testing",
        params: SessionParams,
        detail: {
          tags: TAGS,
          summary: "Destroy a test session",
          responses: noContent("Destroyed with its overrides"),
          description: `Destroys the session and its overrides, at once: from the next request on, evaluations carrying its token resolve normally, and its endpoints answer 404. ${SESSION_RULES} ${WHO}.`,
        },
      },
    )
    // Declared before `/:flagKey`: `PUT .../overrides/batch` is always the batch endpoint, also on CE.
    .put("/v1/testing/sessions/:id/overrides/batch", ({ principal, params, body }) => testing.putOverrides(principal, params.id, body.overrides), {
      access: "testing",
      edition: "pro",
      params: SessionParams,
      body: PutOverrides,
      response: { 200: SessionOverrides },
      detail: {
        tags: TAGS,
        summary: "Set several overrides (Pro)",
        description: `\`{ "overrides": { flagKey: value, ... } }\`, at least one entry, merged into the session's overrides: each key sent is set (replacing its earlier value), every other override stays. It never removes anything: to clear all overrides, destroy the session and create a new one. All or nothing: a bad value, a bad key or going past the cap refuses the whole request and changes nothing (\`details\` lists every bad value, or, when the values are right, every bad key). Answers the session's whole map. ${VALUES} ${CAP} This path is always the batch endpoint: to override a flag whose key is \`batch\`, send it in this body. ${SESSION_RULES} ${WHO}. ${PRO_ONLY_NOTE} On CE set overrides one at a time with \`PUT .../overrides/{flagKey}\`.`,
      },
    })
    .put("/v1/testing/sessions/:id/overrides/:flagKey", ({ principal, params, body }) => testing.putOverride(principal, params.id, params.flagKey, body.value), {
      access: "testing",
      params: OverrideParams,
      body: PutOverride,
      response: { 200: SessionOverrides },
      detail: {
        tags: TAGS,
        summary: "Set one override",
        description: `\`{ "value": true | false | "variant-key" }\` for the flag \`flagKey\`, replacing any earlier value of it. Answers the session's whole map. The very next evaluation with the session's token sees it. ${NOT_AUDITED} ${VALUES} ${CAP} ${SESSION_RULES} ${WHO}.`,
      },
    })
    .delete(
      "/v1/testing/sessions/:id/overrides/:flagKey",
      async ({ principal, params, status }) => {
        await testing.deleteOverride(principal, params.id, params.flagKey);
        return status(204);
      },
      {
        access: "testing",
        params: OverrideParams,
        detail: {
          tags: TAGS,
          summary: "Remove one override",
          responses: noContent("The flag is no longer overridden in this session (also when it was not)"),
          description: `The flag evaluates normally again for this session's token from the next request on. 204 whether or not the session had an override for it; \`flagKey\` must still be a flag key (kebab-case, else 400). There is no batch delete: \`DELETE .../overrides/batch\` removes the override of a flag whose key is \`batch\`. ${SESSION_RULES} ${WHO}.`,
        },
      },
    );
