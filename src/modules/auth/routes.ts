/** Login, logout, me: routes. */
import { Elysia } from "elysia";
import { noContent } from "../../http/schema";
import type { Principal } from "../../http/access";
import { accessGuard, clientAddress } from "../../http/auth";
import { iso } from "../../lib/clock";
import { User } from "../users/model";
import { LoginBody, LoginResult, SessionResult } from "./model";
import { SESSION_COOKIE } from "../../http/credentials";
import { HASH_QUEUE, HASH_SHARE, HASH_SLOTS, HashGate } from "./hash-gate";
import { login, LoginThrottle, type LoginDeps } from "./service";
import type { LoginRefusal, Tally } from "../metrics/counts";
import type { LoginFailureStore } from "./store";

const TAGS = ["Authentication"];

/** The user of a `session` route (the access table admits login tokens only). */
function sessionUser(p: Principal) {
  if (p.kind !== "user") throw new Error("session route reached without a login token");
  return p;
}

/**
 * The session cookie: the login token, out of scripts' reach (`HttpOnly`), over HTTPS only
 * (`Secure`: the server always is), never sent by a request another site starts
 * (`SameSite=Strict`), for the whole origin, until the token expires. `maxAge` 0 clears it.
 */
function sessionCookie(value: string, maxAge: number): string {
  return `${SESSION_COOKIE}=${value}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${maxAge}`;
}

const COOKIE_DOC =
  "The console's sign-in (docs/console.md). The cookie `" + SESSION_COOKIE + "` holds the login token (`HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=` the seconds until it expires); " +
  "every route that takes a login token takes the cookie too when no `Authorization` header is sent (evaluation, OFREP and definitions routes never read it). " +
  "A request signed in by the cookie with POST, PUT, PATCH or DELETE must carry `X-CSRF-Token: <csrfToken>` (an HMAC of the token's id with the server's secret), else 403 `FORBIDDEN` `Missing or invalid X-CSRF-Token` and nothing changes; requests with `Authorization` are not affected. ";

export interface AuthDeps extends LoginDeps {
  /** SVC_BEHIND_PROXY: the client address is the last X-Forwarded-For entry. */
  behindProxy: boolean;
  /** Refused logins by cause (`/metrics`: flagsvc_login_refused_total). */
  refused: Tally<LoginRefusal>;
  /** The failed logins of every node (the lockout). */
  failures: LoginFailureStore;
}

