/** Login users: request and response schemas. */
import { t } from "elysia";

/** `something@something`, no spaces inside (as SVC_ADMIN_EMAIL); trimmed, stored lower-case. */
export const EMAIL_PATTERN = "^\\s*[^\\s@]+@[^\\s@]+\\s*$";
export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 1024;

export const Role = t.Union(
  [t.Literal("admin"), t.Literal("editor"), t.Literal("viewer")],
  { description: "admin: everything an admin key may do; editor: flags, states, webhooks, API keys; viewer: read-only", error: "Expected admin, editor or viewer" },
);

export const Email = t.String({ pattern: EMAIL_PATTERN, maxLength: 254, description: "Trimmed; compared and stored lower-case", error: "Expected an email address" });
export const Password = t.String({
  minLength: PASSWORD_MIN,
  maxLength: PASSWORD_MAX,
  description: `At least ${PASSWORD_MIN} characters; stored as an argon2id hash, never returned`,
  error: `Expected a password of ${PASSWORD_MIN} to ${PASSWORD_MAX} characters`,
});

export const User = t.Object(
  {
    id: t.String({ description: "`usr_<id>`" }),
    email: t.String(),
    role: Role,
  },
  { title: "User", additionalProperties: false },
);

export const UserList = t.Object({ users: t.Array(User) }, { additionalProperties: false });

export const NewUser = t.Object({ email: Email, password: Password, role: Role }, { additionalProperties: false, title: "NewUser" });

/** `flagsvc admin reset-password`: the user by email, and the new password. */
export const PasswordReset = t.Object({ email: Email, password: Password }, { additionalProperties: false });

export const UserPatch = t.Object(
  { role: t.Optional(Role), password: t.Optional(Password) },
  { additionalProperties: false, title: "UserPatch", description: "At least one of role and password (an empty body is a 400)" },
);

export const UserParams = t.Object({ userId: t.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
