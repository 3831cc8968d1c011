/**
 * The cross-cutting request pipeline, applied to every route of the app:
 *   request id -> credential and rate limit (auth.ts) -> HTTPS-behind-proxy check
 *   -> body size limit -> JSON body parser -> access guard (per route; then a body the parser
 *   could not take is refused) -> (route) -> error mapping -> access log.
 * Everything on this path is constant work per request: no I/O, no per-request compilation.
 * The parts below marked as shared are also what src/http/native.ts runs for the routes that
 * Bun serves directly, so that both paths answer alike.
 */
import { databaseUnreachable } from "../db/pg-errors";
import type { Server } from "bun";
import { Elysia, ElysiaCustomStatusResponse } from "elysia";
import type { Logger } from "../lib/log";
import { HeaderCache } from "./header-cache";
import { UNMATCHED, type RequestCounts } from "./request-counts";
import { ApiError, MAX_BODY_BYTES, payloadTooLarge, UnreadBody, unreadableBody, validationDetails, validationError } from "./errors";

export interface PipelineOptions {
  log: Logger;
  /** TLS terminates here (HSTS on every response), or at a proxy (`SVC_BEHIND_PROXY`). */
  behindProxy: boolean;
  /**
   * The app's routes, read on the first 404 to tell "unknown path" from "wrong method", and on
   * the first body to know which routes take none (no `body` schema) and which are guarded
   * (their `detail` marks).
   */
  routes: () => readonly { method: string; path: string; hooks?: { body?: unknown; detail?: Record<string, unknown> } }[];
  /**
   * Credential and rate limit, right after the request id, so that its headers go on every
   * response; what it returns is kept on the context as `auth`. It gets the parts it needs, not
   * the context: Elysia prepares every part of a context that is handed to a function (query,
   * headers, cookies...), on every request.
   */
  admit: (request: Request, headers: Record<string, unknown>, server: Server<unknown> | null) => unknown;
  /**
   * The hot routes' handler for a request to one of them (src/http/native.ts): such a request
   * reaching the app (`app.handle`, a path Bun's router did not take) is answered by it, as the
   * listening server's router would, before any hook of this pipeline runs.
   */
  hot?: (request: Request) => ((server: Server<unknown> | null) => Response | Promise<Response>) | undefined;
  /** The headers `admit` sets on every request it lets through (the X-RateLimit-* ones). */
  admitHeaders: readonly string[];
  /** `/metrics`' request counts (request-counts.ts), by the matched route's template. */
  requests: RequestCounts;
}

