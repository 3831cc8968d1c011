/**
 * The admin console (docs/console.md), served from the binary: its page at `/` and at each of
 * the console's own paths (the browser's router takes it from there), its fingerprinted
 * chunks under `/assets/`. The console is a client of the public API and nothing else.
 *
 * - The page: `Cache-Control: no-cache` (revalidated with its ETag, so a new version shows at
 *   once), a strict Content-Security-Policy (this origin only, no inline script or style, no
 *   framing) and the usual security headers.
 * - The chunks: `Cache-Control: public, max-age=31536000, immutable` (their names change with
 *   their content).
 * - Each body is gzipped once, when the files are loaded (`consoleAssets`), and sent so when
 *   `Accept-Encoding` allows it.
 */
import { Elysia } from "elysia";
import { ApiError } from "../../http/errors";
import { ASSET_PREFIX, loadAssets, type Asset } from "./assets";

/** Where the page is served: the console's own paths (console/router.ts knows the same ones). */
export const PAGE_PATHS = ["/", "/sign-in", "/projects", "/projects/*", "/plugins", "/health", "/admin/*"] as const;

/**
 * Only this origin, for everything; no inline script or style (`'self'` alone); images may be
 * `data:` (none yet); no plugin content, no `<base>`, forms post here only, and no page may
 * frame the console (clickjacking).
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const PAGE_HEADERS = {
  "content-security-policy": CONSOLE_CSP,
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
};

export const IMMUTABLE = "public, max-age=31536000, immutable";

/** Loaded once per process, on first use (or at start: `consoleAssets()` from startServer). */
let loaded: Promise<Map<string, Asset>> | undefined;
export const consoleAssets = () => (loaded ??= loadAssets());

/** `gzip` accepted, and not refused with `q=0`. */
function acceptsGzip(header: string | null): boolean {
  if (header === null) return false;
  const m = /(?:^|,)\s*gzip\s*(?:;\s*q\s*=\s*([0-9.]+))?/i.exec(header);
  return m !== null && (m[1] === undefined || Number(m[1]) > 0);
}

function serve(asset: Asset, request: Request, headers: Record<string, unknown>): Response {
  headers["content-type"] = asset.type;
  headers["cache-control"] = asset.immutable ? IMMUTABLE : "no-cache";
  headers.etag = asset.etag;
  headers.vary = "Accept-Encoding";
  if (!asset.immutable) Object.assign(headers, PAGE_HEADERS);
  if (request.headers.get("if-none-match") === asset.etag) return new Response(null, { status: 304 });
  if (acceptsGzip(request.headers.get("accept-encoding"))) {
    headers["content-encoding"] = "gzip";
    return new Response(asset.gzip);
  }
  return new Response(asset.body);
}

const hidden = { detail: { hide: true } };

export const consoleRoutes = () => {
  const page = async ({ request, set }: { request: Request; set: { headers: Record<string, unknown> } }) => serve((await consoleAssets()).get("/")!, request, set.headers);
  let app = new Elysia({ name: "flagsvc/console" });
  for (const path of PAGE_PATHS) app = app.get(path, page, hidden) as unknown as typeof app;
  return app.get(
    `${ASSET_PREFIX}:file`,
    async ({ params, request, set }) => {
      const asset = (await consoleAssets()).get(ASSET_PREFIX + params.file);
      if (asset === undefined) throw new ApiError(404, "NOT_FOUND", `No route for GET ${ASSET_PREFIX}${params.file}`);
      return serve(asset, request, set.headers);
    },
    hidden,
  );
};
