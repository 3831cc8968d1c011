/**
 * Authentication and rate limiting for every request, authorization per route.
 * - `admit` runs first in the pipeline for every request: it resolves the credential (memory
 *   only), counts the request against its limit and sets the X-RateLimit-* headers, so they
 *   are on every response, errors included. Without a valid credential the caller is limited
 *   per client address as `anonymous`.
 * - `accessGuard` gives routes the option `{ access: group }`; the table in access.ts decides.
 */
import type { Server } from "bun";
import { Elysia } from "elysia";
import type { RateLimitKind } from "../config";
import type { AppContext } from "../context";
import { actorOf, type Author } from "../changes/entry";
import { decide, type AccessGroup, type Principal } from "./access";
import { SESSION_COOKIE, type Resolution } from "./credentials";
import { sameSecret } from "../lib/secrets";
import { ApiError, UnreadBody } from "./errors";

/** What admission leaves on the request's context (src/http/pipeline.ts). */
interface AuthState {
  auth: Resolution;
}

/**
 * The author of a guarded route's write, for its change-log entry: the caller and the request
 * id (`X-Request-Id`, which the pipeline set on the response). Handlers name the parts of the
 * context they use (`({ principal, set, ... })`): Elysia reads a handler's source, and one that
 * takes the whole context gets everything parsed for it, cookies included, on every request.
 */
export function authorOf({ principal, set }: { principal: Principal; set: { headers: Record<string, unknown> } }): Author {
  const requestId = set.headers["x-request-id"];
  return { actor: actorOf(principal), requestId: typeof requestId === "string" ? requestId : null };
}

/** Set by admission on every response (decisions §13). */
export const RATE_LIMIT_HEADERS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"] as const;

function limitOf(principal: Principal | null): RateLimitKind {
  if (principal === null) return "anonymous";
  return principal.kind === "apiKey" ? principal.scope : principal.kind === "adminKey" ? "admin" : "user";
}

export function admitter(ctx: AppContext) {
  const { credentials, limiter, requestClock: clock } = ctx;
  const behindProxy = ctx.config.behindProxy;
  const admit = (auth: Resolution, request: Request, headers: Record<string, unknown>, server: Server<unknown> | null, now: number): Resolution => {
    const principal = auth.principal;
    const meter =
      auth.meter !== null
        ? limiter.hit(auth.meter, now)
        : limiter.hitNamed(limitOf(principal), principal ? principal.id : `ip:${clientAddress(request, server, behindProxy)}`, now);
    const { count, limit } = meter;
    headers["x-ratelimit-limit"] = meter.limitText;
    // A number, turned into text natively when the Response is built: a string made here would
    // be one more garbage-collected object per request (measurably slower under load).
    headers["x-ratelimit-remaining"] = count >= limit ? 0 : limit - count;
    headers["x-ratelimit-reset"] = limiter.resetText;
    if (count > limit) {
      const retryAfter = limiter.retryAfter(now);
      throw new ApiError(
        429,
        "RATE_LIMITED",
        `Rate limit exceeded: ${limit} requests a minute; retry after ${retryAfter} s`,
        undefined,
        { "retry-after": String(retryAfter) },
        { retryAfter },
      );
    }
    return auth;
  };
  // The callback for a login token's promise is made in a function of its own: a closure written
  // in the function below would make every call, a key's too, allocate a scope for it.
  const admitLater = (auth: Promise<Resolution>, request: Request, headers: Record<string, unknown>, server: Server<unknown> | null, now: number) =>
    auth.then((a) => admit(a, request, headers, server, now));
  // A request without `Authorization` may be a change stream's connect, whose URL carries a
  // stream token (an EventSource sends no headers): counted against the token's key, so that
  // the browsers of one network do not share their address's anonymous limit.
  const { streamTokens } = ctx;
  const streamKey = (request: Request, now: number): Resolution | undefined => {
    const grant = streamTokens.grantOfUrl(request.url, now);
    return grant === null ? undefined : credentials.resolveStream(grant, now);
  };
  /**
   * `authorization`: the credential as an `Authorization` value, given by the hot routes
   * (evaluation, OFREP: OFREP's `X-API-Key` too), which never read cookies. Left out (the
   * pipeline), it is the request's header, and without one the session cookie (docs/console.md),
   * except on the routes that take API keys only (`readsSessionCookie`).
   */
  return (request: Request, headers: Record<string, unknown>, server: Server<unknown> | null, authorization?: string | null): Resolution | Promise<Resolution> => {
    const now = clock.now();
    if (authorization === undefined) {
      authorization = request.headers.get("authorization");
      const session = authorization === null ? sessionCookie(request) : null;
      if (session !== null) return admitLater(credentials.resolveSession(session), request, headers, server, now);
    }
    let auth = credentials.resolve(authorization, now);
    if (auth instanceof Promise) return admitLater(auth, request, headers, server, now);
    if (auth.failure === "missing") auth = streamKey(request, now) ?? auth;
    return admit(auth, request, headers, server, now);
  };
}

