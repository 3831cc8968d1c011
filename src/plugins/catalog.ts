/**
 * The plugin catalog (decisions §11): the first-party packages built into the binary (the repo's
 * plugins/, embedded by scripts/embed-plugins.ts; `verified: true`) plus the packages dropped into
 * `DATA_DIR/marketplace/` (air-gapped installs; `verified: false`). Each package version is a
 * folder directly inside either place, of any name: its `plugin.json` says which package and
 * version it is. Reads are synchronous, from an index in memory.
 *
 * The marketplace folder is read at start and watched: a changed folder is read again alone
 * (debounced), and the index rebuilt from what was already read. A malformed package, or a
 * second folder holding a package version already there (first-party wins, otherwise the first
 * folder in name order), is skipped with one warning naming the folder and why; it never fails
 * a start. Folders whose name starts with "." are not packages (`flagsvc plugins add` writes
 * there first, then renames into place). A package never reaches outside its folder
 * (package-files.ts): a folder holding a symbolic or hard link, or one that is a link itself, is
 * skipped the same way, and the files are read so that a link swapped in later is not followed.
 */
import { type FSWatcher, lstatSync, mkdirSync, readdirSync, watch } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { firstPartyPackages } from "../../plugins/index";
import type { Logger } from "../lib/log";
import { PackageError, readPackage, type PluginPackage } from "./manifest";
import { packageTree, readInside } from "./package-files";

export const MARKETPLACE_DIR = "marketplace";
const DEBOUNCE_MS = 200;

/** Entries by key, in code-point order (folder names, package names). */
const byKey = ([a]: [string, unknown], [b]: [string, unknown]) => (a < b ? -1 : a > b ? 1 : 0);

export interface CatalogPackage extends PluginPackage {
  /** First-party (built in) or dropped into the marketplace folder. */
  verified: boolean;
  /** Where it was read: `plugins/NAME` (built in) or the marketplace folder's path. */
  folder: string;
}

/** A folder read: its package, or why it is not one. */
type Read = { pkg: CatalogPackage } | { reason: string };

/**
 * Reads one package folder on disk: its tree first (a link anywhere in it is a PackageError),
 * then each file `readPackage` asks for through `readInside` (no file: undefined).
 */
export function readPackageFolder(dir: string): PluginPackage {
  packageTree(dir);
  return readPackage((path) => readInside(dir, path)?.toString("utf8"));
}

