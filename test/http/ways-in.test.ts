/**
 * The ways in a newcomer takes, through HTTP: `GET /` (a browser pointed at the server: the
 * console, test/http/console.test.ts), the
 * favicon, and the API document's `servers` entry (so that the reference page's examples run as
 * copied).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, testApp, type TestApp } from "../helpers";

let h: TestApp;
beforeAll(async () => {
  h = await testApp();
});
afterAll(() => h.close());

/** The headers every response carries (decisions: HTTP). */
function expectStandardHeaders(res: Response) {
  expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  for (const name of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]) expect(res.headers.get(name)).toMatch(/^\d+$/);
}

describe("GET /", () => {
  test("the admin console's page (it replaced the redirect to /v1/docs), with no credential, a bad one or a good one; the usual headers and a strict CSP", async () => {
    for (const headers of [{}, bearer("svc_sk_eval_nope"), bearer(await seedAdminKey(h.ctx))]) {
      for (const method of ["GET", "HEAD"]) {
        const res = await h.request(method, "/", { headers });
        expect({ method, status: res.status, type: res.headers.get("content-type"), cache: res.headers.get("cache-control") }).toEqual({ method, status: 200, type: "text/html;charset=utf-8", cache: "no-cache" });
        expect(res.headers.get("content-security-policy")).toContain("default-src 'self'");
        expect(res.headers.get("location")).toBeNull();
        if (method === "GET") expect(await res.text()).toContain("<title>flagsvc</title>");
        expectStandardHeaders(res);
      }
    }
  });

  test("other methods: 405 with Allow", async () => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const res = await h.request(method, "/");
      expect(await json(res, 405)).toEqual({ error: "METHOD_NOT_ALLOWED", message: `Method ${method} is not allowed on /` });
      expect(res.headers.get("allow")).toBe("GET, HEAD");
      expectStandardHeaders(res);
    }
  });
});

describe("GET /favicon.ico", () => {
  test("an icon of 16 and 32 pixels, cacheable, with no credential", async () => {
    const res = await h.request("GET", "/favicon.ico");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/x-icon");
    expect(res.headers.get("cache-control")).toBe("public, max-age=86400");
    expectStandardHeaders(res);
    const icon = Buffer.from(await res.arrayBuffer());
    // ICONDIR: reserved 0, type 1 (icon), two images; their entries' sizes.
    expect([icon.readUInt16LE(0), icon.readUInt16LE(2), icon.readUInt16LE(4)]).toEqual([0, 1, 2]);
    expect([icon[6], icon[22]]).toEqual([16, 32]);
    expect(icon.length).toBeLessThan(8 * 1024);
    const head = await h.request("HEAD", "/favicon.ico");
    expect([head.status, head.headers.get("content-type")]).toEqual([200, "image/x-icon"]);
  });

  test("neither it nor / is an operation of the API document", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    // The API lives under /v1/, and OpenFeature's under /ofrep/v1/ (its protocol fixes that path);
    // the operators' probes and metrics at the root, where orchestrators and Prometheus look (docs/metrics.md).
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith("/v1/") && !p.startsWith("/ofrep/v1/")).sort()).toEqual(["/livez", "/metrics", "/readyz"]);
  });
});

describe("the API document's servers entry", () => {
  const fetchDoc = async (headers: Record<string, string>) => {
    const res = await h.request("GET", "/v1/openapi.json", { headers });
    expect(res.headers.get("content-type")).toBe("application/json;charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-store");
    return json(res, 200);
  };

  test("names the origin it was fetched from: https and the Host header (lower case)", async () => {
    for (const [host, url] of [
      ["flags.example.com", "https://flags.example.com"],
      ["Flags.Example.COM:8443", "https://flags.example.com:8443"],
      ["127.0.0.1:3000", "https://127.0.0.1:3000"],
      ["[::1]:3000", "https://[::1]:3000"],
      ["localhost", "https://localhost"],
    ]) {
      expect((await fetchDoc({ host: host! })).servers).toEqual([{ url }]);
    }
  });

  test("a missing or malformed Host gets no entry, and cannot change anything else", async () => {
    const plain = await fetchDoc({});
    expect(plain.servers).toBeUndefined();
    expect(plain.openapi).toBe("3.1.2");
    for (const host of ['evil"},{"url":"https://x', "a b", "x/y", "user@host", "host:port", "-bad.example", "a".repeat(300), "[zz::1]", "<script>"]) {
      expect({ host, doc: await fetchDoc({ host }) }).toEqual({ host, doc: plain });
    }
    // Otherwise the document is the same, entry aside.
    const { servers, ...rest } = await fetchDoc({ host: "flags.example.com" });
    expect(servers).toBeDefined();
    expect(rest).toEqual(plain);
  });

  test("each of many origins gets its own entry (a bounded few are kept ready)", async () => {
    for (let i = 0; i < 20; i++) expect((await fetchDoc({ host: `host-${i}.example.com` })).servers).toEqual([{ url: `https://host-${i}.example.com` }]);
    expect((await fetchDoc({ host: "host-3.example.com" })).servers).toEqual([{ url: "https://host-3.example.com" }]);
  });

  test("behind a proxy (X-Forwarded-Proto https, else refused): https and the Host the proxy passed on", async () => {
    const proxied = await testApp({ SVC_BEHIND_PROXY: "true" });
    try {
      const res = await proxied.request("GET", "/v1/openapi.json", { headers: { host: "flags.example.com", "x-forwarded-proto": "https" } });
      expect((await json(res, 200)).servers).toEqual([{ url: "https://flags.example.com" }]);
      expect((await proxied.request("GET", "/v1/openapi.json", { headers: { host: "flags.example.com", "x-forwarded-proto": "http" } })).status).toBe(403);
    } finally {
      proxied.close();
    }
  });
});
