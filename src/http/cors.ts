/**
 * Cross-origin access for web pages (`SVC_CORS_ORIGINS`, docs/openfeature.md): only the
 * evaluation routes, the OFREP routes and the OFREP change stream take part; the management
 * routes and the definitions never answer a browser of another origin. Nothing is allowed by
 * default. No credentials mode: the pages send an API key in a header, never a cookie.
 */
export const CORS_ALLOWED_HEADERS = "authorization, content-type, x-api-key, x-service-session, x-request-id, if-none-match, last-event-id";
const EXPOSED_HEADERS = "etag, retry-after, x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset";
/** How long a browser may keep a preflight's answer. */
const MAX_AGE_SECONDS = "600";

export class Cors {
  private readonly any: boolean;
  private readonly origins: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.any = origins.includes("*");
    this.origins = new Set(origins.filter((o) => o !== "*"));
  }

  /** Whether any origin is allowed at all (else the routes carry no CORS header, not even `Vary`). */
  get enabled(): boolean {
    return this.any || this.origins.size > 0;
  }

  /** The request's `Origin` when it is allowed, else null. */
  allowed(request: Request): string | null {
    const origin = request.headers.get("origin");
    if (origin === null) return null;
    return this.any || this.origins.has(origin) ? origin : null;
  }

  /**
   * Sets the answer's CORS headers on `headers` (a route's response header record): the allowed
   * origin and what a page may read; `Vary: Origin` is the routes' constant header (`VARY`).
   */
  apply(request: Request, headers: Record<string, unknown>): void {
    const origin = this.allowed(request);
    if (origin === null) return;
    headers["access-control-allow-origin"] = origin;
    headers["access-control-expose-headers"] = EXPOSED_HEADERS;
  }

  /**
   * The answer to a preflight (`OPTIONS`) of a route taking `methods`: 204 with what may be sent,
   * or 403 for an origin not listed (a browser refuses the real request then; a person trying it
   * by hand reads why).
   */
  preflight(request: Request, methods: string): Response {
    const origin = this.allowed(request);
    if (origin === null) {
      const sent = request.headers.get("origin");
      const message = sent === null ? "A preflight request carries an Origin header" : `Origin ${sent} is not allowed: it is not listed in SVC_CORS_ORIGINS`;
      return Response.json({ error: "FORBIDDEN", message }, { status: 403, headers: { ...VARY, "cache-control": "no-store" } });
    }
    return new Response(null, {
      status: 204,
      headers: {
        ...VARY,
        "access-control-allow-origin": origin,
        "access-control-allow-methods": methods,
        "access-control-allow-headers": CORS_ALLOWED_HEADERS,
        "access-control-max-age": MAX_AGE_SECONDS,
        "cache-control": "no-store",
      },
    });
  }
}

/** On every answer of a route that takes part, while any origin is allowed. */
export const VARY: Readonly<Record<string, string>> = { vary: "Origin" };
