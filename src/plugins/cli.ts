/**
 * `flagsvc plugins add|check|list` (decisions §11): what an operator does with a package before
 * the server sees it. A package is given as its folder or as a .tgz (npm pack's layout, files
 * under `package/`, or at the archive's root).
 */
import { mkdirSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, posix, resolve } from "node:path";
import type { Config } from "../config";
import { OperatorError } from "../lib/errors";
import type { Logger } from "../lib/log";
import { randomBase62 } from "../lib/ids";
import { OutboundPolicy } from "../lib/outbound";
import { Catalog } from "./catalog";
import { pluginHttp, USER_AGENT } from "./http";
import { PackageError, readPackage, validateConfig, MANIFEST, type PluginPackage } from "./manifest";
import { NO_LINKS, packageTree, readInside, tarLinks } from "./package-files";
import { secretValues } from "../lib/config-secrets";
import { secretForms, secretMask } from "../lib/secret-text";
import { DEFAULT_LIMITS, loadPlugin, type Sandbox } from "./sandbox";

/** A package given on the command line: checked, with every file of it, as read once. */
interface Given {
  pkg: PluginPackage;
  /** Path inside the package -> its bytes. */
  files: Map<string, Uint8Array>;
}

const isArchive = (path: string) => /\.(tgz|tar\.gz|tar)$/i.test(path);

