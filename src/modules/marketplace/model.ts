/** The marketplace (Pro): request and response schemas (api-spec: Marketplace plugin; decisions §11). */
import { t } from "elysia";
import { OneOf, ResponseInt, Timestamp } from "../../http/schema";
import { CATEGORIES } from "../../plugins/manifest";

export const SORTS = ["popular", "newest", "name"] as const;
export type Sort = (typeof SORTS)[number];
export const Q_MAX = 200;

export const MarketplaceQuery = t.Object(
  {
    category: t.Optional(OneOf(CATEGORIES, { description: `Only this category (exact): ${CATEGORIES.join(", ")}` })),
    q: t.Optional(t.String({ maxLength: Q_MAX, description: "Only packages whose name or description contains this text, in any case", error: `Must be text of at most ${Q_MAX} characters` })),
    sort: t.Optional(OneOf(SORTS, { description: "name (the default): by name, A to Z; popular: most downloads first; newest: latest publishedAt first" })),
  },
  { additionalProperties: false },
);

export const PackageParams = t.Object({ packageName: t.String({ description: "The package name; a scoped one URL-encoded (`%40flagsvc%2Fposthog`) or as it is (`@flagsvc/posthog`)" }) });

const listing = {
  packageName: t.String({ description: "npm-style package name, scoped or not" }),
  name: t.String(),
  description: t.String(),
  category: t.String({ description: CATEGORIES.join(", ") }),
  version: t.String({ description: "The latest version (the highest, in semver order)" }),
  author: t.String(),
  downloads: ResponseInt({ description: "Installs of this package on this instance (every version; removed plugins included)" }),
  verified: t.Boolean({ description: "true: shipped with flagsvc (built into the binary); false: dropped into DATA_DIR/marketplace/ (air-gapped install)" }),
};

export const MarketplacePlugin = t.Object(listing, { title: "MarketplacePlugin" });
export const MarketplacePluginList = t.Object({ plugins: t.Array(MarketplacePlugin) }, { title: "MarketplacePluginList" });

export const PackageVersion = t.Object({ version: t.String(), publishedAt: Timestamp() }, { title: "MarketplacePluginVersion" });

export const MarketplacePluginDetails = t.Object(
  {
    ...listing,
    readme: t.String({ description: "The package's README.md (Markdown); empty when it has none" }),
    configSchema: t.Record(t.String(), t.Unknown(), { description: 'The JSON Schema (draft 2020-12) an install\'s `config` must match; properties with `"secret": true` are shown as "********" wherever a plugin is returned' }),
    homepage: t.Union([t.String(), t.Null()], { description: "null when the package names none" }),
    versions: t.Array(PackageVersion, { description: "Every version in the catalog, newest first" }),
  },
  { title: "MarketplacePluginDetails", description: "The latest version's fields" },
);

export const MarketplaceVersions = t.Object({ packageName: t.String(), versions: t.Array(PackageVersion, { description: "Newest first (semver order)" }) }, { title: "MarketplacePluginVersions" });
