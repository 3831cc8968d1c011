/**
 * What the braze, datadog and slack connectors share: the status rules of the brief (429 and
 * 5xx/408 retried, Retry-After honoured; 401/403 bad credentials, never retried), a short
 * excerpt of a vendor's answer for `lastError`, deterministic ids, and base-URL joining.
 * Pure: no I/O.
 */
import { createHash } from "node:crypto";
import { retryAfterMs, type FlagChangeEvent, type Outcome, type VendorResponse } from "./types";

/** Header names in lower case (fetch gives them so; a hand-built response may not). */
export function lowerHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = v;
  return out;
}

/** The answer's body, on one line and cut, for an error message. */
export function excerpt(body: string, max = 200): string {
  const line = body.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/** JSON.parse, or null. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * The shared rules: 429 -> retry after Retry-After (else `fallbackWaitMs`, the vendor's own
 * rate-limit header read by the caller); 408 and 5xx -> retry; 401 and 403 -> failed, bad
 * credentials. Null for every other status: the connector reads those as its vendor documents.
 */
export function commonOutcome(vendor: string, response: VendorResponse, fallbackWaitMs: number | null = null): Outcome | null {
  const { status } = response;
  const said = response.body ? `: ${excerpt(response.body)}` : "";
  if (status === 429) {
    const wait = retryAfterMs(lowerHeaders(response.headers)) ?? fallbackWaitMs;
    return { kind: "retry", error: `${vendor} rate limit (HTTP 429)${said}`, retryAfterMs: wait };
  }
  if (status === 408 || status >= 500) {
    return { kind: "retry", error: `${vendor} answered HTTP ${status}${said}`, retryAfterMs: retryAfterMs(lowerHeaders(response.headers)) };
  }
  if (status === 401 || status === 403) return { kind: "failed", error: `bad credentials: ${vendor} answered HTTP ${status}${said}` };
  return null;
}

/** A hex SHA-256 of the parts joined with "|": the same input always gives the same id. */
export function sha256(...parts: readonly (string | null)[]): string {
  return createHash("sha256").update(parts.map((p) => p ?? "").join("|")).digest("hex");
}

/** `base` (scheme and host, maybe a path prefix, maybe a trailing slash) + `path` ("/..."). */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}${path}`;
}

/** `items` in slices of at most `size`. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** A flag's state for people: "on", "off, rollout 50%". */
export function stateText(state: FlagChangeEvent["data"]["currentState"]): string {
  const rollout = state.rolloutPercentage === undefined || state.rolloutPercentage === null ? "" : `, rollout ${state.rolloutPercentage}%`;
  return `${state.enabled ? "on" : "off"}${rollout}`;
}
