/**
 * The marketplace (Pro; decisions §4, §9, §11) through app.handle on a real database: packages
 * dropped into DATA_DIR/marketplace/ (test/fixtures/plugins) picked up by the running catalog,
 * downloads from the real plugin_downloads table. The first-party packages embedded in the
 * binary are listed too: assertions look at the fixtures' entries only.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, linkSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/lib/log";
import { startServer } from "../../src/server";
import { bearer, json, leakTargets, linkedPackage, ownEnviron, seedAdminKey, seedApiKey, tempDir, testApp, type TestApp, until, userToken, rawRows } from "../helpers";

const FIXTURES = join(import.meta.dir, "../fixtures/plugins");
const OURS = new Set(["@acme/echo", "failing", "@acme/tracker"]);

/** Drops the fixtures (and a third package, @acme/tracker) into the marketplace folder and waits for the catalog. */
async function dropFixtures(h: TestApp) {
  const market = join(h.dir, "marketplace");
  for (const folder of ["echo-1.0.0", "echo-1.1.0", "failing-0.1.0"]) cpSync(join(FIXTURES, folder), join(market, folder), { recursive: true });
  const tracker = join(market, "tracker");
  cpSync(join(FIXTURES, "echo-1.0.0"), tracker, { recursive: true });
  const manifest = JSON.parse(await Bun.file(join(tracker, "plugin.json")).text());
  writeFileSync(
    join(tracker, "plugin.json"),
    JSON.stringify({ ...manifest, packageName: "@acme/tracker", name: "Tracker", description: "Sends ECHO-like events to a CRM", category: "crm", version: "2.0.0", publishedAt: "2026-11-20T00:00:00Z", homepage: undefined }),
  );
  await until("the catalog to pick the packages up", () => h.ctx.catalog.get("@acme/tracker", "latest") && h.ctx.catalog.get("failing", "0.1.0") && h.ctx.catalog.get("@acme/echo", "1.1.0"));
}

const ours = (plugins: Record<string, any>[]) => plugins.filter((p) => OURS.has(p.packageName));

