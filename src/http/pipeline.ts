/**
 * The cross-cutting request pipeline, applied to every route of the app:
 *   request id -> credential and rate limit (auth.ts) -> HTTPS-behind-proxy check
 *   -> body size limit -> JSON body parser -> access guard (per route) -> (route)
 *   -> error mapping -> access log.
 * Everything on this path is constant work per request: no I/O, no per-request compilation.
 */
import type { Server } from "bun";
import { Elysia } from "elysia";
import type { Logger } from "../lib/log";
import { ApiError, MAX_BODY_BYTES, payloadTooLarge, validationDetails, validationError } from "./errors";

export interface PipelineOptions {
  log: Logger;
  /** TLS terminates here (HSTS on every response), or at a proxy (`SVC_BEHIND_PROXY`). */
  behindProxy: boolean;
  /** The app's routes, read on the first 404 to tell "unknown path" from "wrong method". */
  routes: () => readonly { method: string; path: string }[];
  /**
   * Credential and rate limit, right after the request id, so that its headers go on every
   * response; what it returns is kept on the context as `auth`. It gets the parts it needs, not
   * the context: Elysia prepares every part of a context that is handed to a function (query,
   * headers, cookies...), on every request.
   */
  admit: (request: Request, headers: Record<string, unknown>, server: Server<unknown> | null) => unknown;
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

/** Session ids double as bearer tokens in CE: never let one reach a log line. */
export function redactPath(path: string): string {
  return path.includes("sess_") ? path.replace(/sess_[A-Za-z0-9]+/g, "sess_[redacted]") : path;
}

export function pipeline(opts: PipelineOptions) {
  const { log, behindProxy } = opts;
  const allowedMethods = methodTable(opts.routes);

  return new Elysia({ name: "flagsvc/pipeline" })
    .headers({
      ...(behindProxy ? {} : { "strict-transport-security": "max-age=31536000" }),
      "x-content-type-options": "nosniff",
      "cache-control": "no-store",
    })
    .onRequest(async (c) => {
      const incoming = c.request.headers.get("x-request-id");
      const requestId = incoming !== null && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
      (c as unknown as RequestState).requestId = requestId;
      (c as unknown as RequestState).startedAt = performance.now();
      c.set.headers["x-request-id"] = requestId;
      const admitted = opts.admit(c.request, c.set.headers, c.server as Server<unknown> | null);
      (c as unknown as RequestState).auth = admitted instanceof Promise ? await admitted : admitted;
      if (behindProxy) {
        if (c.request.headers.get("x-forwarded-proto") !== "https") {
          throw new ApiError(403, "HTTPS_REQUIRED", "HTTPS is required: send requests through the TLS proxy");
        }
        c.set.headers["strict-transport-security"] = "max-age=31536000";
      }
      const length = c.request.headers.get("content-length");
      if (length !== null && Number(length) > MAX_BODY_BYTES) throw payloadTooLarge();
    })
    .onParse(async ({ request, contentType }) => {
      const text = await readBody(request);
      if (text.trim() === "") return null;
      if (!JSON_TYPE.test(contentType ?? "")) {
        throw validationError("Content-Type must be application/json");
      }
      try {
        return JSON.parse(text);
      } catch {
        throw validationError("Request body is not valid JSON");
      }
    })
    .onError(({ code, error, set, request, path }) => {
      let err: ApiError;
      if (error instanceof ApiError) err = error;
      else if (code === "VALIDATION") {
        // A single coerced query value ("property") arrives without its name: find it by value.
        const where = error.type === "property" ? `query.${queryKeyOf(request.url, error.value)}` : error.type;
        err = validationError("Invalid request", validationDetails(where, error.all as never));
      } else if (code === "PARSE") {
        err = error.cause instanceof ApiError ? error.cause : validationError("Request body could not be read");
      } else if (code === "NOT_FOUND") {
        const allow = allowedMethods(path, request.method);
        err = allow
          ? new ApiError(405, "METHOD_NOT_ALLOWED", `Method ${request.method} is not allowed on ${path}`, undefined, { allow })
          : new ApiError(404, "NOT_FOUND", `No route for ${request.method} ${path}`);
      } else {
        const requestId = (set.headers["x-request-id"] as string | undefined) ?? "";
        log.error("unhandled error", {
          requestId,
          method: request.method,
          path: redactPath(path),
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        });
        err = new ApiError(500, "INTERNAL_ERROR", `Internal error; request id ${requestId}`);
      }
      set.status = err.status;
      if (err.headers) Object.assign(set.headers, err.headers);
      return err.body();
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
    log.info("request", {
      method: request.method,
      path: redactPath(path),
      status: typeof status === "number" ? status : String(status),
      durationMs: Math.round((performance.now() - startedAt) * 100) / 100,
      requestId,
    });
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

/** Reads the body as text, refusing (413) past MAX_BODY_BYTES without buffering the rest. */
async function readBody(request: Request): Promise<string> {
  if (request.body === null) return "";
  if (request.headers.get("content-length") !== null) return request.text(); // length already checked
  const reader = request.body.getReader();
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
  return Buffer.concat(chunks).toString("utf8");
}

/** `path, method -> "GET, PATCH"` when the path exists under other methods, else null. */
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
    return methods.size > 0 ? [...methods].sort().join(", ") : null;
  };
}
