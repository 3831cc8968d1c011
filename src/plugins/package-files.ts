/**
 * A plugin package's files on disk (decisions §11): a package never reaches outside its own
 * folder. Whatever reads a package folder (the catalog, `flagsvc plugins add|check`) goes through
 * `packageTree` (every file of the folder; a symbolic link, a hard link or anything but files and
 * folders anywhere in it is a PackageError naming it) and `readInside` (one file, read so that no
 * link swapped in after the walk is followed). A package's folder itself must not be a link.
 * Also here: the link entries of a tar archive, which Bun.Archive leaves out of its files.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync, type Stats } from "node:fs";
import { basename, dirname, join, posix, sep } from "node:path";
import { PackageError } from "./manifest";

/** Why a package holding a link is refused (the end of each such message). */
export const NO_LINKS = "a package may hold none: it could reach outside its folder";

/** What is wrong with a file of a package, or undefined when it is a plain file or folder. */
function refusal(path: string, st: Stats): string | undefined {
  if (st.isSymbolicLink()) return `${path} is a symbolic link; ${NO_LINKS}`;
  if (st.isFile() && st.nlink > 1) return `${path} is a hard link (the file has ${st.nlink} names); ${NO_LINKS}`;
  if (!st.isFile() && !st.isDirectory()) return `${path} is neither a file nor a folder`;
  return undefined;
}

function refuse(path: string, st: Stats): void {
  const problem = refusal(path, st);
  if (problem !== undefined) throw new PackageError(problem);
}

/**
 * The files of a package folder, by their path inside it (`/`-separated, in name order), every
 * entry looked at with lstat (never followed). Throws PackageError on the first link or special
 * file, and when `dir` itself is a link.
 */
export function packageTree(dir: string): string[] {
  refuse("the package folder", lstatSync(dir));
  const files: string[] = [];
  const walk = (sub: string) => {
    for (const name of readdirSync(join(dir, sub)).sort()) {
      const path = sub === "" ? name : `${sub}/${name}`;
      const st = lstatSync(join(dir, path));
      refuse(path, st);
      if (st.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk("");
  return files;
}

/** The real path of an open file: /proc/self/fd on Linux, else the real path of its name. */
function openedPath(fd: number, path: string): string {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return realpathSync(path);
  }
}

/**
 * The bytes of the file at `path` inside the package folder `dir`; undefined when there is no
 * such file (or it is a folder). Safe against a link swapped in at any moment: every component
 * from `dir` on is lstat'ed, the file opened with O_NOFOLLOW (and O_NONBLOCK: a FIFO does not
 * hang the reader), then the open file must be a regular file with one name whose real path is
 * inside the real path of `dir` (its parent's real path, `dir` itself not followed). Throws
 * PackageError for a link or a path outside.
 */
export function readInside(dir: string, path: string): Buffer | undefined {
  const parts = posix.normalize(path).split("/");
  if (posix.isAbsolute(path) || parts.includes("..")) throw new PackageError(`${path}: not a path inside the package`);
  refuse("the package folder", lstatSync(dir));
  let file = dir;
  for (const [i, part] of parts.entries()) {
    file = join(file, part);
    const st = lstatSync(file, { throwIfNoEntry: false });
    if (st === undefined) return undefined;
    refuse(parts.slice(0, i + 1).join("/"), st);
    if (i < parts.length - 1 && !st.isDirectory()) return undefined;
  }
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new PackageError(`${path} is a symbolic link; ${NO_LINKS}`);
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return undefined;
    refuse(path, st);
    const root = join(realpathSync(dirname(dir)), basename(dir));
    if (!openedPath(fd, file).startsWith(root + sep)) throw new PackageError(`${path} resolves outside the package folder; ${NO_LINKS}`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

const GZIP = [0x1f, 0x8b];

/**
 * The link entries (symbolic, type 2; hard, type 1) of a tar, gzipped or not, by name. Bun.Archive
 * leaves them out of `files()` without a word (checked, Bun 1.4.5); a package holding one is
 * refused rather than read without it. GNU long names (`L`) and pax `path` records name the entry
 * that follows. Throws when a header's checksum does not match (not a tar this can read).
 */
export function tarLinks(bytes: Uint8Array<ArrayBuffer>): string[] {
  const tar = GZIP.every((b, i) => bytes[i] === b) ? Bun.gunzipSync(bytes) : bytes;
  const text = (b: Uint8Array) => new TextDecoder().decode(b).replace(/\0[^]*$/, "");
  const links: string[] = [];
  let longName: string | undefined;
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const octal = (from: number, length: number) => parseInt(text(header.subarray(from, from + length)).trim() || "0", 8);
    const sum = header.reduce((s, b, i) => s + (i >= 148 && i < 156 ? 0x20 : b), 0);
    const size = octal(124, 12);
    if (sum !== octal(148, 8) || !Number.isSafeInteger(size)) throw new Error(`a damaged tar header at byte ${at}`);
    const type = String.fromCharCode(header[156]!);
    const body = tar.subarray(at + 512, at + 512 + size);
    if (type === "L") longName = text(body);
    else if (type === "x") longName = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(text(body))?.[1] ?? longName;
    else if (type !== "K" && type !== "g") {
      const prefix = text(header.subarray(345, 500));
      const name = longName ?? (prefix === "" ? text(header.subarray(0, 100)) : `${prefix}/${text(header.subarray(0, 100))}`);
      if (type === "1" || type === "2") links.push(name);
      longName = undefined;
    }
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return links;
}