export const authRoutes = (deps: AuthDeps) => {
  const sessionOf = ({ id, email, role, jti, expiresAt }: ReturnType<typeof sessionUser>) => ({
    expiresAt: iso(expiresAt),
    user: { id, email, role },
    csrfToken: deps.credentials.csrfToken(jti),
  });
  const limits = { throttle: new LoginThrottle(deps.failures, deps.clock), gate: new HashGate(HASH_SLOTS, HASH_SHARE, HASH_QUEUE, deps.clock), refused: deps.refused };
  return new Elysia({ name: "flagsvc/auth" })
    .use(accessGuard())
    .post(
      "/v1/auth/login",
      async ({ body, request, server }) => {
        const client = clientAddress(request, server, deps.behindProxy);
        const { token, expiresAt, user } = await login(deps, limits, client, body);
        return { token, expiresAt: iso(expiresAt), user };
      },
      {
        body: LoginBody,
        response: { 200: LoginResult },
        detail: {
          tags: TAGS,
          summary: "Log in with email and password",
          description:
            "No credential needed. Returns a JWT (HS256, valid 1 hour, claims `sub`, `role`, `exp`, `iat`, `jti`) to send as `Authorization: Bearer <token>`. " +
            "Emails are compared lower-case. A wrong email and a wrong password get the same 401 `Invalid email or password` after the same work. " +
            "After 10 failed logins for one email within 15 minutes of the first, that email gets 429 `RATE_LIMITED` (with `retryAfter` and `Retry-After`; its X-RateLimit-* are the lockout's: limit 10, remaining 0, reset when it ends), even with the right password, until the 15 minutes have passed; a successful login clears the count. " +
            `Password checks are bounded: at most one per core at once (${limits.gate.slots} here), at most ${limits.gate.share} per client address running or waiting, and ${limits.gate.queueSize} waiting in all, served in turn by address. ` +
            "Past its share, an address gets at once 429 `RATE_LIMITED` `Too many logins in progress from this address; retry after 1 s` (`retryAfter: 1`, `Retry-After: 1`; X-RateLimit-Limit the share, Remaining 0, Reset one second on), and is refused so until it has waited that second (requests sooner do not move it: an address that hammers gets about one check a second), and with every place taken `Too many logins in progress; retry after 1 s` (X-RateLimit-Limit all places); neither counts as a failed login. " +
            "The address is the one the rate limit counts: the connection's, or behind a proxy (`SVC_BEHIND_PROXY`) the last `X-Forwarded-For` entry. The lockout is checked first.",
          security: [],
        },
      },
    )
    .post(
      "/v1/auth/session",
      async ({ body, request, server, set }) => {
        const client = clientAddress(request, server, deps.behindProxy);
        const { token, expiresAt, user, jti } = await login(deps, limits, client, body);
        set.headers["set-cookie"] = sessionCookie(token, Math.max(0, Math.floor((expiresAt - deps.clock.now()) / 1000)));
        return { expiresAt: iso(expiresAt), user, csrfToken: deps.credentials.csrfToken(jti) };
      },
      {
        body: LoginBody,
        response: { 200: SessionResult },
        detail: {
          tags: TAGS,
          summary: "Sign in with email and password (session cookie)",
          description:
            COOKIE_DOC +
            "No credential needed. The same checks, lockout (10 failed logins for one email within 15 minutes: 429 `RATE_LIMITED` until they have passed), throttle and answers as `POST /v1/auth/login`; " +
            "on success 200 `{expiresAt, user, csrfToken}` and the cookie: the token itself is never in the body. A cookie already sent is ignored here (no `X-CSRF-Token` needed to sign in again).",
          security: [],
        },
      },
    )
    .get(
      "/v1/auth/session",
      ({ principal }) => sessionOf(sessionUser(principal)),
      {
        access: "session",
        response: { 200: SessionResult },
        detail: {
          tags: TAGS,
          summary: "The current session",
          description:
            COOKIE_DOC +
            "The session cookie or a login token (`Authorization: Bearer`): `{expiresAt, user, csrfToken}`, the role as it is now. No cookie, or an expired or revoked one: 401 `UNAUTHORIZED` (the console then shows its sign-in page).",
        },
      },
    )
    .delete(
      "/v1/auth/session",
      async ({ principal, set, status }) => {
        const user = sessionUser(principal);
        await deps.credentials.revoke(user.jti, user.expiresAt);
        set.headers["set-cookie"] = sessionCookie("", 0);
        return status(204);
      },
      {
        access: "session",
        detail: {
          responses: noContent("Signed out: the token is revoked and the cookie cleared"),
          tags: TAGS,
          summary: "Sign out (revoke the session's token, clear the cookie)",
          description:
            COOKIE_DOC +
            "Revokes the session's login token as `POST /v1/auth/logout` does and clears the cookie (`Max-Age=0`): 204. Signed in by the cookie, it needs the `X-CSRF-Token` header.",
        },
      },
    )
    .post(
      "/v1/auth/logout",
      async ({ principal, status }) => {
        const user = sessionUser(principal);
        await deps.credentials.revoke(user.jti, user.expiresAt);
        return status(204);
      },
      {
        access: "session",
        detail: {
          responses: noContent("Logged out"),
          tags: TAGS,
          summary: "Log out (revoke this token)",
          description: "A login token only (API keys get 403 `This key scope does not have access to this endpoint`, admin keys 403 `This endpoint takes a login token (POST /v1/auth/login)`). The token is revoked until it would have expired: using it again gets 401 `Invalid or expired token`. Other tokens of the same user stay valid.",
        },
      },
    )
    .get(
      "/v1/auth/me",
      ({ principal }) => {
        const { id, email, role } = sessionUser(principal);
        return { id, email, role };
      },
      {
        access: "session",
        response: { 200: User },
        detail: {
          tags: TAGS,
          summary: "The logged-in user",
          description: "A login token only (API keys get 403 `This key scope does not have access to this endpoint`, admin keys 403 `This endpoint takes a login token (POST /v1/auth/login)`). Returns `{ id, email, role }`, the role as it is now (a changed role applies at once).",
        },
      },
    );
};
