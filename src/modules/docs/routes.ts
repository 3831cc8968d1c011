/**
 * The API document (`GET /v1/openapi.json`) and its reference page (`GET /v1/docs`), served
 * entirely from the binary: the page's script is vendored, so it works air-gapped.
 */
import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { VERSION } from "../../version";
import scalarScript from "./vendor/scalar-api-reference.js.asset" with { type: "file" };

const SCRIPT_PATH = "/v1/docs/scalar.js";

const DESCRIPTION = `Self-hosted feature-flag service.

Every request carries \`Authorization: Bearer <credential>\` (an API key \`svc_sk_{scope}_...\`, an admin key
\`svc_admin_...\` or a login JWT), except \`GET /v1/health\` and these documentation routes.
Errors have the body \`{ "error": CODE, "message": TEXT }\`, plus \`details: [{ path, message }]\` for
validation errors. Every response carries \`X-Request-Id\` (an incoming sane one is kept).
Request bodies are JSON (\`Content-Type: application/json\`), at most 1 MiB; unknown fields are rejected.`;

export const docsRoutes = () =>
  new Elysia({ name: "flagsvc/docs" })
    .use(
      openapi({
        path: "/v1/docs",
        specPath: "/v1/openapi.json",
        exclude: { paths: ["/v1/docs", SCRIPT_PATH, "/v1/openapi.json"] },
        documentation: {
          info: { title: "flagsvc API", version: VERSION, description: DESCRIPTION },
          components: {
            schemas: {
              Error: {
                type: "object",
                required: ["error", "message"],
                properties: {
                  error: { type: "string", description: "VALIDATION_ERROR, UNAUTHORIZED, FORBIDDEN, PRO_EDITION_REQUIRED, HTTPS_REQUIRED, NOT_FOUND, METHOD_NOT_ALLOWED, CONFLICT, PAYLOAD_TOO_LARGE, RATE_LIMITED or INTERNAL_ERROR" },
                  message: { type: "string" },
                  details: {
                    type: "array",
                    description: "VALIDATION_ERROR only: one entry per problem; path reads like body.variants[0].key or query.page",
                    items: { type: "object", required: ["path", "message"], properties: { path: { type: "string" }, message: { type: "string" } } },
                  },
                  retryAfter: { type: "integer", description: "RATE_LIMITED only: seconds until the window resets" },
                },
              },
            },
            securitySchemes: {
              bearer: { type: "http", scheme: "bearer", description: "API key, admin key or login JWT" },
            },
          },
          security: [{ bearer: [] }],
        },
        scalar: {
          url: "/v1/openapi.json",
          cdn: SCRIPT_PATH,
          withDefaultFonts: false,
          hideClientButton: true,
          telemetry: false,
        } as never,
      }),
    )
    .get(SCRIPT_PATH, ({ set }) => {
      set.headers["content-type"] = "text/javascript; charset=utf-8";
      set.headers["cache-control"] = "public, max-age=86400";
      return Bun.file(scalarScript);
    });
