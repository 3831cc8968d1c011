/**
 * The console's files (console/: index.html, its script and style), ready to serve: each with
 * its type, a strong ETag and its gzip body, compressed once when first asked for.
 *
 * In the executable, `bun build --compile` bundled the HTML import (the page, and its script
 * and style as fingerprinted `chunk-<hash>` files) and the import's value lists them (`files`).
 * From the sources (`npm start`, tests) the import is Bun's on-demand bundle, which lists
 * nothing: the same page is bundled here once with `Bun.build`, in memory.
 * Either way the page's references to the chunks are rewritten to `/assets/<chunk>`, so that
 * any of the console's paths (`/projects/default/flags`) loads them from the same place.
 */
import { basename, join } from "node:path";
import index from "../../../console/index.html";

export interface Asset {
  /** `/` for the page, `/assets/chunk-<hash>.js` for the rest. */
  path: string;
  type: string;
  body: Uint8Array<ArrayBuffer>;
  gzip: Uint8Array<ArrayBuffer>;
  etag: string;
  /** A fingerprinted chunk (cached for a year); the page is revalidated every time. */
  immutable: boolean;
}

export const ASSET_PREFIX = "/assets/";

interface CompiledFile {
  path: string;
  loader: string;
  headers?: Record<string, string>;
}

/** Where the console's page and its chunks come from: the executable's bundle, or a build now. */
async function files(): Promise<{ name: string; type: string; bytes: Uint8Array<ArrayBuffer>; page: boolean }[]> {
  const compiled = (index as unknown as { files?: CompiledFile[] }).files;
  if (compiled !== undefined) {
    return Promise.all(
      compiled.map(async (f) => ({ name: basename(f.path), type: f.headers?.["content-type"] ?? typeOf(f.path), bytes: new Uint8Array(await Bun.file(f.path).arrayBuffer()), page: f.loader === "html" })),
    );
  }
  const built = await Bun.build({ entrypoints: [join(import.meta.dir, "../../../console/index.html")], target: "browser", minify: true });
  if (!built.success) throw new Error(`the console did not build: ${built.logs.join("\n")}`);
  return Promise.all(built.outputs.map(async (o) => ({ name: basename(o.path), type: o.type, bytes: new Uint8Array(await o.arrayBuffer()), page: o.path.endsWith(".html") })));
}

function typeOf(path: string): string {
  if (path.endsWith(".js")) return "text/javascript;charset=utf-8";
  if (path.endsWith(".css")) return "text/css;charset=utf-8";
  if (path.endsWith(".html")) return "text/html;charset=utf-8";
  return "application/octet-stream";
}

function asset(path: string, type: string, body: Uint8Array<ArrayBuffer>, immutable: boolean): Asset {
  const etag = `"${new Bun.CryptoHasher("sha256").update(body).digest("base64url").slice(0, 22)}"`;
  return { path, type, body, gzip: Bun.gzipSync(body, { level: 9 }) as Uint8Array<ArrayBuffer>, etag, immutable };
}

/** The page (`/`) and its chunks, by path. */
export async function loadAssets(): Promise<Map<string, Asset>> {
  const all = await files();
  const byPath = new Map<string, Asset>();
  let page: string | undefined;
  for (const f of all) {
    if (f.page) page = new TextDecoder().decode(f.bytes);
    else byPath.set(ASSET_PREFIX + f.name, asset(ASSET_PREFIX + f.name, f.type, f.bytes, true));
  }
  if (page === undefined) throw new Error("the console's bundle has no page");
  // `./chunk-x.js` (a build) or `/chunk-x.js` (the executable) -> `/assets/chunk-x.js`.
  for (const path of byPath.keys()) {
    const name = path.slice(ASSET_PREFIX.length);
    page = page.replaceAll(`"./${name}"`, `"${path}"`).replaceAll(`"/${name}"`, `"${path}"`);
  }
  byPath.set("/", asset("/", "text/html;charset=utf-8", new TextEncoder().encode(page), false));
  return byPath;
}
