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
export const NewAdminKey = t.Object({ name: AdminKeyName }, { additionalProperties: false, title: "NewAdminKeyRequest" });

export const AdminKeyParams = t.Object({ keyId: t.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
