/** Project API keys: routes (decisions §4). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent } from "../../http/schema";
import { validationError } from "../../http/errors";
import { ProjectParams } from "../projects/model";
import { ApiKeyList, ApiKeyWithSecret, KeyParams, MAX_GRACE_SECONDS, NewApiKey, RotateBody } from "./model";
import type { ApiKeyService } from "./service";

const TAGS = ["API keys"];
const AUDIT = "Recorded in the change log (resource `api_key`, key the name); the secret and its hash never appear in it.";
const WHO =
  "mgmt and full keys (their own project only), admin keys, login JWTs (read: any role; write: admin and editor). A mgmt key cannot create, rotate or delete full keys (403 FORBIDDEN).";

export const apiKeysRoutes = (apiKeys: ApiKeyService) =>
  new Elysia({ name: "flagsvc/api-keys" })
    .use(accessGuard())
    .get("/v1/projects/:slug/api-keys", async ({ params }) => ({ apiKeys: await apiKeys.list(params.slug) }), {
      access: "apiKeys",
      params: ProjectParams,
      response: { 200: ApiKeyList },
      detail: {
        tags: TAGS,
        summary: "List a project's API keys",
        description: `Oldest first. Never includes the secret \`key\`. \`lastUsedAt\` is the last authenticated use (null: never). Who: ${WHO}`,
      },
    })
    .post(
      "/v1/projects/:slug/api-keys",
      async ({ params, body, principal, set, status }) => status(201, await apiKeys.create(authorOf({ principal, set }), principal, params.slug, body)),
      {
        access: "apiKeys",
        params: ProjectParams,
        body: NewApiKey,
        response: { 201: ApiKeyWithSecret },
        detail: {
          tags: TAGS,
          summary: "Create an API key",
          description: `\`name\` 1 to 200 characters; \`scope\` eval, test, mgmt, full or client (the key a web page may carry: evaluation and OFREP only); \`environment\` the slug of one of the project's environments (an unknown one is 400 VALIDATION_ERROR at \`body.environment\`). The key \`svc_sk_{scope}_\` + 32 base62 characters is in this response only; the service keeps its SHA-256. It works from the next request on. ${AUDIT} Who: ${WHO}`,
        },
      },
    )
    .post(
      "/v1/api-keys/:keyId/rotate",
      ({ params, body, principal, set }) => {
        const raw = body as unknown;
        if (raw !== undefined && raw !== null && (typeof raw !== "object" || Array.isArray(raw))) {
          throw validationError("Invalid request", [{ path: "body", message: "Expected object" }]);
        }
        return apiKeys.rotate(authorOf({ principal, set }), principal, params.keyId, body?.gracePeriodSeconds ?? 0);
      },
      {
        access: "apiKeys",
        params: KeyParams,
        body: RotateBody,
        response: { 200: ApiKeyWithSecret },
        detail: {
          tags: TAGS,
          summary: "Rotate an API key",
          description: `Issues a new secret for the same key (id, name, scope and environment stay); the new \`key\` is in this response only. Optional body \`{ "gracePeriodSeconds": 0..${MAX_GRACE_SECONDS} }\` (default 0): the old secret keeps working for that long, then 401; with 0 it is refused at once. Rotating again ends any earlier grace: only the secret just replaced stays valid. API-key callers may only rotate keys of their own project (403). Unknown key 404. ${AUDIT} (Action \`rotated\`: \`keyHash\` masked, \`keyPrefix\`, and \`previousExpiresAt\` with a grace period.) Who: ${WHO}`,
        },
      },
    )
    .delete(
      "/v1/api-keys/:keyId",
      async ({ params, principal, set, status }) => {
        await apiKeys.delete(authorOf({ principal, set }), principal, params.keyId);
        return status(204);
      },
      {
        access: "apiKeys",
        params: KeyParams,
        detail: {
          tags: TAGS,
          summary: "Delete (revoke) an API key",
          responses: noContent("Deleted"),
          description: `The key is refused (401) from the next request on, including any rotated-out secret still in its grace period. API-key callers may only delete keys of their own project (403); a key may delete itself. Unknown key 404. ${AUDIT} Who: ${WHO}`,
        },
      },
    );
