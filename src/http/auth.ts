/**
 * Authentication and rate limiting for every request, authorization per route.
 * - `admit` runs first in the pipeline for every request: it resolves the credential (memory
 *   only), counts the request against its limit and sets the X-RateLimit-* headers, so they
 *   are on every response, errors included. Without a valid credential the caller is limited
 *   per client address as `anonymous`.
 * - `accessGuard` gives routes the option `{ access: group }`; the table in access.ts decides.
 */
import { Elysia } from "elysia";
import type { RateLimitKind } from "../config";
import type { AppContext } from "../context";
import { decide, type AccessGroup, type Principal } from "./access";
import type { Resolution } from "./credentials";
import { ApiError } from "./errors";

/** What admission leaves on the request's context. */
export interface AuthState {
  auth: Resolution;
}

interface AdmitContext {
  request: Request;
  set: { headers: Record<string, unknown> };
  server: { requestIP(request: Request): { address: string } | null } | null;
}

function limitOf(principal: Principal | null): RateLimitKind {
  if (principal === null) return "anonymous";
  return principal.kind === "apiKey" ? principal.scope : principal.kind === "adminKey" ? "admin" : "user";
}

export function admitter(ctx: AppContext) {
  const { credentials, limiter } = ctx;
  const behindProxy = ctx.config.behindProxy;
  return async (c: AdmitContext) => {
    const auth = await credentials.resolve(c.request.headers.get("authorization"));
    (c as unknown as AuthState).auth = auth;
    const principal = auth.principal;
    const key = principal ? principal.id : `ip:${clientAddress(c, behindProxy)}`;
    const state = limiter.hit(limitOf(principal), key);
    const headers = c.set.headers;
    headers["x-ratelimit-limit"] = String(state.limit);
    headers["x-ratelimit-remaining"] = String(state.remaining);
    headers["x-ratelimit-reset"] = String(state.reset);
    if (!state.allowed) {
      throw new ApiError(
        429,
        "RATE_LIMITED",
        `Rate limit exceeded: ${state.limit} requests a minute; retry after ${state.retryAfter} s`,
        undefined,
        { "retry-after": String(state.retryAfter) },
        { retryAfter: state.retryAfter },
      );
    }
  };
}

function clientAddress(c: AdmitContext, behindProxy: boolean): string {
  if (behindProxy) {
    const forwarded = c.request.headers.get("x-forwarded-for");
    if (forwarded) return forwarded.split(",")[0]!.trim();
  }
  return c.server?.requestIP(c.request)?.address ?? "unknown";
}

/** The principal of an admitted request (after the `access` guard, never null). */
export function principalOf(c: object): Principal {
  return (c as AuthState).auth.principal!;
}

export const accessGuard = () =>
  new Elysia({ name: "flagsvc/access" })
    .macro({
      // `transform` runs before validation: a caller without access learns nothing about the
      // body it sent (401/403 come before 400).
      access: (group: AccessGroup) => ({
        transform(c) {
          const { auth } = c as unknown as AuthState;
          const slug = (c.params as Record<string, string> | undefined)?.slug;
          const d = decide(auth.principal, group, c.request.method, slug, auth.failure === "token" ? "token" : "key");
          if (!d.allow) throw new ApiError(d.status, d.status === 401 ? "UNAUTHORIZED" : "FORBIDDEN", d.message);
        },
      }),
    })
    .as("global");
