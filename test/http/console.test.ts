/**
 * The admin console as the server serves it (docs/console.md): the page at `/` and the
 * console's paths, its chunks under /assets/ (fingerprinted, cached a year), gzip when accepted,
 * the CSP and security headers, revalidation by ETag, and nothing of it in the API document.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gunzipSync } from "node:zlib";
import { CONSOLE_CSP, PAGE_PATHS } from "../../src/modules/console/routes";
import { json, testApp, type TestApp } from "../helpers";

let h: TestApp;
let page: string;
beforeAll(async () => {
  h = await testApp();
  page = await (await h.request("GET", "/")).text();
});
afterAll(() => h.close());

const chunks = () => [...page.matchAll(/(?:src|href)="(\/assets\/chunk-[a-z0-9]+\.(?:js|css))"/g)].map((m) => m[1]!);

describe("the page", () => {
  test("at / and at each of the console's paths: the same page, no-cache, with the CSP and the security headers", async () => {
    for (const path of ["/", "/sign-in", "/projects", "/projects/default/flags", "/projects/default/flags/new", "/plugins", "/health", "/admin/users"]) {
      const res = await h.request("GET", path);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect(await res.text()).toBe(page);
      expect(Object.fromEntries(["content-type", "cache-control", "content-security-policy", "x-frame-options", "referrer-policy", "cross-origin-opener-policy", "x-content-type-options"].map((n) => [n, res.headers.get(n)]))).toEqual({
        "content-type": "text/html;charset=utf-8",
        "cache-control": "no-cache",
        "content-security-policy": CONSOLE_CSP,
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
        "cross-origin-opener-policy": "same-origin",
        "x-content-type-options": "nosniff",
      });
    }
    expect(PAGE_PATHS).toContain("/");
  });

  test("the CSP: this origin only, no inline script or style, no framing", () => {
    const directives = Object.fromEntries(CONSOLE_CSP.split(";").map((d) => d.trim().split(" ")).map(([name, ...values]) => [name, values]));
    expect(directives["default-src"]).toEqual(["'self'"]);
    expect(directives["script-src"]).toEqual(["'self'"]);
    expect(directives["style-src"]).toEqual(["'self'"]);
    expect(directives["frame-ancestors"]).toEqual(["'none'"]);
    expect(directives["object-src"]).toEqual(["'none'"]);
    expect(CONSOLE_CSP).not.toContain("unsafe");
    expect(CONSOLE_CSP).not.toMatch(/https?:/);
  });

  test("no inline script or style, nothing from another origin, links to the API reference", () => {
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page).not.toMatch(/<style|style="/);
    expect(page).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
    expect(page).toContain('href="/v1/docs"');
    expect(chunks().map((c) => c.split(".").pop()).sort()).toEqual(["css", "js"]);
  });

  test("gzip when accepted (not with q=0); a matching If-None-Match: 304", async () => {
    const gz = await h.request("GET", "/", { headers: { "accept-encoding": "gzip, deflate, br" } });
    expect([gz.headers.get("content-encoding"), gz.headers.get("vary")]).toEqual(["gzip", "Accept-Encoding"]);
    expect(gunzipSync(Buffer.from(await gz.arrayBuffer())).toString()).toBe(page);
    const refused = await h.request("GET", "/", { headers: { "accept-encoding": "gzip;q=0, identity" } });
    expect(refused.headers.get("content-encoding")).toBeNull();
    expect(await refused.text()).toBe(page);
    const etag = gz.headers.get("etag")!;
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    const again = await h.request("GET", "/", { headers: { "if-none-match": etag } });
    expect([again.status, await again.text()]).toEqual([304, ""]);
  });
});

describe("the chunks", () => {
  test("fingerprinted, cached a year, immutable; gzip when accepted", async () => {
    for (const path of chunks()) {
      const res = await h.request("GET", path, { headers: { "accept-encoding": "gzip" } });
      expect([res.status, res.headers.get("cache-control"), res.headers.get("content-encoding")]).toEqual([200, "public, max-age=31536000, immutable", "gzip"]);
      expect(res.headers.get("content-type")).toStartWith(path.endsWith(".js") ? "text/javascript" : "text/css");
      const plain = await h.request("GET", path);
      expect(gunzipSync(Buffer.from(await res.arrayBuffer())).equals(Buffer.from(await plain.arrayBuffer()))).toBe(true);
    }
  });

  test("an unknown one: 404 in the API's shape; other methods: 405", async () => {
    expect(await json(await h.request("GET", "/assets/chunk-nope.js"), 404)).toEqual({ error: "NOT_FOUND", message: "No route for GET /assets/chunk-nope.js" });
    expect((await h.request("POST", "/")).status).toBe(405);
    expect((await h.request("DELETE", "/projects")).status).toBe(405);
  });
});

test("none of it is an operation of the API document", async () => {
  const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
  expect(Object.keys(doc.paths).filter((p) => p === "/" || p.startsWith("/assets") || p.startsWith("/projects"))).toEqual([]);
});
