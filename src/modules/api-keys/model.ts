/** Project API keys: request and response schemas (decisions §4). */
import { t } from "elysia";
import { SCOPES } from "../../http/access";
import { BodyInt } from "../../http/schema";

export const MAX_GRACE_SECONDS = 86_400;
export const KEY_NAME_MAX = 200;

/** SCOPES as a schema (a tuple of literals: the static type is the union of the scopes). */
const scopeUnion = (options?: Parameters<typeof t.Union>[1]) =>
  t.Union([t.Literal(SCOPES[0]), t.Literal(SCOPES[1]), t.Literal(SCOPES[2]), t.Literal(SCOPES[3]), t.Literal(SCOPES[4])], options);

const ScopeValue = scopeUnion({
  description: "eval, test, mgmt, full, or client: the key a web page may carry (evaluation and OFREP only; never the flags' rules)",
  error: `Must be one of ${SCOPES.join(", ")}`,
});

const KeyFields = {
  id: t.String({ description: "key_..." }),
  name: t.String(),
  scope: scopeUnion(),
  environment: t.String({ description: "Slug of the environment the key is bound to" }),
  projectId: t.String({ description: "proj_..." }),
  keyPrefix: t.String({ description: "The first characters of the key (`svc_sk_{scope}_` and 6 more), to recognise it" }),
  createdAt: t.String({ format: "date-time" }),
  lastUsedAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "Last authenticated use; null when never used" }),
};

export const ApiKey = t.Object(KeyFields, { title: "ApiKey" });

export const ApiKeyWithSecret = t.Object(
  { ...KeyFields, key: t.String({ description: "The secret `svc_sk_{scope}_` + 32 base62 characters. Shown only in this response: only its SHA-256 is stored." }) },
  { title: "ApiKeyWithSecret" },
);

export const ApiKeyList = t.Object({ apiKeys: t.Array(ApiKey) }, { title: "ApiKeyList" });

export const NewApiKey = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: KEY_NAME_MAX, error: `Must be a string of 1 to ${KEY_NAME_MAX} characters` }),
    scope: ScopeValue,
    environment: t.String({ minLength: 1, description: "Slug of an environment of the project" }),
  },
  { additionalProperties: false, title: "NewApiKey" },
);

export const RotateBody = t.Optional(
  t.Object(
    {
      gracePeriodSeconds: t.Optional(
        BodyInt({
          minimum: 0,
          maximum: MAX_GRACE_SECONDS,
          default: 0,
          description: "How long the old secret keeps working, 0 to 86400 seconds (default 0: refused at once)",
          error: `Must be an integer from 0 to ${MAX_GRACE_SECONDS}`,
        }),
      ),
    },
    { additionalProperties: false, title: "RotateApiKey" },
  ),
);

export const KeyParams = t.Object({ keyId: t.String({ description: "key_..." }) });