/** What onRequest leaves on the request's context: for the access log and the access guard. */
interface RequestState {
  requestId: string;
  startedAt: number;
  auth: unknown;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** application/json or application/<something>+json, with or without parameters. */
const JSON_TYPE = /^application\/(?:[a-z0-9.!#$&^_-]+\+)?json\s*(?:;|$)/i;

// ---- the parts every response path shares (this pipeline, and src/http/native.ts) ------------

export const HSTS = "max-age=31536000";

/** Headers on every response; HSTS too unless TLS ends at a proxy (then only after the check). */
function standardHeaders(behindProxy: boolean): Record<string, string> {
  return {
    ...(behindProxy ? {} : { "strict-transport-security": HSTS }),
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
  };
}

/**
 * The response headers of one answering path (this pipeline, each native route): the standard
 * ones and `constant` preset, the request id and `admitHeaders` set per response. Behind a
 * proxy, HSTS is per response too: the transport check sets it on the answers that passed it.
 */
export function responseHeaderCache(behindProxy: boolean, admitHeaders: readonly string[], constant: Record<string, string> = {}): HeaderCache {
  return new HeaderCache({ ...constant, ...standardHeaders(behindProxy) }, [
    "x-request-id",
    ...admitHeaders,
    ...(behindProxy ? ["strict-transport-security"] : []),
  ]);
}

/** A sane incoming `X-Request-Id` is kept; anything else gets a random UUID. */
export function requestIdOf(request: Request): string {
  const incoming = request.headers.get("x-request-id");
  return incoming !== null && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
}

/**
 * What follows admission for every request: behind a proxy, `X-Forwarded-Proto` must be https
 * (then HSTS goes on `headers`); a declared body over the limit is refused before it is read.
 */
export function checkTransport(request: Request, headers: Record<string, unknown>, behindProxy: boolean): void {
  if (behindProxy) {
    if (request.headers.get("x-forwarded-proto") !== "https") {
      throw new ApiError(403, "HTTPS_REQUIRED", "HTTPS is required: send requests through the TLS proxy");
    }
    headers["strict-transport-security"] = HSTS;
  }
  const length = request.headers.get("content-length");
  if (length !== null && Number(length) > MAX_BODY_BYTES) throw payloadTooLarge();
}

/** How deeply a request body may nest arrays and objects (ours need fewer than ten levels). */
export const MAX_BODY_DEPTH = 64;

/**
 * The body as read (its bytes), to JSON: it must be UTF-8; empty is null (the schema then says
 * what is missing), anything else needs a JSON content type (`contentType` with or without
 * parameters) and must be a JSON object (every endpoint takes one) nested at most MAX_BODY_DEPTH
 * levels: validating and reporting on a deeper value takes time that grows with the square of its
 * depth, and from a few ten thousand levels overflows the stack. (JSON.parse itself takes such
 * depth in its stride: 50 ms for a whole MiB of brackets, against 2 µs per KiB for a scan of
 * every body's text.)
 */
export function parseJsonBody(bytes: Uint8Array, contentType: string | null | undefined): unknown {
  const text = utf8Text(bytes);
  if (text.trim() === "") return null;
  if (!JSON_TYPE.test(contentType ?? "")) {
    throw validationError("Content-Type must be application/json", [{ path: "headers.content-type", message: "Must be application/json" }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw validationError("Request body is not valid JSON", [{ path: "body", message: "Not valid JSON" }]);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw validationError("Invalid request", [{ path: "body", message: "Expected object" }]);
  }
  // JSON.parse keeps a `"__proto__"` member as an own field, which the schemas refuse as unknown;
  // but Elysia fills a body schema's defaults in with Object.assign, whose assignment sets the
  // prototype instead: the field vanished unjudged (a key was rotated). No schema has it.
  if (Object.hasOwn(value, "__proto__")) throw validationError("Invalid request", [{ path: "body.__proto__", message: "Unknown field" }]);
  // Nesting deeper than the limit takes two characters a level: short bodies (a single
  // evaluation's) cannot, and skip the walk.
  if (text.length > 2 * MAX_BODY_DEPTH && nestedDeeperThan(value, MAX_BODY_DEPTH)) {
    throw validationError(`Request body is nested too deeply (at most ${MAX_BODY_DEPTH} levels)`, [{ path: "body", message: `Nested deeper than ${MAX_BODY_DEPTH} levels` }]);
  }
  // JSON may escape half of a UTF-16 surrogate pair alone; the database would store it as U+FFFD,
  // so the answer to a write and a later read would differ.
  if (SURROGATE_ESCAPE.test(text) && !wellFormed(value)) {
    throw validationError("Request body holds text that is not valid Unicode", [{ path: "body", message: "Lone UTF-16 surrogate" }]);
  }
  return value;
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** Decodes as `Request.text()` does (a leading byte-order mark dropped), failing where it would put U+FFFD. */
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The body's text; bytes that are not UTF-8 are a 400 (decoded leniently, they became U+FFFD,
 * stored in place of what was sent). A U+FFFD sent as UTF-8 is text like any other.
 */
function utf8Text(bytes: Uint8Array): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw validationError("Request body is not valid UTF-8", [{ path: "body", message: "Not valid UTF-8" }]);
  }
}

/** Whether every string and property name in a parsed JSON value is well-formed UTF-16. */
function wellFormed(value: unknown): boolean {
  if (typeof value === "string") return value.isWellFormed();
  if (value === null || typeof value !== "object") return true;
  for (const [key, item] of Object.entries(value)) if (!key.isWellFormed() || !wellFormed(item)) return false;
  return true;
}

/**
 * A route without a body schema takes no body: an empty object passes (clients send `{}`), any
 * field is unknown (decisions §2: unknown fields are refused, not ignored).
 */
function refuseFields(body: Record<string, unknown>): void {
  const names = Object.keys(body);
  if (names.length > 0) throw validationError("Invalid request", names.map((name) => ({ path: `body.${name}`, message: "Unknown field" })));
}

/** Whether a parsed JSON value holds more than `max` arrays or objects inside each other. */
function nestedDeeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (max === 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (nestedDeeperThan(item, max - 1)) return true;
    return false;
  }
  for (const key in value) if (nestedDeeperThan((value as Record<string, unknown>)[key], max - 1)) return true;
  return false;
}

/** The database (PostgreSQL) unreachable: nothing was written; the client may retry in a second. */
const UNAVAILABLE = new ApiError(503, "SERVICE_UNAVAILABLE", "The database cannot be reached; nothing was changed. Retry shortly", undefined, { "retry-after": "1" });

/**
 * Anything thrown that is not an ApiError: logged with the request id, answered as a bare 500;
 * or, when the database cannot be reached, logged as a warning and answered 503 with `Retry-After`.
 */
export function internalError(log: Logger, error: unknown, requestId: string, method: string, path: string): ApiError {
  if (databaseUnreachable(error)) {
    log.warn("database unreachable", { requestId, method, path: redactPath(path), error: error instanceof Error ? error.message : String(error) });
    return UNAVAILABLE;
  }
  log.error("unhandled error", {
    requestId,
    method,
    path: redactPath(path),
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  return new ApiError(500, "INTERNAL_ERROR", `Internal error; request id ${requestId}`);
}

/** Puts an error's own headers (Allow, Retry-After) on the response headers; returns its body. */
export function errorBody(err: ApiError, headers: Record<string, unknown>): Record<string, unknown> {
  if (err.headers) Object.assign(headers, err.headers);
  return err.body();
}

/** The access-log line of one request (at info). */
export function logAccess(log: Logger, method: string, path: string, status: number | string, startedAt: number, requestId: string): void {
  log.info("request", {
    method,
    path: redactPath(path),
    status,
    durationMs: Math.round((performance.now() - startedAt) * 100) / 100,
    requestId,
  });
}

/**
 * Session ids double as bearer tokens in CE, and a key pasted where an id belongs is a secret
 * too: never let one reach a log line.
 */
export function redactPath(path: string): string {
  return path.includes("sess_") || path.includes("svc_") ? path.replace(SECRET_IN_PATH, "$1[redacted]") : path;
}

const SECRET_IN_PATH = /(sess_|svc_(?:sk_[a-z]+_|admin_|sess_)?)[A-Za-z0-9]+/g;

/**
 * A handler's value that Elysia turns into a Response synchronously (an object, an array, a
 * string, nothing; `status(...)` around one): its headers may come from a HeaderCache.
 */
function mappedAtOnce(value: unknown): boolean {
  const v = value instanceof ElysiaCustomStatusResponse ? (value.response as unknown) : value;
  if (v === null || (typeof v !== "object" && typeof v !== "function")) return true;
  return (v as object).constructor === Object || Array.isArray(v);
}

export function pipeline(opts: PipelineOptions) {
  const { log, behindProxy } = opts;
  const allowedMethods = methodTable(opts.routes);
  // What the parser needs to know of a route, read from the app's routes on the first body:
  // whether it takes one (a `body` schema), and which guard (auth.ts, edition.ts, as their API
  // document marks) answers before the body is judged.
  let bodyRules: Map<string, { takesBody: boolean; guard?: "access" | "edition" }> | undefined;
  const bodyRulesOf = (method: string, route: string) =>
    (bodyRules ??= new Map(
      opts.routes().map((r) => {
        const detail = r.hooks?.detail;
        const guard = detail?.["x-flagsvc-edition"] !== undefined ? "edition" : detail?.["x-flagsvc-access"] !== undefined ? "access" : undefined;
        return [`${r.method} ${r.path}`, { takesBody: r.hooks?.body !== undefined, guard }] as const;
      }),
    )).get(`${method} ${route}`);
  const headerCache = responseHeaderCache(behindProxy, opts.admitHeaders);
  const count = countRequest(opts.requests);

  return new Elysia({ name: "flagsvc/pipeline" })
    .onRequest(async (c) => {
      const hot = opts.hot?.(c.request);
      if (hot !== undefined) return hot(c.server as Server<unknown> | null);
      const requestId = requestIdOf(c.request);
      (c as unknown as RequestState).requestId = requestId;
      (c as unknown as RequestState).startedAt = performance.now();
      c.set.headers["x-request-id"] = requestId;
      const admitted = opts.admit(c.request, c.set.headers, c.server as Server<unknown> | null);
      (c as unknown as RequestState).auth = admitted instanceof Promise ? await admitted : admitted;
      checkTransport(c.request, c.set.headers, behindProxy);
    })
    // `route` (the matched path pattern) is named so that Elysia sets it before parsing. A body
    // that cannot be taken is refused here on open routes (login), after the access decision on
    // guarded ones (UnreadBody); one too large, here on all.
    .onParse(async ({ request, contentType, route }) => {
      const bytes = await readBody(request);
      const rules = bodyRulesOf(request.method, route);
      try {
        const body = parseJsonBody(bytes, contentType);
        if (body !== null && rules?.takesBody === false) refuseFields(body as Record<string, unknown>);
        return body;
      } catch (e) {
        if (!(e instanceof ApiError) || rules?.guard === undefined) throw e;
        return new UnreadBody(e, rules.guard === "edition");
      }
    })
    .onError(({ code, error, set, request, path }) => {
      // Failed while Elysia built the Response from the cached Headers: a record again.
      if ((set.headers as unknown) instanceof Headers) set.headers = (set.headers as unknown as Headers).toJSON() as never;
      let err: ApiError;
      if (error instanceof ApiError) err = error;
      else if (code === "VALIDATION" && Array.isArray(error.all)) {
        // A single coerced query value ("property") arrives without its name: find it by value.
        const where = error.type === "property" ? `query.${queryKeyOf(request.url, error.value)}` : error.type;
        err = validationError("Invalid request", validationDetails(where, error.all as never));
      } else if (code === "PARSE") {
        err = error.cause instanceof ApiError ? error.cause : unreadableBody();
      } else if (code === "NOT_FOUND") {
        const allow = allowedMethods(path, request.method);
        err = allow
          ? new ApiError(405, "METHOD_NOT_ALLOWED", `Method ${request.method} is not allowed on ${path}`, undefined, { allow })
          : new ApiError(404, "NOT_FOUND", `No route for ${request.method} ${path}`);
      } else {
        err = internalError(log, error, (set.headers["x-request-id"] as string | undefined) ?? "", request.method, path);
      }
      set.status = err.status;
      return errorBody(err, set.headers);
    })
    // Runs last for every answer, errors included, right before Elysia builds the Response.
    // It hands the value back unchanged: Elysia's app-level error handler (404, 405) takes
    // whatever this hook returns as the answer's body, undefined included. The answer is
    // counted here (/metrics), in the request's turn.
    .mapResponse(({ set, responseValue, request, route, startedAt }: { set: { headers: Record<string, unknown>; status?: number | string }; responseValue: unknown; request: Request; route?: string; startedAt?: number }) => {
      count(request, route, set, responseValue, startedAt);
      if (mappedAtOnce(responseValue)) set.headers = headerCache.answer(set.headers) as never;
      else headerCache.complete(set.headers);
      return responseValue as never;
    })
    .onAfterResponse(log.enabled("info") ? (accessLog(log) as never) : [])
    .as("global");
}

/**
 * One line per request. The context is destructured in the parameter list: Elysia reads hooks'
 * source to decide which parts of a request to prepare, and a context used as a whole makes it
 * prepare all of them (cookies, query, headers) for every request.
 */
const accessLog =
  (log: Logger) =>
  ({ request, path, set, responseValue, requestId, startedAt }: AccessLogContext): void => {
    const status = responseValue instanceof Response ? responseValue.status : set.status;
    logAccess(log, request.method, path, typeof status === "number" ? status : String(status), startedAt, requestId);
  };

/**
 * Counts each answer (from mapResponse, which runs for every answer, errors included, right
 * before the Response is built) by its route's template: `route`, which Elysia sets when a route
 * matched; none matched: UNMATCHED. A hot route's request that reached the app was counted by
 * its handler, before this pipeline set `startedAt`: skipped here.
 */
const countRequest =
  (requests: RequestCounts) =>
  (request: Request, route: string | undefined, set: { status?: number | string }, responseValue: unknown, startedAt: number | undefined): void => {
    if (startedAt === undefined) return;
    const status = responseValue instanceof Response ? responseValue.status : set.status;
    requests.record(requests.slot(request.method, route || UNMATCHED), typeof status === "number" ? status : Number(status) || 200, (performance.now() - startedAt) / 1000);
  };

interface AccessLogContext extends RequestState {
  request: Request;
  path: string;
  set: { status?: number | string };
  responseValue: unknown;
}

/** The query parameter whose raw value decodes to `value` (error path only). */
function queryKeyOf(url: string, value: unknown): string {
  for (const [key, raw] of new URL(url).searchParams) if (raw === String(value)) return key;
  return "?";
}

const NO_BODY = Promise.resolve(new Uint8Array(0));

/**
 * Reads the body's bytes (`parseJsonBody` decodes them), refusing (413) past MAX_BODY_BYTES
 * without buffering the rest. A declared length was checked by `checkTransport`: such a body is
 * handed to Bun whole, and `request.body` is not touched (making Bun build a stream for it slows
 * the read down). Bytes, not `text()`: that one puts U+FFFD for bytes that are not UTF-8, and
 * nothing tells those apart from a U+FFFD that was sent.
 */
export function readBody(request: Request): Promise<Uint8Array> {
  if (request.headers.get("content-length") !== null) return request.bytes();
  if (request.body === null) return NO_BODY;
  return readChunked(request.body);
}

async function readChunked(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_BODY_BYTES) {
      await reader.cancel();
      throw payloadTooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** `path, method -> "GET, HEAD, PATCH"` when the path exists under other methods, else null. */
function methodTable(routes: PipelineOptions["routes"]) {
  let table: { pattern: RegExp; method: string }[] | undefined;
  return (path: string, method: string): string | null => {
    table ??= routes()
      .filter((r) => r.method !== "ALL")
      .map((r) => ({
        method: r.method,
        pattern: new RegExp(`^${r.path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+").replace(/\*/g, ".*")}/?$`),
      }));
    const methods = new Set(table.filter((r) => r.method !== method && r.pattern.test(path)).map((r) => r.method));
    if (methods.has("GET")) methods.add("HEAD"); // Elysia answers HEAD wherever GET is routed
    return methods.size > 0 ? [...methods].sort().join(", ") : null;
  };
}
