/**
 * The hot routes (evaluation, OFREP), each declared ONCE (`hotRoute`: method, path, access,
 * schema, handler, API document) and served by Bun's own router (`Bun.serve({ routes })`)
 * instead of through Elysia's hooks: their speed is a product requirement (Elysia's
 * per-request machinery costs a large share of a trivial route's throughput). From the one
 * declaration, `hotRoutes` derives:
 *   - `table`: the handlers for Bun's router (with an OPTIONS preflight for the routes that
 *     browsers may call, when `SVC_CORS_ORIGINS` allows any origin);
 *   - `match`: the same handlers for a request that reaches the app (`app.handle` in tests, a
 *     path Bun's router did not take): the pipeline answers with them before its own hooks;
 *   - `docs`: the Elysia twins, for the API document and the 405 table only (never run).
 *
 * A hot route answers exactly as the pipeline (pipeline.ts) and the access guard (auth.ts)
 * would for the same route declared in Elysia, from the same shared functions:
 *   request id -> admission (credential, rate limit, X-RateLimit-*) -> HTTPS-behind-proxy
 *   check and declared body size -> body read (413 while reading a chunked one) -> access
 *   decision (401/403) -> JSON parse and body validation (400 with details) -> handler
 *   -> error mapping -> request count (request-counts.ts: `/metrics`) -> access log.
 * The order is the pipeline's: the body is read first (413 past the limit), and judged only
 * after the access decision (a body that is not JSON too, as the pipeline defers its parse
 * errors to the access guard: see UnreadBody in errors.ts). A route may answer failures in a
 * shape of its own (`failure`: OFREP's), and take the key in `X-API-Key` too (`apiKeyHeader`).
 *
 * Hot path: one headers object literal per request with the per-request values (admission
 * fills in its rate-limit values; a HeaderCache adds the constant ones and hands the Response
 * a ready `Headers`), `JSON.stringify` of the result, no closures, no regex
 * compilation, one `await` (the body); a key resolves synchronously, and only a login token
 * (always refused here) takes the asynchronous way. A route may add an allocation-free
 * `accepts` test that spares valid bodies the compiled schema's allocations.
 */
import type { BunRequest, Server } from "bun";
import type { Static, TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Elysia } from "elysia";
import type { AccessGroup, Principal } from "./access";
import { accessGuard, authorize, RATE_LIMIT_HEADERS, type admitter } from "./auth";
import { VARY, type Cors } from "./cors";
import { pathOf } from "./path";
import type { Logger } from "../lib/log";
import type { Resolution } from "./credentials";
import type { RequestCounts } from "./request-counts";
import { ApiError, unreadableBody, validationDetails, validationError } from "./errors";
import { checkTransport, errorBody, internalError, logAccess, parseJsonBody, readBody, requestIdOf, responseHeaderCache } from "./pipeline";

/** A route's path parameters (`:key` segments), decoded. */
export type Params = Readonly<Record<string, string>>;

/**
 * An answer other than a 200 with the JSON of the handler's value: its status, its body text
 * (null: none, as a 304's) and its own headers (an `ETag`).
 */
export class Answer {
  constructor(
    readonly status: number,
    readonly body: string | null,
    readonly headers?: Readonly<Record<string, string>>,
  ) {}
}

export interface HotRoute<S extends TSchema = TSchema> {
  method: "POST";
  /** The path; a `:name` segment is a parameter. */
  path: string;
  access: AccessGroup;
  /** The request body's schema. */
  body: S;
  /**
   * Optional quick test, allocation-free, that answers true only for bodies `body` accepts;
   * anything it does not vouch for goes to the compiled schema, which decides and explains.
   */
  accepts?: (body: unknown) => boolean;
  /** The answer: a value (200, its JSON), an `Answer`, or a promise of either. */
  handle: (body: Static<S>, principal: Principal, request: Request, params: Params) => unknown;
  /** Web pages of `SVC_CORS_ORIGINS` may call it. */
  cors?: boolean;
  /** Its answers name the key's environment in `X-Flagsvc-Environment` (evaluation routes). */
  environmentHeader?: boolean;
  /** The API key may also come as `X-API-Key: <key>` (when there is no `Authorization`). */
  apiKeyHeader?: boolean;
  /** The body of a failure, when the route has a shape of its own; default: decisions §3's. */
  failure?: (error: ApiError, params: Params) => unknown;
  /** The API document: the route's response schemas and `detail` (tags, summary, parameters...). */
  doc: { response: Record<number, TSchema>; detail: Record<string, unknown> };
}

/** Bun's handler signature; `params` is given when the app (not Bun's router) matched the path. */
export type NativeHandler = (request: Request, server: Server<unknown> | null, params?: Params) => Response | Promise<Response>;
/** `path -> method -> handler`, the shape of `Bun.serve`'s `routes`. */
export type NativeRoutes = Record<string, Record<string, NativeHandler>>;

