/** The marketplace (Pro): routes (api-spec: Marketplace; decisions §4, §9, §11). */
import { Elysia, t } from "elysia";
import type { Config } from "../../config";
import { accessGuard } from "../../http/auth";
import { editionGuard, PRO_ONLY_NOTE } from "../../http/edition";
import { ApiError } from "../../http/errors";
import { MarketplacePluginDetails, MarketplacePluginList, MarketplaceQuery, MarketplaceVersions, PackageParams } from "./model";
import type { MarketplaceService } from "./service";

const TAGS = ["Marketplace (Pro)"];
const WHO = "Who: admin keys and login JWTs of role admin; any other credential is 403 FORBIDDEN, none 401.";
const CATALOG =
  "The catalog: the packages shipped with flagsvc (built into the binary, `verified: true`) and those dropped into DATA_DIR/marketplace/ (`flagsvc plugins add`, air-gapped installs; `verified: false`), picked up while the server runs. A package is shown by its latest version, the highest in semver order. `downloads`: installs of the package on this instance (every version, removed plugins included), not a public count.";
// Elysia decodes path parameters: `%40acme%2Fecho` arrives as `@acme/echo` (a malformed escape is its 400).
const NAME =
  "A scoped package name goes in the path as it is, `/v1/marketplace/plugins/@flagsvc/posthog`, or URL-encoded, `%40flagsvc%2Fposthog` (a malformed escape is 400 VALIDATION_ERROR). Unknown package 404 NOT_FOUND.";

/**
 * A scoped name written as it is (`@flagsvc/posthog`) spans two path segments: the `@:scope/:name`
 * routes take it (the routers match the `@` before the scope, so other paths do not reach them
 * and keep their 404 and 405 answers), with the documented routes' access, edition and answers;
 * the API document describes the one-segment form only.
 *
 * Elysia's router (app.handle, and the listening server for what Bun's router leaves) also
 * matches a route's URL-encoded form, `%40:scope/:name`: `/%40acme%2Fecho/versions` reaches the
 * details route with the scope `acme/echo` (decoded) and the name `versions`. A scope holding a
 * `/` is such an encoded name: its `versions` are asked for, anything else after it is no route,
 * refused before the access decision (as the router refuses it without these routes).
 */
const ScopedParams = t.Object({ scope: t.String(), name: t.String() });
const HIDDEN = { hide: true } as const;
type Scoped = { params: { scope: string; name: string }; request: Request; path: string };
const encoded = (params: Scoped["params"]) => params.scope.includes("/");

const noRoute = (request: Request, path: string) => new ApiError(404, "NOT_FOUND", `No route for ${request.method} ${path}`);

/**
 * Route-level transforms: they run before the access and edition guards' own. They name the
 * parts of the context they use (Elysia reads hooks' source: see auth.ts).
 */
const onlyVersionsAfterEncoded = ({ params, request, path }: Scoped) => {
  if (encoded(params) && params.name !== "versions") throw noRoute(request, path);
};
const notAfterEncoded = ({ params, request, path }: Scoped) => {
  if (encoded(params)) throw noRoute(request, path);
};

export const marketplaceRoutes = (marketplace: MarketplaceService, config: Pick<Config, "edition">) =>
  new Elysia({ name: "flagsvc/marketplace" })
    .use(accessGuard())
    .use(editionGuard(config))
    .get("/v1/marketplace/plugins", async ({ query }) => ({ plugins: await marketplace.list(query) }), {
      access: "admin",
      edition: "pro",
      query: MarketplaceQuery,
      response: { 200: MarketplacePluginList },
      detail: {
        tags: TAGS,
        summary: "Browse the plugin marketplace",
        description: `${CATALOG} Filters, combined: \`category\` exact (analytics, monitoring, crm); \`q\` a case-insensitive substring of the name or the description. \`sort\`: \`name\` (the default; A to Z, any case), \`popular\` (most downloads first), \`newest\` (latest version's publishedAt, newest first); ties by name. Unknown query parameters or values are 400 VALIDATION_ERROR with \`details\` at \`query.<name>\`. ${PRO_ONLY_NOTE} ${WHO}`,
      },
    })
    .get("/v1/marketplace/plugins/:packageName", ({ params }) => marketplace.details(params.packageName), {
      access: "admin",
      edition: "pro",
      params: PackageParams,
      response: { 200: MarketplacePluginDetails },
      detail: {
        tags: TAGS,
        summary: "A marketplace plugin's details",
        description: `The listing's fields plus \`readme\` (Markdown), \`configSchema\` (what an install's \`config\` must match), \`homepage\` (null when absent), all of the latest version, and \`versions\` (every version, newest first, with its publishedAt). ${NAME} ${PRO_ONLY_NOTE} ${WHO}`,
      },
    })
    .get("/v1/marketplace/plugins/:packageName/versions", ({ params }) => marketplace.versions(params.packageName), {
      access: "admin",
      edition: "pro",
      params: PackageParams,
      response: { 200: MarketplaceVersions },
      detail: {
        tags: TAGS,
        summary: "A marketplace plugin's versions",
        description: `\`{ packageName, versions: [{ version, publishedAt }] }\`, newest first (semver order). Any of them may be installed (\`version\` of the install; \`latest\` is the first). ${NAME} ${PRO_ONLY_NOTE} ${WHO}`,
      },
    })
    .get("/v1/marketplace/plugins/@:scope/:name", ({ params }) => (encoded(params) ? marketplace.versions(`@${params.scope}`) : marketplace.details(`@${params.scope}/${params.name}`)), {
      transform: onlyVersionsAfterEncoded,
      access: "admin",
      edition: "pro",
      params: ScopedParams,
      response: { 200: t.Union([MarketplacePluginDetails, MarketplaceVersions]) },
      detail: HIDDEN,
    })
    .get("/v1/marketplace/plugins/@:scope/:name/versions", ({ params }) => marketplace.versions(`@${params.scope}/${params.name}`), {
      transform: notAfterEncoded,
      access: "admin",
      edition: "pro",
      params: ScopedParams,
      response: { 200: MarketplaceVersions },
      detail: HIDDEN,
    });
