/**
 * The error shape of decisions §3 and the one place that produces it: `{ error, message }`,
 * plus `details: [{ path, message }]` for validation. Handlers throw ApiError (or a helper
 * below); Elysia's own validation, parse and not-found errors are mapped here too.
 */
export type ErrorCode =
  | "VALIDATION_ERROR"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "PRO_EDITION_REQUIRED"
  | "HTTPS_REQUIRED"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "CONFLICT"
  | "PRECONDITION_FAILED"
  | "PAYLOAD_TOO_LARGE"
  | "RATE_LIMITED"
  | "INTERNAL_ERROR"
  | "SERVICE_UNAVAILABLE";

export interface ErrorDetail {
  path: string;
  message: string;
}

/**
 * What the parse stage leaves as the body of a guarded route when the body cannot be taken
 * (no JSON content type, not JSON, not an object, fields on a route that takes none...): the
 * access guard throws `error` after its decision, so that a caller without access gets its
 * 401/403 and learns nothing of the body first (api-spec, Authentication). `afterEdition`: the
 * route is also gated by edition (edition.ts), whose 403 comes first too, so that guard throws it.
 */
export class UnreadBody {
  constructor(
    readonly error: ApiError,
    readonly afterEdition: boolean,
  ) {}
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
export const notFound = (what: string) => new ApiError(404, "NOT_FOUND", `${what} not found`);
export const conflict = (message: string, details?: ErrorDetail[]) => new ApiError(409, "CONFLICT", message, details);
export const forbidden = (message: string) => new ApiError(403, "FORBIDDEN", message);
export const unreadableBody = () => validationError("Request body could not be read", [{ path: "body", message: "Could not be read" }]);
export const payloadTooLarge = () =>
  new ApiError(413, "PAYLOAD_TOO_LARGE", `Request body exceeds ${MAX_BODY_BYTES} bytes`);

// ---- mapping Elysia's validation errors ------------------------------------------------------

interface ValueErrorLike {
  path: string;
  message: string;
  value?: unknown;
  schema?: { error?: unknown; type?: unknown; anyOf?: { type?: unknown }[]; [UNKNOWN_FIELD_HINTS]?: Record<string, string>; [k: string]: unknown };
}

/**
 * An object schema's option: for a field it does not take but callers are likely to send, why
 * not (`{ environment: "the API key chooses the environment" }`); its 400 says `Unknown field: <why>`.
 * A vendor extension, so the API document may show it as it is.
 */
export const UNKNOWN_FIELD_HINTS = "x-flagsvc-unknown-fields";

/** The message of an unknown field: with the object schema's hint for it, when it has one. */
function unknownField(e: ValueErrorLike): string {
  const hint = e.schema?.[UNKNOWN_FIELD_HINTS]?.[e.path.slice(e.path.lastIndexOf("/") + 1)];
  return hint === undefined ? "Unknown field" : `Unknown field: ${hint}`;
}

/**
 * The message of a config property that its schema does not take (plugin and integration configs,
 * whose keys a caller types from a vendor's docs): the ones it takes.
 */
export const unknownConfigField = (known: readonly string[]) => (known.length > 0 ? `Unknown field; known: ${known.join(", ")}` : "Unknown field; it takes no fields");

/** A readable message for one TypeBox value error. */
export function describe(e: ValueErrorLike): string {
  const custom = e.schema?.error;
  if (typeof custom === "string") return custom;
  if (e.message === "Unexpected property") return unknownField(e);
  if (e.message === "Expected required property") return "Required";
  if (e.message === "Expected union value" && Array.isArray(e.schema?.anyOf)) {
    // A union of literals (a choice among values): name them.
    const values = e.schema.anyOf.map((s) => (s as { const?: unknown }).const);
    if (values.every((v) => typeof v === "string" || typeof v === "number")) return `Must be one of ${values.join(", ")}`;
    const types = [...new Set(e.schema.anyOf.map((s) => (s.type === "string" && "format" in s ? "integer" : s.type)).filter(Boolean))];
    return `Expected ${types.join(" or ")}`;
  }
  return e.message;
}

/**
 * Turns the value errors of one part of the request (`where`: body, query, params, headers, or
 * the path of a single value, e.g. `query.page`) into our details: `body.variants[0].key`.
 */
export function validationDetails(where: string, errors: ValueErrorLike[]): ErrorDetail[] {
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const e of errors) {
    const segments = e.path.split("/").filter(Boolean);
    let path = where;
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