/** As Elysia's `Response.json` labels it, so that both paths send the same header. */
const JSON_CONTENT_TYPE = "application/json;charset=utf-8";
/** Elysia reports at most this many value errors of one validation. */
const MAX_ERRORS = 64;
const NO_PARAMS: Params = Object.freeze({});
/** The environment an evaluation ran in (the key's), on the evaluation routes' answers. */
export const ENVIRONMENT_HEADER = "x-flagsvc-environment";

/** Typed by the route list: each route's handler gets its own body type. */
export const hotRoute = <S extends TSchema>(route: HotRoute<S>): HotRoute => route as unknown as HotRoute;

/** What the hot routes share with the pipeline: admission (auth.ts `admitter`), the log, the proxy setting, CORS, the request counts. */
export interface NativeDeps {
  admit: ReturnType<typeof admitter>;
  log: Logger;
  behindProxy: boolean;
  cors: Cors;
  /** `/metrics`' request counts (request-counts.ts); each route takes its slot when compiled. */
  requests: RequestCounts;
}

export interface HotRoutes {
  /** For `Bun.serve({ routes })`. */
  table: NativeRoutes;
  /** The handler of a request to one of these routes (or its preflight), with its parameters; undefined otherwise. */
  match(request: Request): ((server: Server<unknown> | null) => Response | Promise<Response>) | undefined;
  /** The Elysia twins: the API document and the 405 table. */
  docs(): ReturnType<typeof docs>;
}

interface Shared extends NativeDeps {
  logging: boolean;
}

export function hotRoutes(deps: NativeDeps, routes: readonly HotRoute[]): HotRoutes {
  const shared: Shared = { ...deps, logging: deps.log.enabled("info") };
  const table: NativeRoutes = {};
  for (const route of routes) {
    if (table[route.path]?.[route.method]) throw new Error(`hot route ${route.method} ${route.path} declared twice`);
    (table[route.path] ??= {})[route.method] = compile(route, shared);
  }
  if (deps.cors.enabled) {
    for (const route of routes) {
      if (!route.cors) continue;
      const methods = `${Object.keys(table[route.path]!).join(", ")}, OPTIONS`;
      table[route.path]!.OPTIONS = (request) => deps.cors.preflight(request, methods);
    }
  }
  const exact = new Map(Object.entries(table).filter(([path]) => !path.includes(":")));
  const patterns = Object.entries(table)
    .filter(([path]) => path.includes(":"))
    .map(([path, methods]) => ({ segments: path.split("/"), methods }));
  return {
    table,
    match(request) {
      const path = pathOf(request.url);
      const methods = exact.get(path);
      if (methods !== undefined) {
        const handler = Object.hasOwn(methods, request.method) ? methods[request.method] : undefined;
        return handler && ((server) => handler(request, server));
      }
      for (const { segments, methods } of patterns) {
        if (!Object.hasOwn(methods, request.method)) continue;
        const params = matchSegments(segments, path);
        if (params) return (server) => methods[request.method]!(request, server, params);
      }
      return undefined;
    },
    docs: () => docs(routes),
  };
}


/** `/a/:key` against `/a/x%2Fy`: `{ key: "x/y" }`; null when the path does not match. */
function matchSegments(pattern: readonly string[], path: string): Params | null {
  const parts = path.split("/");
  if (parts.length !== pattern.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const p = pattern[i]!;
    if (p.startsWith(":")) {
      if (parts[i] === "") return null;
      try {
        params[p.slice(1)] = decodeURIComponent(parts[i]!);
      } catch {
        return null;
      }
    } else if (p !== parts[i]) return null;
  }
  return params;
}

/** The twins: each route with its schemas and document, for `/v1/openapi.json` and the 405 table; the handlers answer first. */
function docs(routes: readonly HotRoute[]) {
  const app = new Elysia({ name: "flagsvc/hot-routes" }).use(accessGuard());
  for (const route of routes) {
    (app as unknown as Elysia).route(route.method, route.path, servedNatively, {
      access: route.access,
      body: route.body,
      response: route.doc.response,
      detail: route.doc.detail,
    } as never);
  }
  return app;
}

const servedNatively = (): never => {
  throw new Error("a hot route reached its Elysia twin: the pipeline's onRequest answers these");
};

/**
 * The response headers of one request; admission writes the X-RateLimit-* values into it (the
 * remaining count as a number: see auth.ts).
 */
type ResponseHeaders = Record<string, string | number>;

