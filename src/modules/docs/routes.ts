/**
 * The API document (`GET /v1/openapi.json`) and its reference page (`GET /v1/docs`), served
 * entirely from the binary: the page's script is vendored, so it works air-gapped. The ways in
 * a browser takes come here too: `/favicon.ico` is ours (`GET /` is the console's: src/modules/console/).
 *
 * The document comes from @elysiajs/openapi's generator over every route of the app. One
 * thing is added here: request bodies. The generator lists a body's media types from named
 * parsers only, and ours is a function (src/http/pipeline.ts: JSON with the 1 MiB limit), so
 * each route's own body schema (TypeBox is JSON Schema) is put back as `application/json`.
 */
import { toOpenAPISchema } from "@elysiajs/openapi";
import { OptionalKind, type TSchema } from "@sinclair/typebox";
import { Elysia, type AnyElysia } from "elysia";
import { VERSION } from "../../version";
import favicon from "./favicon.ico" with { type: "file" };
import scalarScript from "./vendor/scalar-api-reference.js.asset" with { type: "file" };

const SPEC_PATH = "/v1/openapi.json";
const PAGE_PATH = "/v1/docs";
const SCRIPT_PATH = "/v1/docs/scalar.js";
const FAVICON_PATH = "/favicon.ico";
/** Static files: a day in caches (the rest of the API is `no-store`). */
const STATIC_CACHE = "public, max-age=86400";

const DESCRIPTION = `Self-hosted feature-flag service. This reference is also at \`/v1/docs\` (linked from the admin console at \`/\`); its
\`servers\` entry names the origin this document was fetched from (https and the request's \`Host\`).

Every request carries \`Authorization: Bearer <credential>\` (an API key \`svc_sk_{scope}_...\`, an admin key
\`svc_admin_...\` or a login JWT), except \`GET /v1/health\`, \`POST /v1/auth/login\` and these documentation routes.
Errors have the body \`{ "error": CODE, "message": TEXT }\`, plus \`details: [{ path, message }]\` for
validation errors, for the 401 of a request without an \`Authorization\` header or with one of our keys or tokens sent
without \`Bearer \`, and for the scope 403 (all at \`headers.authorization\`).
A refused credential is told what the endpoint takes: API keys get the spec's 401 \`Invalid or expired API key\`
and 403 \`This key scope does not have access to this endpoint\`, whose \`details\` name the key's scope and the scopes the
endpoint takes (\`This key has scope eval; this endpoint takes a key of scope mgmt or full\`); an admin key or a login token on an endpoint that
takes API keys only gets 403 naming them (\`Evaluation takes a project API key of scope eval, test, full or client\`). Every response carries \`X-Request-Id\` (an incoming sane one is kept) and
\`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\`, \`X-RateLimit-Reset\`.
Request bodies are JSON (\`Content-Type: application/json\`) in UTF-8, at most 1 MiB; unknown fields (\`__proto__\` too)
are rejected. A body that is not UTF-8 is 400 \`Request body is not valid UTF-8\` (a U+FFFD sent as UTF-8 is fine).`;

const ERROR_SCHEMA = {
  type: "object",
  required: ["error", "message"],
  properties: {
    error: {
      type: "string",
      description:
        "VALIDATION_ERROR, UNAUTHORIZED, FORBIDDEN, PRO_EDITION_REQUIRED, HTTPS_REQUIRED, NOT_FOUND, METHOD_NOT_ALLOWED, CONFLICT, PRECONDITION_FAILED, PAYLOAD_TOO_LARGE, RATE_LIMITED, INTERNAL_ERROR or SERVICE_UNAVAILABLE (PostgreSQL unreachable; Retry-After: 1)",
    },
    message: { type: "string" },
    details: {
      type: "array",
      description:
        "VALIDATION_ERROR: one entry per problem; path reads like body.variants[0].key or query.page. UNAUTHORIZED without an Authorization header: one entry at headers.authorization",
      items: { type: "object", required: ["path", "message"], properties: { path: { type: "string" }, message: { type: "string" } } },
    },
    retryAfter: { type: "integer", description: "RATE_LIMITED only: seconds until the window resets" },
  },
};

type Operation = { requestBody?: unknown; security?: unknown[]; responses?: Record<string, unknown>; "x-flagsvc-access"?: string };

const ERROR_RESPONSE = {
  description: "Error: 400, 401, 403, 404, 405, 409, 413, 429 or 500, as the description says",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
};

