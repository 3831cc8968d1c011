/**
 * Routes served by Bun's own router (`Bun.serve({ routes })`) instead of through Elysia's
 * hooks: the evaluation endpoints, whose speed is a product requirement (Elysia's per-request
 * machinery costs a large share of a trivial route's throughput).
 *
 * A native route answers exactly as the pipeline (pipeline.ts) and the access guard (auth.ts)
 * would for the same route declared in Elysia, from the same shared functions:
 *   request id -> admission (credential, rate limit, X-RateLimit-*) -> HTTPS-behind-proxy
 *   check and declared body size -> body read (413 while reading a chunked one) -> access
 *   decision (401/403) -> JSON parse and body validation (400 with details) -> handler
 *   -> error mapping -> access log.
 * The order is the pipeline's: the body is read first (413 past the limit), and judged only
 * after the access decision (a body that is not JSON too, as the pipeline defers its parse
 * errors to the access guard: see UnreadBody in errors.ts).
 *
 * Hot path: one headers object literal per request with the per-request values (admission
 * fills in its rate-limit values; a HeaderCache adds the constant ones and hands the Response
 * a ready `Headers`), `JSON.stringify` of the result, no closures, no regex
 * compilation, one `await` (the body); a key resolves synchronously, and only a login token
 * (always refused here) takes the asynchronous way. A route may add an allocation-free
 * `accepts` test that spares valid bodies the compiled schema's allocations.
 *
 * The Elysia app keeps a twin of every native route (same schema and handler), for the API
 * document, the 405 table and `app.handle`; `createApp` hands these to Bun, whose router
 * prefers them for their exact path and method (see `dispatcher` in src/server.ts).
 */
