/** Login, logout, me: request and response schemas. */
import { t } from "elysia";
import { User } from "../users/model";

export const LoginBody = t.Object(
  {
    email: t.String({ minLength: 1, maxLength: 254, description: "Compared lower-case" }),
    password: t.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false, title: "Login" },
);

export const LoginResult = t.Object(
  {
    token: t.String({ description: "JWT (HS256), claims sub, role, exp, iat, jti; valid one hour" }),
    expiresAt: t.String({ format: "date-time" }),
    user: User,
  },
  { additionalProperties: false, title: "LoginResult" },
);

export const SessionResult = t.Object(
  {
    expiresAt: t.String({ format: "date-time", description: "When the session (its login token) expires" }),
    user: User,
    csrfToken: t.String({ description: "Send as `X-CSRF-Token` with every POST, PUT, PATCH and DELETE that the cookie signs in" }),
  },
  { additionalProperties: false, title: "Session" },
);