describe("Pro", () => {
  let h: TestApp;
  let admin: Record<string, string>;
  beforeAll(async () => {
    h = await testApp({ SVC_EDITION: "pro" });
    admin = bearer(await seedAdminKey(h.ctx));
    await dropFixtures(h);
    // Installs counted by the plugins module: rows of the real table.
    await rawRows(h.ctx, "INSERT INTO plugin_downloads (package_name, installs) VALUES ('failing', 7), ('@acme/tracker', 3)");
  });
  afterAll(() => h.close());

  const get = async (path: string, headers = admin, status = 200) => json(await h.request("GET", path, { headers }), status);

  test("list: the latest version of each package, by name by default, with downloads and verified", async () => {
    const { plugins } = await get("/v1/marketplace/plugins");
    expect(ours(plugins)).toEqual([
      { packageName: "@acme/echo", name: "Echo", description: "Test fixture: logs its config and posts to a URL on activate", category: "analytics", version: "1.1.0", author: "flagsvc tests", downloads: 0, verified: false },
      { packageName: "failing", name: "Failing", description: "Test fixture: its activate throws", category: "monitoring", version: "0.1.0", author: "flagsvc tests", downloads: 7, verified: false },
      { packageName: "@acme/tracker", name: "Tracker", description: "Sends ECHO-like events to a CRM", category: "crm", version: "2.0.0", author: "flagsvc tests", downloads: 3, verified: false },
    ]);
    const names = plugins.map((p: { name: string }) => p.name.toLowerCase());
    expect(names).toEqual([...names].sort());
    // First-party packages (built into the binary) are the verified ones.
    for (const p of plugins) expect(p.verified).toBe(h.ctx.catalog.get(p.packageName, "latest")!.folder.startsWith("plugins/"));
  });

  test("filters: category exact, q case-insensitive on name or description", async () => {
    const names = async (query: string) => ours((await get(`/v1/marketplace/plugins?${query}`)).plugins).map((p) => p.packageName);
    expect(await names("category=crm")).toEqual(["@acme/tracker"]);
    expect(await names("category=monitoring")).toEqual(["failing"]);
    expect(await names("q=ECHO")).toEqual(["@acme/echo", "@acme/tracker"]); // name Echo; tracker's description
    expect(await names("q=activate%20THROWS")).toEqual(["failing"]);
    expect(await names("q=nothing-matches-this")).toEqual([]);
    expect(await names("category=crm&q=echo")).toEqual(["@acme/tracker"]);
  });

  test("sorts: popular (downloads), newest (publishedAt), name", async () => {
    const names = async (sort: string) => ours((await get(`/v1/marketplace/plugins?sort=${sort}`)).plugins).map((p) => p.packageName);
    expect(await names("popular")).toEqual(["failing", "@acme/tracker", "@acme/echo"]);
    expect(await names("newest")).toEqual(["@acme/tracker", "@acme/echo", "failing"]);
    expect(await names("name")).toEqual(["@acme/echo", "failing", "@acme/tracker"]);
  });

  test("unknown query values or parameters: 400 VALIDATION_ERROR with details", async () => {
    for (const [query, path] of [["sort=downloads", "query.sort"], ["category=chat", "query.category"], ["limit=3", "query.limit"], [`q=${"x".repeat(201)}`, "query.q"]] as const) {
      const body = await get(`/v1/marketplace/plugins?${query}`, admin, 400);
      expect({ query, error: body.error, paths: body.details.map((d: { path: string }) => d.path) }).toEqual({ query, error: "VALIDATION_ERROR", paths: [path] });
    }
  });

  test("details of a scoped package by its URL-encoded name: the latest version, readme, configSchema, homepage, versions", async () => {
    const body = await get("/v1/marketplace/plugins/%40acme%2Fecho");
    expect(body).toEqual({
      packageName: "@acme/echo",
      name: "Echo",
      description: "Test fixture: logs its config and posts to a URL on activate",
      category: "analytics",
      version: "1.1.0",
      author: "flagsvc tests",
      downloads: 0,
      verified: false,
      readme: "# Echo\n\nA test fixture.\n",
      configSchema: JSON.parse(await Bun.file(join(FIXTURES, "echo-1.1.0/plugin.json")).text()).configSchema,
      homepage: "https://example.com/echo",
      versions: [
        { version: "1.1.0", publishedAt: "2026-11-15T00:00:00.000Z" },
        { version: "1.0.0", publishedAt: "2026-11-01T00:00:00.000Z" },
      ],
    });
    // Lower-case escapes and an unscoped name.
    expect((await get("/v1/marketplace/plugins/%40acme%2fecho")).version).toBe("1.1.0");
    const failing = await get("/v1/marketplace/plugins/failing");
    expect({ homepage: failing.homepage, readme: failing.readme, downloads: failing.downloads }).toEqual({ homepage: null, readme: "", downloads: 7 });
  });

  test("versions: newest first", async () => {
    expect(await get("/v1/marketplace/plugins/%40acme%2Fecho/versions")).toEqual({
      packageName: "@acme/echo",
      versions: [
        { version: "1.1.0", publishedAt: "2026-11-15T00:00:00.000Z" },
        { version: "1.0.0", publishedAt: "2026-11-01T00:00:00.000Z" },
      ],
    });
  });

  test("a scoped name written as it is (@scope/name) answers as the URL-encoded one; other paths keep their 404 and 405", async () => {
    expect(await get("/v1/marketplace/plugins/@acme/echo")).toEqual(await get("/v1/marketplace/plugins/%40acme%2Fecho"));
    expect(await get("/v1/marketplace/plugins/@acme/echo/versions")).toEqual(await get("/v1/marketplace/plugins/%40acme%2Fecho/versions"));
    expect((await get("/v1/marketplace/plugins/@acme/nope", admin, 404)).message).toBe("Plugin package @acme/nope not found");
    expect((await get("/v1/marketplace/plugins/@acme/nope/versions", admin, 404)).message).toBe("Plugin package @acme/nope not found");
    // The same access as the documented routes.
    expect((await get("/v1/marketplace/plugins/@acme/echo", {}, 401)).error).toBe("UNAUTHORIZED");
    expect((await get("/v1/marketplace/plugins/@acme/echo/versions", await userToken(h.ctx, "editor"), 403)).error).toBe("FORBIDDEN");
    // Two segments without the scope's @ are no route, for any caller; other methods as before.
    for (const headers of [admin, {}]) {
      expect(await get("/v1/marketplace/plugins/acme/echo", headers, 404)).toEqual({ error: "NOT_FOUND", message: "No route for GET /v1/marketplace/plugins/acme/echo" });
    }
    expect(await json(await h.request("POST", "/v1/marketplace/plugins/acme/echo", { headers: admin }), 404)).toEqual({ error: "NOT_FOUND", message: "No route for POST /v1/marketplace/plugins/acme/echo" });
    // An encoded name followed by a segment other than versions is no route, for any caller, as before.
    for (const headers of [admin, {}]) {
      expect(await get("/v1/marketplace/plugins/%40acme%2Fecho/other", headers, 404)).toEqual({ error: "NOT_FOUND", message: "No route for GET /v1/marketplace/plugins/%40acme%2Fecho/other" });
      expect(await get("/v1/marketplace/plugins/%40acme%2Fecho/other/versions", headers, 404)).toEqual({ error: "NOT_FOUND", message: "No route for GET /v1/marketplace/plugins/%40acme%2Fecho/other/versions" });
    }
    const post = await h.request("POST", "/v1/marketplace/plugins/failing", { headers: admin });
    expect({ status: post.status, allow: post.headers.get("allow") }).toEqual({ status: 405, allow: "GET, HEAD" });
    // The API document keeps the one-segment form.
    const doc = (await (await h.request("GET", "/v1/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith("/v1/marketplace"))).toEqual(["/v1/marketplace/plugins", "/v1/marketplace/plugins/{packageName}", "/v1/marketplace/plugins/{packageName}/versions"]);
  });

  test("the listening server (Bun's router) takes the scoped name as it is too", async () => {
    const dir = tempDir();
    const server = await startServer(loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1", SVC_EDITION: "pro" }), {
      log: createLogger({ level: "error", format: "json", write: () => {} }),
    });
    try {
      const headers = bearer(await seedAdminKey(server.ctx));
      const tls = { rejectUnauthorized: false };
      const at = async (path: string) => {
        const res = await fetch(`${server.url}${path}`, { headers, tls });
        return { status: res.status, body: await res.json() };
      };
      const details = await at("/v1/marketplace/plugins/@flagsvc/posthog");
      expect(details).toMatchObject({ status: 200, body: { packageName: "@flagsvc/posthog" } });
      expect(await at("/v1/marketplace/plugins/%40flagsvc%2Fposthog")).toEqual(details);
      const versions = await at("/v1/marketplace/plugins/@flagsvc/posthog/versions");
      expect(versions).toMatchObject({ status: 200, body: { packageName: "@flagsvc/posthog" } });
      expect(await at("/v1/marketplace/plugins/%40flagsvc%2Fposthog/versions")).toEqual(versions);
      expect(await at("/v1/marketplace/plugins/flagsvc/posthog")).toEqual({ status: 404, body: { error: "NOT_FOUND", message: "No route for GET /v1/marketplace/plugins/flagsvc/posthog" } });
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("unknown package: 404 NOT_FOUND; a malformed escape in the name: 400", async () => {
    for (const path of ["/v1/marketplace/plugins/%40acme%2Fnope", "/v1/marketplace/plugins/nope/versions", "/v1/marketplace/plugins/%2540acme%252Fecho"]) {
      expect((await get(path, admin, 404)).error).toBe("NOT_FOUND");
    }
    expect((await get("/v1/marketplace/plugins/%E0%A4%A", admin, 400)).details).toEqual([{ path: "params.packageName", message: "Expected string" }]);
  });

  test("access: admin key and admin JWT yes; editor JWT and project keys 403; none 401", async () => {
    const rows: [string, Record<string, string>, number][] = [
      ["admin key", admin, 200],
      ["admin JWT", await userToken(h.ctx, "admin"), 200],
      ["editor JWT", await userToken(h.ctx, "editor"), 403],
      ["mgmt key", bearer((await seedApiKey(h.ctx, "mgmt")).secret), 403],
      ["full key", bearer((await seedApiKey(h.ctx, "full")).secret), 403],
      ["none", {}, 401],
    ];
    for (const path of ["/v1/marketplace/plugins", "/v1/marketplace/plugins/failing", "/v1/marketplace/plugins/failing/versions"]) {
      for (const [who, headers, status] of rows) {
        const res = await h.request("GET", path, { headers });
        expect({ path, who, status: res.status }).toEqual({ path, who, status });
      }
    }
  });

  test("the API document describes the endpoints under Marketplace (Pro)", async () => {
    const doc = (await (await h.request("GET", "/v1/openapi.json")).json()) as { paths: Record<string, Record<string, { tags?: string[]; description?: string }>> };
    for (const path of ["/v1/marketplace/plugins", "/v1/marketplace/plugins/{packageName}", "/v1/marketplace/plugins/{packageName}/versions"]) {
      const op = doc.paths[path]?.get;
      expect({ path, tags: op?.tags, edition: op?.description?.includes("403 PRO_EDITION_REQUIRED") }).toEqual({ path, tags: ["Marketplace (Pro)"], edition: true });
    }
    expect(doc.paths["/v1/marketplace/plugins"]!.get!.description).toContain("`name` (the default");
  });
});

describe("CE", () => {
  let h: TestApp;
  beforeAll(async () => {
    h = await testApp();
    await dropFixtures(h);
  });
  afterAll(() => h.close());

  test("an admin: 403 PRO_EDITION_REQUIRED, after the access check (editor 403 FORBIDDEN, none 401)", async () => {
    const cases: [Record<string, string>, number, string][] = [
      [bearer(await seedAdminKey(h.ctx)), 403, "PRO_EDITION_REQUIRED"],
      [await userToken(h.ctx, "admin"), 403, "PRO_EDITION_REQUIRED"],
      [await userToken(h.ctx, "editor"), 403, "FORBIDDEN"],
      [bearer((await seedApiKey(h.ctx, "mgmt")).secret), 403, "FORBIDDEN"],
      [{}, 401, "UNAUTHORIZED"],
    ];
    for (const path of ["/v1/marketplace/plugins?sort=bogus", "/v1/marketplace/plugins/%40acme%2Fecho", "/v1/marketplace/plugins/failing/versions", "/v1/marketplace/plugins/@acme/echo", "/v1/marketplace/plugins/@acme/echo/versions"]) {
      for (const [headers, status, error] of cases) {
        const res = await h.request("GET", path, { headers });
        expect({ path, status: res.status, error: ((await res.json()) as { error: string }).error }).toEqual({ path, status, error });
      }
    }
  });
});

describe("a package never reaches outside its folder (links are skipped, never followed)", () => {
  let h: TestApp;
  let admin: Record<string, string>;
  let market: string;
  const secrets: string[] = [];
  beforeAll(async () => {
    h = await testApp({ SVC_EDITION: "pro" });
    admin = bearer(await seedAdminKey(h.ctx));
    market = join(h.dir, "marketplace");
  });
  afterAll(() => h.close());

  /** Every marketplace answer about `packageName`, as text: none may hold a secret. */
  const answers = async (packageName: string) => {
    const name = encodeURIComponent(packageName);
    const texts = [];
    for (const path of ["/v1/marketplace/plugins", `/v1/marketplace/plugins/${name}`, `/v1/marketplace/plugins/${name}/versions`]) texts.push(await (await h.request("GET", path, { headers: admin })).text());
    return texts;
  };
  const expectNotServed = async (packageName: string) => {
    expect(h.ctx.catalog.get(packageName, "latest")).toBeUndefined();
    const [list, details, versions] = await answers(packageName);
    expect(JSON.parse(list!).plugins.map((p: { packageName: string }) => p.packageName)).not.toContain(packageName);
    expect([JSON.parse(details!).error, JSON.parse(versions!).error]).toEqual(["NOT_FOUND", "NOT_FOUND"]);
    for (const text of [list, details, versions]) for (const secret of secrets) expect(text).not.toContain(secret);
  };
  const skipped = (folder: string) => until(`the warning about ${folder}`, () => h.logs().find((l: { msg?: string; folder?: string }) => l.msg?.startsWith("plugin package skipped") && l.folder === join(market, folder)));

  test("README.md -> the environment, the TLS key, the database: each package skipped with a warning, nothing of the target served", async () => {
    for (const { name, link, secret } of leakTargets(h.dir, ownEnviron())) {
      secrets.push(secret);
      linkedPackage(join(market, `leak-${name}`), { packageName: `@leak/${name}` }, { "README.md": link });
    }
    for (const { name } of leakTargets(h.dir, ownEnviron())) {
      expect((await skipped(`leak-${name}`)).reason).toBe("README.md is a symbolic link; a package may hold none: it could reach outside its folder");
      await expectNotServed(`@leak/${name}`);
    }
  });

  test("an entry linked to a file outside, a link deep in the package, a hard link, a marketplace entry that is a link: skipped", async () => {
    const outside = join(h.dir, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "code.js"), 'export function activate(ctx) { ctx.log("info", "code from outside the package"); }');
    linkedPackage(join(market, "entry"), { packageName: "@leak/entry" }, { "index.js": join(outside, "code.js") });
    linkedPackage(join(market, "deep"), { packageName: "@leak/deep" }, { "docs/root": "/" });
    linkedPackage(join(outside, "target"), { packageName: "@leak/linked-folder" }, {});
    symlinkSync(join(outside, "target"), join(market, "linked-folder"));
    writeFileSync(join(outside, "notes.md"), "a file outside the package");
    linkSync(join(outside, "notes.md"), join(linkedPackage(join(market, "hard"), { packageName: "@leak/hard" }, {}), "NOTES.md"));
    expect((await skipped("entry")).reason).toBe("index.js is a symbolic link; a package may hold none: it could reach outside its folder");
    expect((await skipped("deep")).reason).toBe("docs/root is a symbolic link; a package may hold none: it could reach outside its folder");
    expect((await skipped("linked-folder")).reason).toBe("the package folder is a symbolic link; a package may hold none: it could reach outside its folder");
    expect((await skipped("hard")).reason).toBe("NOTES.md is a hard link (the file has 2 names); a package may hold none: it could reach outside its folder");
    for (const name of ["entry", "deep", "linked-folder", "hard"]) await expectNotServed(`@leak/${name}`);
    const install = await h.request("POST", "/v1/projects/default/plugins", { headers: admin, body: { packageName: "@leak/entry", config: { apiKey: "k" } } });
    expect(install.status).toBe(404);
  });

  test("a link swapped in after the package was read: the watched catalog reads it again and skips it", async () => {
    const folder = linkedPackage(join(market, "swapped"), { packageName: "@leak/swapped" }, {});
    await until("the package", () => h.ctx.catalog.get("@leak/swapped", "latest"));
    expect((await json(await h.request("GET", "/v1/marketplace/plugins/%40leak%2Fswapped", { headers: admin }), 200)).readme).toBe("# Echo\n\nA test fixture.\n");
    rmSync(join(folder, "README.md"));
    symlinkSync("../../tls/key.pem", join(folder, "README.md"));
    await until("the catalog to drop the swapped package", () => h.ctx.catalog.get("@leak/swapped", "latest") === undefined);
    expect((await skipped("swapped")).reason).toBe("README.md is a symbolic link; a package may hold none: it could reach outside its folder");
    await expectNotServed("@leak/swapped");
  });
});
