/**
 * A plugin's `ctx.http` as the host performs it (decisions §11): through the outbound guard
 * (SVC_OUTBOUND_ALLOWED_HOSTS holds, DNS answers included, redirects are not followed), methods
 * GET, POST, PUT, PATCH, DELETE and HEAD, a string body of at most 1 MiB, a 10 s time limit, the
 * response body read as text up to 1 MiB, at most 4 requests at a time per plugin (more wait).
 * Every refusal rejects inside the plugin with a message it can log.
 */
import { guardedFetch, OutboundBlockedError, readTextCapped, type OutboundPolicy } from "../lib/outbound";
import { VERSION } from "../version";
import type { HttpRequest, HttpResponse } from "./sandbox";

const METHODS: readonly string[] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
export const PLUGIN_HTTP_TIMEOUT_MS = 10_000;
export const PLUGIN_HTTP_MAX_BYTES = 1024 * 1024;
const CONCURRENCY = 4;
export const USER_AGENT = `flagsvc-plugins/${VERSION}`;

/** A failure whose message the plugin sees as it is. */
class HttpFailure extends Error {}

/** The request as the plugin gave it, checked; throws what the plugin sees as the rejection. */
function checked(request: HttpRequest, userAgent: string): { method: string; url: string; headers: Headers; body: string | undefined } {
  if (typeof request !== "object" || request === null) throw new HttpFailure("ctx.http takes { method, url, headers, body }");
  const method = typeof request.method === "string" ? request.method.toUpperCase() : request.method === undefined ? "GET" : "";
  if (!METHODS.includes(method)) throw new HttpFailure(`method must be one of ${METHODS.join(", ")}`);
  if (typeof request.url !== "string") throw new HttpFailure("url must be a string");
  const headers = new Headers();
  if (request.headers !== undefined) {
    if (typeof request.headers !== "object" || request.headers === null || Array.isArray(request.headers)) throw new HttpFailure("headers must be an object of strings");
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value !== "string") throw new HttpFailure(`header ${name} must be a string`);
      try {
        headers.set(name, value);
      } catch {
        throw new HttpFailure(`header ${name} is not a valid header`);
      }
    }
  }
  if (!headers.has("user-agent")) headers.set("user-agent", userAgent);
  const body = request.body;
  if (body !== undefined && body !== null) {
    if (typeof body !== "string") throw new HttpFailure("body must be a string (JSON.stringify it)");
    if (method === "GET" || method === "HEAD") throw new HttpFailure(`a ${method} request has no body`);
    if (Buffer.byteLength(body) > PLUGIN_HTTP_MAX_BYTES) throw new HttpFailure("body over 1 MiB");
  }
  return { method, url: request.url, headers, body: body ?? undefined };
}

/** One plugin's `ctx.http` (its own 4 slots). */
export function pluginHttp(policy: OutboundPolicy, userAgent: string): (request: HttpRequest) => Promise<HttpResponse> {
  let inFlight = 0;
  const waitingForSlot: (() => void)[] = [];
  return async (request) => {
    const { method, url, headers, body } = checked(request, userAgent);
    if (inFlight >= CONCURRENCY) await new Promise<void>((resolve) => waitingForSlot.push(resolve));
    inFlight++;
    const signal = AbortSignal.timeout(PLUGIN_HTTP_TIMEOUT_MS);
    try {
      const response = await guardedFetch(url, { method, headers, body, signal }, policy);
      const text = await readTextCapped(response, PLUGIN_HTTP_MAX_BYTES);
      if (text === null) throw new HttpFailure("response over 1 MiB");
      return { status: response.status, headers: response.headers.toJSON(), body: text };
    } catch (e) {
      if (e instanceof OutboundBlockedError || e instanceof HttpFailure) throw e;
      if (signal.aborted) throw new Error(`${method} ${url}: no answer within ${PLUGIN_HTTP_TIMEOUT_MS / 1000} s`);
      throw new Error(`${method} ${url}: request failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      inFlight--;
      waitingForSlot.shift()?.();
    }
  };
}
