/**
 * The marketplace (Pro, decisions §11): the catalog's packages (src/plugins/catalog.ts) as the
 * API shows them, with their downloads. A package is shown by its latest version (the highest
 * in semver order); `versions` lists them all.
 */
import { notFound } from "../../http/errors";
import type { Catalog, CatalogPackage } from "../../plugins/catalog";
import type { Category } from "../../plugins/manifest";
import type { Sort } from "./model";
import type { DownloadStore } from "./store";

export interface MarketplaceQueryInput {
  category?: Category;
  q?: string;
  sort?: Sort;
}

const byName = (a: CatalogPackage, b: CatalogPackage) => a.name.localeCompare(b.name, "en", { sensitivity: "base" }) || (a.packageName < b.packageName ? -1 : 1);

export function marketplaceService(deps: { catalog: Catalog; downloads: DownloadStore }) {
  const { catalog } = deps;
  const listing = (p: CatalogPackage, downloads: Map<string, number>) => ({
    packageName: p.packageName,
    name: p.name,
    description: p.description,
    category: p.category,
    version: p.version,
    author: p.author,
    downloads: downloads.get(p.packageName) ?? 0,
    verified: p.verified,
  });
  const versionsOf = (packageName: string) => {
    const versions = catalog.versions(packageName);
    if (versions.length === 0) throw notFound(`Plugin package ${packageName}`);
    return versions;
  };

  return {
    async list(query: MarketplaceQueryInput) {
      const downloads = await deps.downloads.counts();
      const q = query.q?.toLowerCase();
      const found = catalog
        .packages()
        .filter((p) => query.category === undefined || p.category === query.category)
        .filter((p) => q === undefined || p.name.toLowerCase().includes(q) || p.description.toLowerCase().includes(q));
      const count = (p: CatalogPackage) => downloads.get(p.packageName) ?? 0;
      const order: Record<Sort, (a: CatalogPackage, b: CatalogPackage) => number> = {
        name: byName,
        popular: (a, b) => count(b) - count(a) || byName(a, b),
        newest: (a, b) => Date.parse(b.publishedAt) - Date.parse(a.publishedAt) || byName(a, b),
      };
      return found.sort(order[query.sort ?? "name"]).map((p) => listing(p, downloads));
    },

    async details(packageName: string) {
      const versions = versionsOf(packageName);
      const latest = versions[0]!;
      return {
        ...listing(latest, await deps.downloads.counts()),
        readme: latest.readme,
        configSchema: latest.configSchema,
        homepage: latest.homepage ?? null,
        versions: versions.map((p) => ({ version: p.version, publishedAt: p.publishedAt })),
      };
    },

    versions(packageName: string) {
      return { packageName, versions: versionsOf(packageName).map((p) => ({ version: p.version, publishedAt: p.publishedAt })) };
    },
  };
}

export type MarketplaceService = ReturnType<typeof marketplaceService>;
