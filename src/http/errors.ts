/**
 * The error shape of decisions §3 and the one place that produces it: `{ error, message }`,
 * plus `details: [{ path, message }]` for validation. Handlers throw ApiError (or a helper
 * below); Elysia's own validation, parse and not-found errors are mapped here too.
 */
import { t, type TSchema } from "elysia";

export type ErrorCode =
  | "VALIDATION_ERROR"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "PRO_EDITION_REQUIRED"
  | "HTTPS_REQUIRED"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "CONFLICT"
  | "PAYLOAD_TOO_LARGE"
  | "RATE_LIMITED"
  | "INTERNAL_ERROR";

export interface ErrorDetail {
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
    /** Extra top-level fields of the body (`retryAfter` of a 429). */
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
  }

  body(): Record<string, unknown> {
    return {
      error: this.code,
      message: this.message,
      ...(this.details ? { details: this.details } : {}),
      ...this.extra,
    };
  }
}

export const MAX_BODY_BYTES = 1024 * 1024;

export const validationError = (message: string, details?: ErrorDetail[]) =>
  new ApiError(400, "VALIDATION_ERROR", message, details);
export const notFound = (what = "Resource") => new ApiError(404, "NOT_FOUND", `${what} not found`);
export const conflict = (message: string) => new ApiError(409, "CONFLICT", message);
export const payloadTooLarge = () =>
  new ApiError(413, "PAYLOAD_TOO_LARGE", `Request body exceeds ${MAX_BODY_BYTES} bytes`);

// ---- schemas for the OpenAPI document ------------------------------------------------------

export const ErrorBody = t.Object(
  {
    error: t.String({ description: "Machine-readable code, e.g. VALIDATION_ERROR" }),
    message: t.String(),
    details: t.Optional(t.Array(t.Object({ path: t.String(), message: t.String() }))),
    retryAfter: t.Optional(t.Integer({ description: "Seconds until the rate-limit window resets (429 only)" })),
  },
  { $id: "#/components/schemas/Error", title: "Error" },
);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "VALIDATION_ERROR: bad body, query or path value",
  401: "UNAUTHORIZED: credential missing, malformed, unknown, revoked or expired",
  403: "FORBIDDEN, PRO_EDITION_REQUIRED or HTTPS_REQUIRED",
  404: "NOT_FOUND",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE: body over 1 MiB",
  429: "RATE_LIMITED",
  500: "INTERNAL_ERROR",
  503: "Service unavailable",
};

/** `response` entries for the error statuses a route can answer, for its OpenAPI operation. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const s of statuses) out[s] = t.Ref(ErrorBody, { description: ERROR_DESCRIPTIONS[s] });
  return out;
}

// ---- mapping Elysia's validation errors ------------------------------------------------------

interface ValueErrorLike {
  path: string;
  message: string;
  value?: unknown;
  schema?: { error?: unknown; type?: unknown; anyOf?: { type?: unknown }[]; [k: string]: unknown };
}

/** A readable message for one TypeBox value error. */
function describe(e: ValueErrorLike): string {
  const custom = e.schema?.error;
  if (typeof custom === "string") return custom;
  if (e.message === "Unexpected property") return "Unknown field";
  if (e.message === "Expected required property") return "Required";
  if (e.message === "Expected union value" && Array.isArray(e.schema?.anyOf)) {
    const types = [...new Set(e.schema.anyOf.map((s) => (s.type === "string" && "format" in s ? "integer" : s.type)).filter(Boolean))];
    return `Expected ${types.join(" or ")}`;
  }
  return e.message;
}

/**
 * Turns Elysia's ValidationError (`type` is body, query, params, headers or, for a single
 * coerced query value, property) into our details. Paths read `body.variants[0].key`.
 */
export function validationDetails(type: string, errors: ValueErrorLike[]): ErrorDetail[] {
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const e of errors) {
    const segments = e.path.split("/").filter(Boolean);
    let path = type === "property" ? "query" : type;
    for (const s of segments) path += /^\d+$/.test(s) ? `[${s}]` : `.${s}`;
    const message = describe(e);
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push({ path, message });
  }
  // TypeBox reports a missing property twice (required, then wrong type): keep the first.
  return details.filter((d, i) => d.message === "Required" || !details.some((o, j) => j < i && o.path === d.path));
}