/** The files of a tar (gzipped or not), under `package/` or the one top folder when plugin.json is not at the root. */
async function archiveFiles(path: string): Promise<Map<string, Uint8Array>> {
  let entries: Map<string, File>;
  let links: string[];
  try {
    const bytes = await Bun.file(path).bytes();
    entries = await new Bun.Archive(bytes).files();
    links = tarLinks(bytes);
  } catch (e) {
    throw new OperatorError(`${path}: not a readable tar or .tgz archive (${(e as Error).message})`);
  }
  if (links.length > 0) throw new OperatorError(`${path}: the archive entry ${JSON.stringify(links[0])} is a link; ${NO_LINKS}`);
  const files = new Map<string, Uint8Array>();
  for (const [name, file] of entries) {
    const p = posix.normalize(name.replace(/^\.\//, ""));
    if (posix.isAbsolute(p) || p.split("/").includes("..")) throw new OperatorError(`${path}: the archive entry ${JSON.stringify(name)} points outside the package`);
    files.set(p, await file.bytes());
  }
  if (files.has(MANIFEST)) return files;
  const tops = new Set([...files.keys()].map((p) => p.split("/")[0]!));
  if (tops.size !== 1) return files;
  const top = `${[...tops][0]}/`;
  return new Map([...files].filter(([p]) => p.startsWith(top)).map(([p, bytes]) => [p.slice(top.length), bytes]));
}

/**
 * Every file of a package folder, read once (what is checked is what is copied). A link anywhere
 * in it is refused (package-files.ts); the folder named on the command line may itself be a link,
 * the operator's own choice: it is resolved first.
 */
function folderFiles(dir: string): Map<string, Uint8Array> {
  const real = realpathSync(dir);
  return new Map(
    packageTree(real).map((p) => {
      const bytes = readInside(real, p);
      if (bytes === undefined) throw new PackageError(`${p} went away while the package was read`);
      return [p, bytes];
    }),
  );
}

async function given(path: string): Promise<Given> {
  const full = resolve(path);
  let isDir: boolean;
  try {
    isDir = statSync(full).isDirectory();
  } catch {
    throw new OperatorError(`${full}: no such package folder or archive`);
  }
  try {
    if (!isDir && !isArchive(full)) throw new OperatorError(`${full}: a package is a folder or a .tgz archive`);
    const files = isDir ? folderFiles(full) : await archiveFiles(full);
    const decoder = new TextDecoder();
    const pkg = readPackage((p) => {
      const bytes = files.get(p);
      return bytes === undefined ? undefined : decoder.decode(bytes);
    });
    return { pkg, files };
  } catch (e) {
    if (e instanceof PackageError) throw new OperatorError(`${full}: ${e.message}`);
    throw e;
  }
}

/** The marketplace folder name of a package version: `@acme/posthog` 1.2.0 is `acme-posthog-1.2.0`. */
export const folderName = (pkg: Pick<PluginPackage, "packageName" | "version">) => `${pkg.packageName.replace(/^@/, "").replace(/\//g, "-")}-${pkg.version}`;

/** `flagsvc plugins add PATH`: checks the package and copies it into DATA_DIR/marketplace/. */
export async function addPackage(path: string, config: Config, log: Logger): Promise<string> {
  const { pkg, files } = await given(path);
  const catalog = new Catalog({ dataDir: config.dataDir, log });
  const existing = catalog.get(pkg.packageName, pkg.version);
  if (existing) throw new OperatorError(`${pkg.packageName} ${pkg.version} is already in the catalog (${existing.folder}); give the new package another version`);
  const target = join(catalog.marketplaceDir, folderName(pkg));
  if (statSync(target, { throwIfNoEntry: false })) throw new OperatorError(`${target} already exists (a package the catalog skipped: see the server's log); remove it first`);
  // Written under a name the catalog ignores, then renamed: a running server never reads half a package.
  const staging = join(catalog.marketplaceDir, `.adding-${randomBase62(12)}`);
  try {
    for (const [p, bytes] of files) {
      mkdirSync(dirname(join(staging, p)), { recursive: true });
      writeFileSync(join(staging, p), bytes);
    }
    renameSync(staging, target);
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    throw new OperatorError(`cannot copy the package into ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return `added ${pkg.packageName} ${pkg.version} (unverified) to ${target}`;
}

/**
 * `flagsvc plugins check PATH`: checks the package and `config` against its configSchema, then
 * runs its `activate` in the sandbox (the server's limits and outbound policy), each `ctx.log`
 * line printed as `[level] message`, secrets masked. Throws OperatorError (exit 1) on a failure.
 */
export async function checkPackage(path: string, pluginConfig: unknown, config: Config, print: (line: string) => void): Promise<void> {
  const { pkg } = await given(path);
  const problems = validateConfig(pkg, pluginConfig);
  if (problems.length > 0) {
    throw new OperatorError(`the config does not match the configSchema of ${pkg.packageName} ${pkg.version}: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`);
  }
  const cfg = pluginConfig as Record<string, unknown>;
  const mask = secretMask(secretForms(secretValues(pkg, cfg)));
  print(`${pkg.packageName} ${pkg.version}: plugin.json, entry ${pkg.entry} and config are valid`);
  const host = { log: (level: string, message: string) => print(`[${level}] ${mask(message)}`), http: pluginHttp(new OutboundPolicy(config.outboundAllowedHosts), USER_AGENT) };
  let sandbox: Sandbox | undefined;
  try {
    sandbox = await loadPlugin(pkg.source, cfg, host, { ...DEFAULT_LIMITS, memoryMb: config.pluginMemoryMb });
    const missing = pkg.hooks.filter((h) => !sandbox!.hooks.has(h));
    if (missing.length > 0) throw new Error(`${pkg.entry} does not export the hooks ${MANIFEST} declares: ${missing.join(", ")}`);
    if (pkg.hooks.includes("activate")) await sandbox.call("activate");
  } catch (e) {
    throw new OperatorError(`activate failed: ${mask(e instanceof Error ? e.message : String(e))}`);
  } finally {
    sandbox?.dispose();
  }
  print("activate: ok");
}

/** `flagsvc plugins list`: every package version of the catalog, newest first within a package. */
export function listPackages(config: Config, log: Logger): string[] {
  const catalog = new Catalog({ dataDir: config.dataDir, log });
  return catalog
    .packages()
    .flatMap((latest) => catalog.versions(latest.packageName))
    .map((p) => `${p.packageName} ${p.version} ${p.category} ${p.verified ? "verified" : "unverified"} ${p.folder}`);
}