function buildDocument(app: AnyElysia) {
  const { paths, components } = toOpenAPISchema(app, { paths: [SPEC_PATH, PAGE_PATH, SCRIPT_PATH, FAVICON_PATH] }, undefined, undefined, "3.1.2");
  for (const route of app.routes) {
    const operation = (paths as Record<string, Record<string, Operation>>)[route.path.replace(/:([^/]+)/g, "{$1}")]?.[route.method.toLowerCase()];
    if (operation === undefined) continue;
    // Responses the route's `detail` describes beside its schemas (a 304 without a body) are kept: the generator drops them.
    const described = (route.hooks?.detail as { responses?: Record<string, unknown> } | undefined)?.responses;
    operation.responses = { ...described, ...operation.responses, default: ERROR_RESPONSE };
    // Routes without an access group (health, login) need no credential.
    if (operation["x-flagsvc-access"] === undefined) operation.security = [];
    const body = route.hooks?.body as TSchema | undefined;
    if (body === undefined || typeof body !== "object") continue;
    operation.requestBody = {
      required: body[OptionalKind] !== "Optional",
      content: { "application/json": { schema: JSON.parse(JSON.stringify(body)) } },
    };
  }
  return {
    openapi: "3.1.2",
    info: { title: "flagsvc API", version: VERSION, description: DESCRIPTION },
    security: [{ bearer: [] }],
    paths,
    components: {
      ...components,
      schemas: { ...components?.schemas, Error: ERROR_SCHEMA },
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "API key, admin key or login JWT" } },
    },
  };
}

/**
 * The page may load and call only this server (the bundled script, the document): a vendored
 * bundle that tried to reach elsewhere would fail visibly instead. Inline styles: the reference
 * sets them at run time.
 */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>flagsvc API</title>
  </head>
  <body>
    <script id="api-reference" data-configuration='${JSON.stringify({
      url: SPEC_PATH,
      withDefaultFonts: false,
      hideClientButton: true,
      telemetry: false,
      // Features that call Scalar's services: nothing to reach from an air-gapped install.
      showDeveloperTools: "never",
      agent: { disabled: true },
      mcp: { disabled: true },
    })}'></script>
    <script src="${SCRIPT_PATH}"></script>
  </body>
</html>`;

/** As Elysia labels the JSON it serialises itself. */
const JSON_CONTENT_TYPE = "application/json;charset=utf-8";
/** How many origins' documents are kept ready (a Host header is the client's to choose). */
const ORIGINS_KEPT = 8;
/** A host name, an IPv4 address or a bracketed IPv6 address, with an optional port. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$/;

/**
 * The document's JSON text as fetched through `host` (the request's Host header): with a
 * `servers` entry naming that origin, so that the page's generated examples run as copied. The
 * scheme is always https: TLS ends here, or behind a proxy that must say `X-Forwarded-Proto:
 * https` to get this far. A missing or malformed Host gets no entry (nothing sent can land in the
 * document but a host name or address); then the page's own origin applies.
 */
function documentText(base: string, host: string | null, byOrigin: Map<string, string>): string {
  if (host === null || host.length > 261 || !HOST.test(host)) return base;
  const origin = `https://${host.toLowerCase()}`;
  let text = byOrigin.get(origin);
  if (text === undefined) {
    // The entry spliced in ahead of the rest: the document is built and serialised once.
    text = `{"servers":[{"url":${JSON.stringify(origin)}}],${base.slice(1)}`;
    if (byOrigin.size < ORIGINS_KEPT) byOrigin.set(origin, text);
  }
  return text;
}

/** `root` gives the whole app: the document describes every route, built once on first use. */
export const docsRoutes = (root: () => AnyElysia) => {
  let document: string | undefined;
  const byOrigin = new Map<string, string>();
  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "flagsvc/docs" })
    .get(
      SPEC_PATH,
      ({ request }) =>
        new Response(documentText((document ??= JSON.stringify(buildDocument(root()))), request.headers.get("host"), byOrigin), {
          headers: { "content-type": JSON_CONTENT_TYPE },
        }),
      hidden,
    )
    .get(PAGE_PATH, () => new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8", "content-security-policy": PAGE_CSP } }), hidden)
    .get(SCRIPT_PATH, ({ set }) => staticFile(set.headers, scalarScript, "text/javascript; charset=utf-8"), hidden)
    .get(FAVICON_PATH, ({ set }) => staticFile(set.headers, favicon, "image/x-icon"), hidden);
};

/** A file embedded in the binary, with its type and a day's caching. */
function staticFile(headers: Record<string, unknown>, path: string, type: string) {
  headers["content-type"] = type;
  headers["cache-control"] = STATIC_CACHE;
  return Bun.file(path);
}
