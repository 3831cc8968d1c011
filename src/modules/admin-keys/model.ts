/** Admin keys: request and response schemas. */
import { t } from "elysia";

export const AdminKey = t.Object(
  {
    id: t.String({ description: "`key_<id>`" }),
    name: t.String(),
    keyPrefix: t.String({ description: "The first characters of the key (`svc_admin_` and 6 more), to recognise it" }),
    createdAt: t.String({ format: "date-time" }),
    lastUsedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  },
  { title: "AdminKey", additionalProperties: false },
);

export const NewAdminKeyResult = t.Object(
  {
    id: t.String(),
    name: t.String(),
    keyPrefix: t.String(),
    createdAt: t.String({ format: "date-time" }),
    lastUsedAt: t.Null(),
    key: t.String({ description: "The secret `svc_admin_` + 32 base62 characters; shown only in this response" }),
  },
  { title: "NewAdminKey", additionalProperties: false },
);

export const AdminKeyList = t.Object({ adminKeys: t.Array(AdminKey) }, { additionalProperties: false });

export const NAME_MAX = 100;
export const AdminKeyName = t.String({ minLength: 1, maxLength: NAME_MAX, error: `Expected a name of 1 to ${NAME_MAX} characters` });
/** What the service takes (routes and the CLI fill in the default name). */
export const NewAdminKey = t.Object({ name: AdminKeyName }, { additionalProperties: false });
/** The name a key created without one gets (over HTTP; `flagsvc admin create-key` uses "cli"). */
export const DEFAULT_ADMIN_KEY_NAME = "admin key";
/** POST /v1/admin-keys: the body, and its name, may be left out. */
export const NewAdminKeyBody = t.Optional(
  t.Object(
    { name: t.Optional({ ...AdminKeyName, description: `1 to ${NAME_MAX} characters; omitted: "${DEFAULT_ADMIN_KEY_NAME}"` }) },
    { additionalProperties: false, title: "NewAdminKeyRequest" },
  ),
);

export const AdminKeyParams = t.Object({ keyId: t.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