function compile(route: HotRoute, shared: Shared): NativeHandler {
  const { method, path, access, handle, accepts, failure } = route;
  const checker = TypeCompiler.Compile(route.body);
  const { admit, log, behindProxy, logging, requests } = shared;
  const slot = requests.slot(method, path);
  const cors = route.cors && shared.cors.enabled ? shared.cors : null;
  const apiKeyHeader = route.apiKeyHeader === true;
  const environmentHeader = route.environmentHeader === true;
  const hasParams = path.includes(":");
  // As the pipeline's, with the content type a constant too (and Vary, for a route browsers may call).
  const headerCache = responseHeaderCache(
    behindProxy,
    environmentHeader ? [...RATE_LIMIT_HEADERS, ENVIRONMENT_HEADER] : RATE_LIMIT_HEADERS,
    { "content-type": JSON_CONTENT_TYPE, ...(cors ? VARY : {}) },
  );

  /** Any failure, as the pipeline's onError maps it (in the route's own shape, if it has one). */
  const fail = (error: unknown, headers: ResponseHeaders, requestId: string, startedAt: number, params: Params): Response => {
    let err: ApiError;
    if (error instanceof ApiError) err = error;
    else {
      err = internalError(log, error, requestId, method, path);
      // A failure inside admission leaves rate-limit values unset: the pipeline sends none then.
      for (const name of RATE_LIMIT_HEADERS) if (headers[name] === "") delete headers[name];
    }
    const standard = errorBody(err, headers);
    const body = JSON.stringify(failure ? failure(err, params) : standard);
    const response = new Response(body, { status: err.status, headers: headerCache.answer(headers) });
    requests.record(slot, err.status, (performance.now() - startedAt) / 1000);
    if (logging) logAccess(log, method, path, err.status, startedAt, requestId);
    return response;
  };

  const respond = (answer: unknown, headers: ResponseHeaders, requestId: string, startedAt: number): Response => {
    let response: Response;
    if (answer instanceof Answer) {
      if (answer.headers) Object.assign(headers, answer.headers);
      response = new Response(answer.body, { status: answer.status, headers: headerCache.answer(headers) });
    } else {
      response = new Response(JSON.stringify(answer), { status: 200, headers: headerCache.answer(headers) });
    }
    requests.record(slot, response.status, (performance.now() - startedAt) / 1000);
    if (logging) logAccess(log, method, path, response.status, startedAt, requestId);
    return response;
  };

  /** A handler's promise (an OFREP bulk that waits for a change to arrive). */
  async function later(answer: Promise<unknown>, headers: ResponseHeaders, requestId: string, startedAt: number, params: Params): Promise<Response> {
    try {
      return respond(await answer, headers, requestId, startedAt);
    } catch (e) {
      return fail(e, headers, requestId, startedAt, params);
    }
  }

  /** Body read, access, body parse and validation, handler: everything after admission. */
  async function withBody(request: Request, auth: Resolution, headers: ResponseHeaders, requestId: string, startedAt: number, params: Params): Promise<Response> {
    let bytes: Uint8Array;
    try {
      bytes = await readBody(request);
    } catch (e) {
      // As Elysia's parse stage: 413 as it is, a broken stream as an unreadable body.
      return fail(e instanceof ApiError ? e : unreadableBody(), headers, requestId, startedAt, params);
    }
    try {
      const principal = authorize(auth, access, method);
      const body = parseJsonBody(bytes, request.headers.get("content-type"));
      if (!(accepts?.(body) || checker.Check(body))) {
        throw validationError("Invalid request", validationDetails("body", valueErrors(checker, body)));
      }
      const answer = handle(body, principal, request, params);
      // On the answers of the handler only (a failure of the request has no evaluation to name).
      if (environmentHeader && principal.kind === "apiKey") headers[ENVIRONMENT_HEADER] = principal.environmentSlug;
      if (answer instanceof Promise) return later(answer, headers, requestId, startedAt, params);
      return respond(answer, headers, requestId, startedAt);
    } catch (e) {
      return fail(e, headers, requestId, startedAt, params);
    }
  }

  /** A login token: its signature check is asynchronous (and the evaluate group refuses it). */
  async function admittedLater(
    admitted: Promise<Resolution>,
    request: Request,
    headers: ResponseHeaders,
    requestId: string,
    startedAt: number,
    params: Params,
  ): Promise<Response> {
    let auth: Resolution;
    try {
      auth = await admitted;
      checkTransport(request, headers, behindProxy);
    } catch (e) {
      return fail(e, headers, requestId, startedAt, params);
    }
    return withBody(request, auth, headers, requestId, startedAt, params);
  }

  return (request, server, given) => {
    const startedAt = performance.now();
    const requestId = requestIdOf(request);
    // Bun's router gives a route with parameters its `params` (read only there: it is built on access).
    const params = given ?? (hasParams ? (request as BunRequest).params : NO_PARAMS);
    // The per-request headers (the parity test holds them equal to the pipeline's); admission
    // fills in the rate-limit values.
    const headers: ResponseHeaders = {
      "x-request-id": requestId,
      "x-ratelimit-limit": "",
      "x-ratelimit-remaining": "",
      "x-ratelimit-reset": "",
    };
    if (cors !== null) cors.apply(request, headers);
    try {
      const authorization = request.headers.get("authorization") ?? (apiKeyHeader ? keyFromHeader(request) : null);
      const admitted = admit(request, headers, server, authorization);
      if (admitted instanceof Promise) return admittedLater(admitted, request, headers, requestId, startedAt, params);
      checkTransport(request, headers, behindProxy);
      return withBody(request, admitted, headers, requestId, startedAt, params);
    } catch (e) {
      return fail(e, headers, requestId, startedAt, params);
    }
  };
}

/** `X-API-Key: <key>` as the `Authorization` value it stands for. */
function keyFromHeader(request: Request): string | null {
  const key = request.headers.get("x-api-key");
  return key === null ? null : `Bearer ${key.trim()}`;
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