import type { Server } from "bun";
import type { Static, TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { AccessGroup, Principal } from "./access";
import { authorize, RATE_LIMIT_HEADERS, type admitter } from "./auth";
import type { Logger } from "../lib/log";
import type { Resolution } from "./credentials";
import { ApiError, unreadableBody, validationDetails, validationError } from "./errors";
import { checkTransport, errorBody, internalError, logAccess, parseJsonBody, readBody, requestIdOf, responseHeaderCache } from "./pipeline";

export interface NativeRoute<S extends TSchema = TSchema> {
  method: "POST";
  /** An exact path: Bun's router matches it without parameters. */
  path: string;
  access: AccessGroup;
  /** The request body's schema (the same one the Elysia twin declares). */
  body: S;
  /**
   * Optional quick test, allocation-free, that answers true only for bodies `body` accepts;
   * anything it does not vouch for goes to the compiled schema, which decides and explains.
   */
  accepts?: (body: unknown) => boolean;
  /** The 200 answer, serialised with JSON.stringify. */
  handle: (body: Static<S>, principal: Principal, request: Request) => unknown;
}

export type NativeHandler = (request: Request, server: Server<unknown> | null) => Response | Promise<Response>;
/** `path -> method -> handler`, the shape of `Bun.serve`'s `routes`. */
export type NativeRoutes = Record<string, Record<string, NativeHandler>>;

/** As Elysia's `Response.json` labels it, so that both paths send the same header. */
const JSON_CONTENT_TYPE = "application/json;charset=utf-8";
/** Elysia reports at most this many value errors of one validation. */
const MAX_ERRORS = 64;

/** Typed by the route list: each route's handler gets its own body type. */
export const nativeRoute = <S extends TSchema>(route: NativeRoute<S>): NativeRoute => route as unknown as NativeRoute;

/** What the native routes share with the pipeline: admission (auth.ts `admitter`), the log, the proxy setting. */
export interface NativeDeps {
  admit: ReturnType<typeof admitter>;
  log: Logger;
  behindProxy: boolean;
}

export function nativeRoutes({ admit, log, behindProxy }: NativeDeps, routes: readonly NativeRoute[]): NativeRoutes {
  const shared: Shared = { admit, log, behindProxy, logging: log.enabled("info") };
  const table: NativeRoutes = {};
  for (const route of routes) {
    if (table[route.path]?.[route.method]) throw new Error(`native route ${route.method} ${route.path} declared twice`);
    (table[route.path] ??= {})[route.method] = compile(route, shared);
  }
  return table;
}

interface Shared extends NativeDeps {
  logging: boolean;
}

/**
 * The response headers of one request; admission writes the X-RateLimit-* values into it (the
 * remaining count as a number: see auth.ts).
 */
type ResponseHeaders = Record<string, string | number>;

function compile(route: NativeRoute, shared: Shared): NativeHandler {
  const { method, path, access, handle, accepts } = route;
  const checker = TypeCompiler.Compile(route.body);
  const { admit, log, behindProxy, logging } = shared;
  // As the pipeline's, with the content type a constant too.
  const headerCache = responseHeaderCache(behindProxy, RATE_LIMIT_HEADERS, { "content-type": JSON_CONTENT_TYPE });

  /** Any failure, as the pipeline's onError maps it. */
  const fail = (error: unknown, headers: ResponseHeaders, requestId: string, startedAt: number): Response => {
    let err: ApiError;
    if (error instanceof ApiError) err = error;
    else {
      err = internalError(log, error, requestId, method, path);
      // A failure inside admission leaves rate-limit values unset: the pipeline sends none then.
      for (const name of RATE_LIMIT_HEADERS) if (headers[name] === "") delete headers[name];
    }
    const body = JSON.stringify(errorBody(err, headers));
    const response = new Response(body, { status: err.status, headers: headerCache.answer(headers) });
    if (logging) logAccess(log, method, path, err.status, startedAt, requestId);
    return response;
  };

  /** Body read, access, body parse and validation, handler: everything after admission. */
  async function withBody(request: Request, auth: Resolution, headers: ResponseHeaders, requestId: string, startedAt: number): Promise<Response> {
    let bytes: Uint8Array;
    try {
      bytes = await readBody(request);
    } catch (e) {
      // As Elysia's parse stage: 413 as it is, a broken stream as an unreadable body.
      return fail(e instanceof ApiError ? e : unreadableBody(), headers, requestId, startedAt);
    }
    try {
      const principal = authorize(auth, access, method);
      const body = parseJsonBody(bytes, request.headers.get("content-type"));
      if (!(accepts?.(body) || checker.Check(body))) {
        throw validationError("Invalid request", validationDetails("body", valueErrors(checker, body)));
      }
      const answer = JSON.stringify(handle(body, principal, request));
      const response = new Response(answer, { status: 200, headers: headerCache.answer(headers) });
      if (logging) logAccess(log, method, path, 200, startedAt, requestId);
      return response;
    } catch (e) {
      return fail(e, headers, requestId, startedAt);
    }
  }

  /** A login token: its signature check is asynchronous (and the evaluate group refuses it). */
  async function admittedLater(
    admitted: Promise<Resolution>,
    request: Request,
    headers: ResponseHeaders,
    requestId: string,
    startedAt: number,
  ): Promise<Response> {
    let auth: Resolution;
    try {
      auth = await admitted;
      checkTransport(request, headers, behindProxy);
    } catch (e) {
      return fail(e, headers, requestId, startedAt);
    }
    return withBody(request, auth, headers, requestId, startedAt);
  }

  return (request, server) => {
    const startedAt = logging ? performance.now() : 0;
    const requestId = requestIdOf(request);
    // The per-request headers (the parity test holds them equal to the pipeline's); admission
    // fills in the rate-limit values.
    const headers: ResponseHeaders = {
      "x-request-id": requestId,
      "x-ratelimit-limit": "",
      "x-ratelimit-remaining": "",
      "x-ratelimit-reset": "",
    };
    try {
      const admitted = admit(request, headers, server);
      if (admitted instanceof Promise) return admittedLater(admitted, request, headers, requestId, startedAt);
      checkTransport(request, headers, behindProxy);
      return withBody(request, admitted, headers, requestId, startedAt);
    } catch (e) {
      return fail(e, headers, requestId, startedAt);
    }
  };
}

/** The first value errors of a failed check, as Elysia's ValidationError lists them. */
function valueErrors(checker: ReturnType<typeof TypeCompiler.Compile>, value: unknown) {
  const errors = [];
  for (const e of checker.Errors(value)) {
    errors.push(e);
    if (errors.length >= MAX_ERRORS) break;
  }
  return errors;
}
