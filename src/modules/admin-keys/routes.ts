/** Admin keys: routes (admin key or admin JWT). */
import { Elysia } from "elysia";
import { noContent } from "../../http/schema";
import { accessGuard, authorOf } from "../../http/auth";
import { AdminKeyList, AdminKeyParams, DEFAULT_ADMIN_KEY_NAME, NewAdminKeyBody, NewAdminKeyResult } from "./model";
import type { AdminKeyService } from "./service";

const TAGS = ["Admin keys"];
const ADMIN_ONLY = "Admin key or a JWT with role admin.";
const AUDIT = "Recorded in the change log (resource `admin_key`, key the name); the secret and its hash never appear in it.";

export const adminKeysRoutes = (adminKeys: AdminKeyService) =>
  new Elysia({ name: "flagsvc/admin-keys" })
    .use(accessGuard())
    .get("/v1/admin-keys", async () => ({ adminKeys: await adminKeys.list() }), {
      access: "admin",
      response: { 200: AdminKeyList },
      detail: {
        tags: TAGS,
        summary: "List admin keys",
        description: `${ADMIN_ONLY} Oldest first. The secret is never listed, only \`keyPrefix\`. \`lastUsedAt\` is null for a key never used.`,
      },
    })
    .post(
      "/v1/admin-keys",
      async ({ body, principal, set, status }) => status(201, await adminKeys.create(authorOf({ principal, set }), { name: body?.name ?? DEFAULT_ADMIN_KEY_NAME })),
      {
        access: "admin",
        body: NewAdminKeyBody,
        response: { 201: NewAdminKeyResult },
        detail: {
          tags: TAGS,
          summary: "Create an admin key",
          description: `${ADMIN_ONLY} Optional body \`{ "name": 1 to 100 characters }\` (omitted: \`"${DEFAULT_ADMIN_KEY_NAME}"\`). The response's \`key\` (\`svc_admin_\` + 32 base62 characters) is shown only here; only its SHA-256 is stored. The key works at once. ${AUDIT}`,
        },
      },
    )
    .delete(
      "/v1/admin-keys/:keyId",
      async ({ params, principal, set, status }) => {
        await adminKeys.delete(authorOf({ principal, set }), params.keyId);
        return status(204);
      },
      {
        access: "admin",
        params: AdminKeyParams,
        detail: {
          responses: noContent("Deleted"),
          tags: TAGS,
          summary: "Delete (revoke) an admin key",
          description:
            `${ADMIN_ONLY} The key gets 401 at once. A key may delete itself. ` +
            "The last admin key can be deleted only while an admin user exists (409 CONFLICT otherwise), so the instance always keeps a way in. " +
            AUDIT,
        },
      },
    );