/** Paths whose routes take API keys only (evaluation, OFREP, definitions): the session cookie is never read there. */
const KEYS_ONLY = /^\/(?:ofrep\/|v1\/evaluate(?:\/|$)|v1\/definitions(?:\/|$))/;

/**
 * The session cookie's value (a login token), or null: none sent, or the request goes to a
 * route that takes API keys only. The `Cookie` header is scanned by hand: only requests that
 * carry one pay anything.
 */
function sessionCookie(request: Request): string | null {
  const header = request.headers.get("cookie");
  if (header === null) return null;
  const value = cookieValue(header, SESSION_COOKIE);
  if (value === null || value === "") return null;
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  return KEYS_ONLY.test(start < 0 ? "/" : url.slice(start)) ? null : value;
}

/** The value of the cookie `name` in a `Cookie` header (`a=1; b=2`), or null. */
export function cookieValue(header: string, name: string): string | null {
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/** Methods that change something: a cookie's request must carry the CSRF token for them. */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
export const CSRF_MESSAGE = "Missing or invalid X-CSRF-Token";

/**
 * A request signed in by the session cookie (`csrf` is set) with an unsafe method must carry
 * `X-CSRF-Token: <csrfToken>`, compared in constant time; otherwise 403, before anything is read
 * or written. A page of another origin can make the browser send the cookie (where SameSite
 * allows), but cannot know the token. `Authorization` requests are not affected.
 */
export function checkCsrf(auth: Resolution, request: Request): void {
  if (auth.principal === null || auth.csrf === undefined || SAFE_METHODS.has(request.method)) return;
  const sent = request.headers.get("x-csrf-token");
  if (sent === null || !sameSecret(sent, auth.csrf)) throw new ApiError(403, "FORBIDDEN", CSRF_MESSAGE);
}

/**
 * Behind a proxy, the last `X-Forwarded-For` entry: the address the proxy itself saw (proxies
 * append it); entries before it are whatever the client sent, and would let it pick a fresh
 * address, and a fresh limit, per request. Without a server (`app.handle` in tests) and without
 * a forwarded address: `unknown`, one client for all such requests.
 */
export function clientAddress(request: Request, server: Server<unknown> | null, behindProxy: boolean): string {
  if (behindProxy) {
    const forwarded = request.headers.get("x-forwarded-for");
    const last = forwarded?.slice(forwarded.lastIndexOf(",") + 1).trim();
    if (last) return last;
  }
  return server?.requestIP(request)?.address ?? "unknown";
}

/**
 * The access decision for one admitted request (decisions §4): the caller, or 401/403 thrown
 * with the table's message. Shared by the guard below and the native routes (native.ts).
 */
export function authorize(auth: Resolution, group: AccessGroup, method: string, projectSlug?: string): Principal {
  const d = decide(auth.principal, group, method, projectSlug, auth.failure ?? "key");
  if (!d.allow) throw new ApiError(d.status, d.status === 401 ? "UNAUTHORIZED" : "FORBIDDEN", d.message, d.details);
  return auth.principal!;
}

/**
 * `{ access: group }` on a route: the table decides before the body is judged (401/403 come
 * before 400, for a body that is not JSON too: see UnreadBody), and the handler finds the caller
 * in `principal`. The guard sets it in the same `transform` (a separate `resolve` stage would
 * cost every guarded request more).
 */
export const accessGuard = () =>
  new Elysia({ name: "flagsvc/access" })
    .decorate("principal", null as unknown as Principal)
    .macro({
      access: (group: AccessGroup) => ({
        // The group, for the API document (operations without it need no credential).
        detail: { "x-flagsvc-access": group } as Record<string, string>,
        // An arrow function: Elysia reads a hook's source to learn which parts of the context it
        // uses, and fails on a method written without line breaks (as in the minified binary):
        // it prints a warning with the hook's code, which breaks JSON log lines.
        transform: (c) => {
          const { auth } = c as unknown as AuthState;
          const slug = (c.params as Record<string, string> | undefined)?.slug;
          c.principal = authorize(auth, group, c.request.method, slug);
          checkCsrf(auth, c.request);
          const body = (c as { body?: unknown }).body;
          if (body instanceof UnreadBody && !body.afterEdition) throw body.error;
        },
      }),
    })
    .as("global");
