/** Login users: routes (admin key or admin JWT). */
import { Elysia } from "elysia";
import { noContent } from "../../http/schema";
import { accessGuard, authorOf } from "../../http/auth";
import { NewUser, User, UserList, UserParams, UserPatch } from "./model";
import type { UserService } from "./service";

const TAGS = ["Users"];
const ADMIN_ONLY = "Admin key or a JWT with role admin.";
const AUDIT = "Recorded in the change log (resource `user`, key the email); the password and its hash never appear in it (a password change is `password: \"********\"`, `changed: true`).";

export const usersRoutes = (users: UserService) =>
  new Elysia({ name: "flagsvc/users" })
    .use(accessGuard())
    .get("/v1/users", async () => ({ users: await users.list() }), {
      access: "admin",
      response: { 200: UserList },
      detail: { tags: TAGS, summary: "List login users", description: `${ADMIN_ONLY} Ordered by email. A user is \`{ id, email, role }\`; passwords are never returned.` },
    })
    .post(
      "/v1/users",
      async ({ body, principal, set, status }) => status(201, await users.create(authorOf({ principal, set }), body)),
      {
        access: "admin",
        body: NewUser,
        response: { 201: User },
        detail: {
          tags: TAGS,
          summary: "Create a login user",
          description: `${ADMIN_ONLY} \`email\` is stored lower-case and must be unique (409 CONFLICT otherwise, in any case); \`password\` at least 10 characters, hashed with argon2id; \`role\` admin, editor or viewer. ${AUDIT}`,
        },
      },
    )
    .patch(
      "/v1/users/:userId",
      ({ params, body, principal, set }) => users.update(authorOf({ principal, set }), params.userId, body),
      {
        access: "admin",
        params: UserParams,
        body: UserPatch,
        response: { 200: User },
        detail: {
          tags: TAGS,
          summary: "Change a user's role or password",
          description:
            `${ADMIN_ONLY} An empty body (\`{}\`) changes nothing and answers the user. A new role applies at once, also to the user's existing login tokens. ` +
            "The last admin user cannot be demoted (409 CONFLICT). Changing the password ends the user's current sessions: login tokens issued before the change are refused (401). " +
            `A patch that changes nothing (the same role, no password) stores and records nothing. ${AUDIT}`,
        },
      },
    )
    .delete(
      "/v1/users/:userId",
      async ({ params, principal, set, status }) => {
        await users.delete(authorOf({ principal, set }), params.userId);
        return status(204);
      },
      {
        access: "admin",
        params: UserParams,
        detail: {
          responses: noContent("Deleted"),
          tags: TAGS,
          summary: "Delete a login user",
          description: `${ADMIN_ONLY} The user's login tokens stop working at once. The last admin user cannot be deleted (409 CONFLICT); a user may delete themselves when another admin remains. ${AUDIT}`,
        },
      },
    );
