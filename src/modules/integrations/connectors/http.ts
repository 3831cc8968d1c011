/**
 * What every connector shares about HTTP: the status rules every vendor follows (decisions §12),
 * Retry-After and rate-limit headers, reading a vendor's answer (headers, JSON, an excerpt for
 * `lastError`), and the base URL (`apiHost`) a request goes to. Pure, no I/O.
 */
import { Type } from "@sinclair/typebox";
import type { Outcome, VendorRequest, VendorResponse } from "./types";

// ---- reading an answer --------------------------------------------------------------------------

/** Header names in lower case (fetch gives them so; a hand-built response may not). */
export function lowerHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = v;
  return out;
}

/** A body on one line and cut at `max` characters, for an error message. */
export function excerpt(body: string, max = 200): string {
  const line = body.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/** What a vendor's answer says, for an error: its JSON `message` or `error` when a string, else an excerpt of the body. */
export function vendorSays(body: string): string {
  const answer = parseJson(body);
  for (const key of ["message", "error"]) if (typeof answer?.[key] === "string" && answer[key] !== "") return excerpt(answer[key]);
  return excerpt(body);
}

/** The text as JSON, or null when it is not JSON (read it as untrusted: any shape). */
export function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Retry-After (seconds or an HTTP date) in ms, or null. */
export function retryAfterMs(headers: Record<string, string>, now = Date.now()): number | null {
  const value = lowerHeaders(headers)["retry-after"];
  if (value === undefined) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * A vendor's X-RateLimit-Reset as a wait in ms, or null: `in` seconds from now (Datadog,
 * Segment) or `at` a UNIX time in seconds (Braze).
 */
export function rateLimitResetMs(headers: Record<string, string>, as: "in" | "at", now = Date.now()): number | null {
  const reset = Number(lowerHeaders(headers)["x-ratelimit-reset"] ?? Number.NaN);
  if (as === "in") return Number.isFinite(reset) && reset >= 0 ? reset * 1000 : null;
  return Number.isFinite(reset) && reset > 0 ? Math.max(0, reset * 1000 - now) : null;
}

// ---- the status rules ---------------------------------------------------------------------------

/** "<vendor> answered HTTP <status>: <detail>", the start of every error a connector reports. */
export function answered(vendor: string, status: number, detail: string): string {
  return `${vendor} answered HTTP ${status}${detail === "" ? "" : `: ${detail}`}`;
}

/** A refusal of the credentials: never retried, and the sender pauses the integration on a 401/403. */
export function badCredentials(vendor: string, status: number, detail: string, hint?: string): Outcome {
  return { kind: "failed", error: `bad credentials: ${answered(vendor, status, detail)}${hint ? ` (${hint})` : ""}`, credentials: true };
}

/** How a vendor departs from the shared rules (every field optional). */
export interface StatusRules {
  /** The wait when a retried answer has no Retry-After: the vendor's own rate-limit header, a documented pause. */
  fallbackWaitMs?(response: VendorResponse): number | null;
  /** What the vendor said, for the error; default `vendorSays`. */
  detail?(response: VendorResponse): string;
  /** What to check, added to a bad-credentials error. */
  credentialsHint?: string;
}

/**
 * The rules every vendor follows, for answers a connector has no special reading of: 2xx, all
 * taken; 401 and 403, bad credentials (never retried); 408, 429 and 5xx, retried after
 * Retry-After (seconds or an HTTP date), else after the vendor's fallback wait, else when the
 * sender's backoff says; any other 4xx, a malformed request (never retried).
 */
export function statusOutcome(vendor: string, request: VendorRequest, response: VendorResponse, rules: StatusRules = {}): Outcome {
  const { status } = response;
  if (status >= 200 && status < 300) return { kind: "sent", accepted: request.events, rejected: 0, error: null };
  const detail = rules.detail ? rules.detail(response) : vendorSays(response.body);
  if (status === 401 || status === 403) return badCredentials(vendor, status, detail, rules.credentialsHint);
  if (status === 408 || status === 429 || status >= 500) {
    const wait = retryAfterMs(response.headers) ?? rules.fallbackWaitMs?.(response) ?? null;
    return { kind: "retry", error: answered(vendor, status, detail), retryAfterMs: wait };
  }
  return { kind: "failed", error: answered(vendor, status, detail) };
}

// ---- where a request goes -----------------------------------------------------------------------

/**
 * `apiHost` when set (a proxy, a test receiver; scheme and host, maybe a path prefix), else the
 * vendor's host; no trailing slash; then `path` ("/...", maybe with a query).
 */
export function apiUrl(apiHost: string | undefined, vendorHost: string, path: string): string {
  return `${(apiHost === undefined || apiHost === "" ? vendorHost : apiHost).replace(/\/+$/, "")}${path}`;
}

/** The optional `apiHost` every connector's config has: a base URL with a scheme, what it replaces said in `description`. */
export const apiHostField = (description: string, defaultHost?: string) =>
  Type.Optional(Type.String({ pattern: "^https?://", ...(defaultHost === undefined ? {} : { default: defaultHost }), description }));
