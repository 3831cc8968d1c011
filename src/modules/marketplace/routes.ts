/** The marketplace (Pro): routes (api-spec: Marketplace; decisions §4, §9, §11). */
import { Elysia } from "elysia";
import type { Config } from "../../config";
import { accessGuard } from "../../http/auth";
import { editionGuard, PRO_ONLY_NOTE } from "../../http/edition";
import { MarketplacePluginDetails, MarketplacePluginList, MarketplaceQuery, MarketplaceVersions, PackageParams } from "./model";
import type { MarketplaceService } from "./service";

const TAGS = ["Marketplace (Pro)"];
const WHO = "Who: admin keys and login JWTs of role admin; any other credential is 403 FORBIDDEN, none 401.";
const CATALOG =
  "The catalog: the packages shipped with flagsvc (built into the binary, `verified: true`) and those dropped into DATA_DIR/marketplace/ (`flagsvc plugins add`, air-gapped installs; `verified: false`), picked up while the server runs. A package is shown by its latest version, the highest in semver order. `downloads`: installs of the package on this instance (every version, removed plugins included), not a public count.";
// Elysia decodes path parameters: `%40acme%2Fecho` arrives as `@acme/echo` (a malformed escape is its 400).
const NAME = "The package name is URL-encoded in the path: `@flagsvc/posthog` is `%40flagsvc%2Fposthog` (a malformed escape is 400 VALIDATION_ERROR). Unknown package 404 NOT_FOUND.";

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
    });