const attempt = (read: () => PluginPackage, verified: boolean, folder: string): Read => {
  try {
    return { pkg: { ...read(), verified, folder } };
  } catch (e) {
    if (e instanceof PackageError) return { reason: e.message };
    return { reason: `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
  }
};

export interface CatalogOptions {
  dataDir: string;
  log: Logger;
  /** The built-in packages' files by folder (default: the embedded plugins/; tests give fixtures). */
  firstParty?: Record<string, Record<string, string>>;
}

export class Catalog {
  readonly marketplaceDir: string;
  private readonly log: Logger;
  private readonly builtIn: Map<string, Read>;
  /** Marketplace folder name -> what it held when last read. */
  private readonly dropped = new Map<string, Read>();
  /** Package name -> its versions, newest first. */
  private index = new Map<string, CatalogPackage[]>();
  /** Folders already reported, with the reason: a folder is warned about once per reason. */
  private readonly reported = new Map<string, string>();
  private watcher: FSWatcher | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly changed = new Set<string>();

  constructor(options: CatalogOptions) {
    this.log = options.log;
    this.marketplaceDir = join(options.dataDir, MARKETPLACE_DIR);
    const firstParty = options.firstParty ?? firstPartyPackages;
    this.builtIn = new Map(
      Object.keys(firstParty)
        .sort()
        .map((folder) => [folder, attempt(() => readPackage((path) => firstParty[folder]![path]), true, `plugins/${folder}`)]),
    );
    try {
      mkdirSync(this.marketplaceDir, { recursive: true, mode: 0o750 });
    } catch (e) {
      this.log.warn(`cannot create the plugin marketplace folder ${this.marketplaceDir}: air-gapped packages are not read`, { error: String(e) });
    }
    for (const name of this.folderNames()) this.dropped.set(name, this.readDropped(name));
    this.rebuild();
  }

  /** Starts watching the marketplace folder. */
  watch(): this {
    try {
      this.watcher = watch(this.marketplaceDir, { recursive: true }, (_event, file) => {
        // The first path segment is the package folder that changed; without a name, all of them.
        const name = file === null ? null : String(file).split(/[\\/]/)[0]!;
        if (name === null) for (const n of new Set([...this.dropped.keys(), ...this.folderNames()])) this.changed.add(n);
        else this.changed.add(name);
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.refresh(), DEBOUNCE_MS);
      });
      this.watcher.on("error", (e) => this.log.warn("the plugin marketplace folder cannot be watched any more", { folder: this.marketplaceDir, error: String(e) }));
    } catch (e) {
      this.log.warn("the plugin marketplace folder cannot be watched: packages dropped there appear at the next start", { folder: this.marketplaceDir, error: String(e) });
    }
    return this;
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
    this.watcher = null;
  }

  /** The latest version of each package, by package name. */
  packages(): CatalogPackage[] {
    return [...this.index.values()].map((versions) => versions[0]!);
  }

  /** A package's versions, newest first (empty: no such package). */
  versions(packageName: string): CatalogPackage[] {
    return this.index.get(packageName) ?? [];
  }

  /** One version of a package, or its highest (`latest`); undefined when there is none. */
  get(packageName: string, version: string): CatalogPackage | undefined {
    const versions = this.versions(packageName);
    return version === "latest" ? versions[0] : versions.find((p) => p.version === version);
  }

  /** Reads again the folders changed since the last refresh, then rebuilds the index. */
  refresh(): void {
    const names = [...this.changed];
    this.changed.clear();
    for (const name of names) {
      if (name.startsWith(".")) continue;
      if (this.isFolder(name)) this.dropped.set(name, this.readDropped(name));
      else this.dropped.delete(name);
    }
    this.rebuild();
  }

  private folderNames(): string[] {
    try {
      return readdirSync(this.marketplaceDir).filter((name) => !name.startsWith(".") && this.isFolder(name));
    } catch {
      return [];
    }
  }

  /** A folder, or a link (never followed: read, it is skipped with a warning). */
  private isFolder(name: string): boolean {
    const st = lstatSync(join(this.marketplaceDir, name), { throwIfNoEntry: false });
    return st !== undefined && (st.isDirectory() || st.isSymbolicLink());
  }

  private readDropped(name: string): Read {
    const dir = join(this.marketplaceDir, name);
    return attempt(() => readPackageFolder(dir), false, dir);
  }

  /** The index from the folders read: built-in first, then the marketplace in folder-name order. */
  private rebuild(): void {
    const index = new Map<string, CatalogPackage[]>();
    const holder = new Map<string, string>();
    const skipped = new Map<string, string>();
    const folders: [string, Read][] = [
      ...[...this.builtIn].map(([name, read]): [string, Read] => [`plugins/${name}`, read]),
      ...[...this.dropped].sort(byKey).map(([name, read]): [string, Read] => [join(this.marketplaceDir, name), read]),
    ];
    for (const [folder, read] of folders) {
      if ("reason" in read) {
        skipped.set(folder, read.reason);
        continue;
      }
      const { pkg } = read;
      const key = `${pkg.packageName}@${pkg.version}`;
      const first = holder.get(key);
      if (first !== undefined) {
        skipped.set(folder, `duplicate of ${pkg.packageName} ${pkg.version} (already in ${first})`);
        continue;
      }
      holder.set(key, folder);
      const versions = index.get(pkg.packageName) ?? [];
      versions.push(pkg);
      index.set(pkg.packageName, versions);
    }
    for (const versions of index.values()) versions.sort((a, b) => semver.rcompare(a.version, b.version));
    this.index = new Map([...index].sort(byKey));
    this.report(skipped);
  }

  /** One warning per skipped folder and reason; a folder fixed or gone is forgotten. */
  private report(skipped: Map<string, string>): void {
    for (const folder of this.reported.keys()) if (!skipped.has(folder)) this.reported.delete(folder);
    for (const [folder, reason] of skipped) {
      if (this.reported.get(folder) === reason) continue;
      this.reported.set(folder, reason);
      this.log.warn(`plugin package skipped: ${folder}: ${reason}`, { folder, reason });
    }
  }
}
