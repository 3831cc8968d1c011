/**
 * A plugin's `ctx.http` as the host performs it (issue 22, point 3): through the outbound guard
 * (SVC_OUTBOUND_ALLOWED_HOSTS holds, redirects are not followed), with a time limit and a cap on
 * the response body, which comes back as text.
 */
import { guardedFetch, type OutboundPolicy } from "../lib/outbound";
import type { HttpRequest, HttpResponse } from "./sandbox";

export const PLUGIN_HTTP_TIMEOUT_MS = 10_000;
export const PLUGIN_HTTP_MAX_BYTES = 1024 * 1024;

/** Reads a response body up to `max` bytes; more is an error (the rest is not read). */
async function cappedText(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`the response body is over ${max} bytes`);
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

export function pluginHttp(policy: OutboundPolicy, timeoutMs = PLUGIN_HTTP_TIMEOUT_MS, maxBytes = PLUGIN_HTTP_MAX_BYTES): (request: HttpRequest) => Promise<HttpResponse> {
  return async (request) => {
    if (typeof request.url !== "string" || typeof request.method !== "string") throw new Error("ctx.http needs { method, url } strings");
    if (request.body !== undefined && typeof request.body !== "string") throw new Error("ctx.http: body must be a string (JSON.stringify it)");
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const res = await guardedFetch(request.url, { method: request.method.toUpperCase(), headers: request.headers, body: request.body, signal }, policy);
      const headers: Record<string, string> = {};
      res.headers.forEach((value, name) => (headers[name] = value));
      return { status: res.status, headers, body: await cappedText(res, maxBytes) };
    } catch (e) {
      if (signal.aborted) throw new Error(`${request.method.toUpperCase()} ${request.url}: no answer within ${timeoutMs} ms`);
      throw e;
    }
  };
}
