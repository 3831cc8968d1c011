/** Login users: routes (admin key or admin JWT). */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { noContent } from "../../http/schema";
import { accessGuard } from "../../http/auth";
import { NewUser, User, UserList, UserParams, UserPatch } from "./model";
import { createUser, deleteUser, listUsers, updateUser } from "./service";

const TAGS = ["Users"];
const ADMIN_ONLY = "Admin key or a JWT with role admin.";

export const usersRoutes = (ctx: AppContext) =>
  new Elysia({ name: "flagsvc/users" })
    .use(accessGuard())
    .get("/v1/users", () => ({ users: listUsers(ctx) }), {
      access: "admin",
      response: { 200: UserList },
      detail: { tags: TAGS, summary: "List login users", description: `${ADMIN_ONLY} Ordered by email. A user is \`{ id, email, role }\`; passwords are never returned.` },
    })
    .post(
      "/v1/users",
      async ({ body, status }) => {
        const user = await createUser(ctx, ctx.clock, body);
        return status(201, user);
      },
      {
        access: "admin",
        body: NewUser,
        response: { 201: User },
        detail: {
          tags: TAGS,
          summary: "Create a login user",
          description: `${ADMIN_ONLY} \`email\` is stored lower-case and must be unique (409 CONFLICT otherwise, in any case); \`password\` at least 10 characters, hashed with argon2id; \`role\` admin, editor or viewer.`,
        },
      },
    )
    .patch(
      "/v1/users/:userId",
      async ({ params, body }) => {
        const user = await updateUser(ctx, ctx.clock, params.userId, body);
        return user;
      },
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
            "The last admin user cannot be demoted (409 CONFLICT). Changing the password ends the user's current sessions: login tokens issued before the change are refused (401).",
        },
      },
    )
    .delete(
      "/v1/users/:userId",
      ({ params, status }) => {
        deleteUser(ctx, params.userId);
        return status(204);
      },
      {
        access: "admin",
        params: UserParams,
        detail: {
          responses: noContent("Deleted"),
          tags: TAGS,
          summary: "Delete a login user",
          description: `${ADMIN_ONLY} The user's login tokens stop working at once. The last admin user cannot be deleted (409 CONFLICT); a user may delete themselves when another admin remains.`,
        },
      },
    );
