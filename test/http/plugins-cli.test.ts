/**
 * `flagsvc plugins add|check|list` (decisions §11) through the CLI's main(), on a real data dir;
 * `check` runs the package's activate in the real sandbox, its ctx.http against a local receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, linkSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { leakTargets, linkedPackage, ownEnviron, runCli, tempDir } from "../helpers";

const FIXTURES = join(import.meta.dir, "../fixtures/plugins");
const ECHO = join(FIXTURES, "echo-1.0.0");

/** A gzipped tar of these files (path -> text), as `name`. */
async function tgz(files: Record<string, string>, name = "package.tgz"): Promise<string> {
  const path = join(tempDir(), name);
  await Bun.write(path, await new Bun.Archive(files, { compress: "gzip" }).bytes());
  return path;
}

/** A fixture's files (path inside it -> text), each under `prefix` (npm pack's is "package/"). */
const fixtureFiles = (folder: string, prefix = "") =>
  Object.fromEntries(readdirSync(join(FIXTURES, folder), { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => {
    const path = join(e.parentPath, e.name);
    return [`${prefix}${path.slice(join(FIXTURES, folder).length + 1)}`, readFileSync(path, "utf8")];
  }));

describe("plugins add", () => {
  let dir: string;
  beforeAll(() => (dir = tempDir()));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("a folder: checked, copied into DATA_DIR/marketplace/<name>-<version>, listed unverified", async () => {
    const out = await runCli(dir, "plugins", "add", ECHO);
    const target = join(dir, "marketplace", "acme-echo-1.0.0");
    expect(out).toEqual({ code: 0, stdout: `added @acme/echo 1.0.0 (unverified) to ${target}\n`, stderr: "" });
    expect(readdirSync(target).sort()).toEqual(["README.md", "index.js", "plugin.json"]);
    expect(readdirSync(join(dir, "marketplace"))).toEqual(["acme-echo-1.0.0"]); // no staging folder left
  });

  test("a .tgz, npm pack style (package/) or files at the root", async () => {
    const packed = await runCli(dir, "plugins", "add", await tgz(fixtureFiles("echo-1.1.0", "package/")));
    expect(packed).toEqual({ code: 0, stdout: `added @acme/echo 1.1.0 (unverified) to ${join(dir, "marketplace", "acme-echo-1.1.0")}\n`, stderr: "" });
    const flat = await runCli(dir, "plugins", "add", await tgz(fixtureFiles("failing-0.1.0"), "flat.tar.gz"));
    expect(flat.code).toBe(0);
    expect(readFileSync(join(dir, "marketplace", "failing-0.1.0", "src", "main.js"), "utf8")).toContain("cannot reach the vendor");
    const list = await runCli(dir, "plugins", "list");
    expect(list.stdout.split("\n").filter(Boolean).filter((l) => l.includes("unverified")).map((l) => l.split(" ").slice(0, 4).join(" "))).toEqual([
      "@acme/echo 1.1.0 analytics unverified",
      "@acme/echo 1.0.0 analytics unverified",
      "failing 0.1.0 monitoring unverified",
    ]);
  });

  test("a version already in the catalog is refused (exit 1), and nothing is written", async () => {
    const out = await runCli(dir, "plugins", "add", ECHO);
    expect(out).toEqual({ code: 1, stdout: "", stderr: `flagsvc: @acme/echo 1.0.0 is already in the catalog (${join(dir, "marketplace", "acme-echo-1.0.0")}); give the new package another version\n` });
    expect(readdirSync(join(dir, "marketplace")).sort()).toEqual(["acme-echo-1.0.0", "acme-echo-1.1.0", "failing-0.1.0"]);
  });

  test("a malformed package or path: exit 1 with the reason; no PATH: usage (exit 2)", async () => {
    const bad = join(tempDir(), "bad");
    cpSync(ECHO, bad, { recursive: true });
    writeFileSync(join(bad, "plugin.json"), JSON.stringify({ ...JSON.parse(readFileSync(join(ECHO, "plugin.json"), "utf8")), version: "latest" }));
    expect(await runCli(dir, "plugins", "add", bad)).toEqual({ code: 1, stdout: "", stderr: `flagsvc: ${bad}: plugin.json: "version" must be a semver version (e.g. 1.2.0)\n` });
    expect((await runCli(dir, "plugins", "add", join(bad, "nope"))).stderr).toBe(`flagsvc: ${join(bad, "nope")}: no such package folder or archive\n`);
    expect((await runCli(dir, "plugins", "add", join(bad, "plugin.json"))).stderr).toBe(`flagsvc: ${join(bad, "plugin.json")}: a package is a folder or a .tgz archive\n`);
    expect(await runCli(dir, "plugins", "add")).toEqual({ code: 2, stdout: "", stderr: "flagsvc: plugins add needs exactly one PATH argument (a package folder or .tgz)\n" });
    expect(existsSync(join(dir, "marketplace", "acme-echo-latest"))).toBe(false);
  });
});

/** A tar of entries as tar(1) writes them: files, and links (type 1 hard, 2 symbolic) to a target. */
function tarOf(entries: { name: string; type?: "0" | "1" | "2"; text?: string; target?: string }[]): Uint8Array<ArrayBuffer> {
  const encoder = new TextEncoder();
  const blocks: Uint8Array[] = [];
  for (const { name, type = "0", text = "", target = "" } of entries) {
    const body = encoder.encode(text);
    const header = new Uint8Array(512);
    const put = (at: number, value: string) => header.set(encoder.encode(value), at);
    for (const [at, value] of [[0, name], [100, "0000644"], [108, "0000000"], [116, "0000000"], [124, body.length.toString(8).padStart(11, "0")], [136, "00000000000"], [148, "        "], [156, type], [157, target], [257, "ustar"], [263, "00"]] as const) put(at, value);
    put(148, `${header.reduce((sum, b) => sum + b, 0).toString(8).padStart(6, "0")}\0`);
    blocks.push(header, body, new Uint8Array((512 - (body.length % 512)) % 512));
  }
  return new Uint8Array(Buffer.concat([...blocks, new Uint8Array(1024)]));
}

describe("plugins add and check refuse a package holding a link (it could reach outside its folder)", () => {
  let dir: string;
  beforeAll(() => (dir = tempDir()));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const refused = "is a symbolic link; a package may hold none: it could reach outside its folder";
  /** The marketplace folder's entries (it is created by the first package added). */
  const added = () => (existsSync(join(dir, "marketplace")) ? readdirSync(join(dir, "marketplace")) : []);

  test("README.md -> the environment, the TLS key, the database: exit 1 naming the link, nothing copied", async () => {
    for (const { name, link, secret } of leakTargets(dir, ownEnviron())) {
      // Two levels below the data dir, as in DATA_DIR/marketplace/NAME: the relative links reach its files.
      const folder = linkedPackage(join(dir, "incoming", `leak-${name}`), { packageName: `@leak/${name}` }, { "README.md": link });
      const out = await runCli(dir, "plugins", "add", folder);
      expect(out).toEqual({ code: 1, stdout: "", stderr: `flagsvc: ${folder}: README.md ${refused}\n` });
      expect(out.stderr).not.toContain(secret);
      expect(added()).toEqual([]);
    }
  });

  test("an entry linked outside, a link deep inside, a hard link: refused; plugins check too", async () => {
    const outside = join(dir, "outside.js");
    writeFileSync(outside, "export function activate() {}");
    const entry = linkedPackage(join(dir, "incoming", "entry"), {}, { "index.js": outside });
    const deep = linkedPackage(join(dir, "incoming", "deep"), {}, { "lib/etc": "/etc" });
    const hard = linkedPackage(join(dir, "incoming", "hard"), {}, {});
    linkSync(outside, join(hard, "extra.js"));
    expect(await runCli(dir, "plugins", "add", entry)).toEqual({ code: 1, stdout: "", stderr: `flagsvc: ${entry}: index.js ${refused}\n` });
    expect((await runCli(dir, "plugins", "add", deep)).stderr).toBe(`flagsvc: ${deep}: lib/etc ${refused}\n`);
    expect((await runCli(dir, "plugins", "add", hard)).stderr).toBe(`flagsvc: ${hard}: extra.js is a hard link (the file has 2 names); a package may hold none: it could reach outside its folder\n`);
    expect(await runCli(dir, "plugins", "check", entry, "--config", '{"apiKey":"k"}')).toEqual({ code: 1, stdout: "", stderr: `flagsvc: ${entry}: index.js ${refused}\n` });
    expect(added()).toEqual([]);
  });

  test("a .tgz or .tar holding a symbolic or hard link entry (Bun.Archive leaves them out): refused, naming the entry", async () => {
    const files = fixtureFiles("echo-1.0.0", "package/");
    const plain = Object.entries(files).filter(([name]) => name !== "package/README.md").map(([name, text]) => ({ name, text }));
    const cases: [string, Uint8Array<ArrayBuffer>][] = [
      ["symbolic.tgz", Bun.gzipSync(tarOf([...plain, { name: "package/README.md", type: "2", target: "/proc/self/environ" }]))],
      ["hard.tar", tarOf([...plain, { name: "package/README.md", type: "1", target: "/etc/passwd" }])],
    ];
    for (const [name, bytes] of cases) {
      const path = join(tempDir(), name);
      writeFileSync(path, bytes);
      expect([...(await new Bun.Archive(bytes).files()).keys()].sort()).toEqual(["package/index.js", "package/plugin.json"]);
      expect(await runCli(dir, "plugins", "add", path)).toEqual({ code: 1, stdout: "", stderr: `flagsvc: ${path}: the archive entry "package/README.md" is a link; a package may hold none: it could reach outside its folder\n` });
    }
    expect(added()).toEqual([]);
    // The same archive without the link is a package.
    const path = join(tempDir(), "ok.tgz");
    writeFileSync(path, Bun.gzipSync(tarOf(plain)));
    expect((await runCli(dir, "plugins", "add", path)).code).toBe(0);
    expect(added()).toEqual(["acme-echo-1.0.0"]);
  });
});

describe("plugins check", () => {
  const dir = tempDir();
  let receiver: ReturnType<typeof Bun.serve>;
  const seen: { path: string; auth: string | null; body: string }[] = [];
  beforeAll(() => {
    receiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        seen.push({ path: new URL(req.url).pathname, auth: req.headers.get("authorization"), body: await req.text() });
        return new URL(req.url).pathname === "/fail" ? new Response("nope", { status: 503 }) : new Response("thanks");
      },
    });
  });
  afterAll(() => {
    receiver.stop(true);
    rmSync(dir, { recursive: true, force: true });
  });
  const url = (path: string) => `http://127.0.0.1:${receiver.port}${path}`;

  test("ok: the plugin's log lines, secrets masked, its ctx.http sent through the outbound guard; exit 0", async () => {
    const config = JSON.stringify({ apiKey: "k-secret-1", url: url("/capture") });
    const out = await runCli(dir, "plugins", "check", ECHO, "--config", config, "--outbound-allowed-hosts", "loopback");
    expect(out).toEqual({
      code: 0,
      stdout: [
        "@acme/echo 1.0.0: plugin.json, entry index.js and config are valid",
        "[info] activating with key ********",
        `[info] POST ${url("/capture")}: 200 thanks`,
        "activate: ok",
        "",
      ].join("\n"),
      stderr: "",
    });
    expect(seen).toEqual([{ path: "/capture", auth: "Bearer k-secret-1", body: '{"hello":"echo"}' }]);
  });

  test("the config from a file; a failing activate: exit 1 with its message (masked)", async () => {
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify({ apiKey: "k-secret-2", url: url("/fail") }));
    const out = await runCli(dir, "plugins", "check", ECHO, "--config-file", file, "--outbound-allowed-hosts", "loopback");
    expect(out.code).toBe(1);
    expect(out.stdout).toContain(`[info] POST ${url("/fail")}: 503 nope\n`);
    expect(out.stderr).toBe("flagsvc: activate failed: Error: the receiver answered 503\n");
    const thrown = await runCli(dir, "plugins", "check", join(FIXTURES, "failing-0.1.0"));
    expect(thrown).toEqual({ code: 1, stdout: "failing 0.1.0: plugin.json, entry src/main.js and config are valid\n[warn] about to fail\n", stderr: "flagsvc: activate failed: Error: cannot reach the vendor\n" });
  });

  test("ctx.http to loopback under the default outbound setting is refused", async () => {
    const out = await runCli(dir, "plugins", "check", ECHO, "--config", JSON.stringify({ apiKey: "k-secret-3", url: url("/capture") }));
    expect({ code: out.code, stderr: out.stderr }).toEqual({ code: 1, stderr: "flagsvc: activate failed: Error: blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback\n" });
  });

  test("a config that does not match the configSchema: exit 1 with each property; not JSON: usage (exit 2)", async () => {
    const out = await runCli(dir, "plugins", "check", ECHO, "--config", JSON.stringify({ url: "nope", extra: true }));
    expect(out).toEqual({
      code: 1,
      stdout: "",
      stderr: 'flagsvc: the config does not match the configSchema of @acme/echo 1.0.0: config.apiKey: Required; config.extra: Unknown field; known: apiKey, url, batchSize; config.url: Must match format "uri"\n',
    });
    expect(await runCli(dir, "plugins", "check", ECHO, "--config", "{apiKey")).toEqual({ code: 2, stdout: "", stderr: expect.stringContaining("flagsvc: --config: not valid JSON") });
    expect((await runCli(dir, "plugins", "check", ECHO, "--config", "{}", "--config-file", "x")).stderr).toBe("flagsvc: give --config or --config-file, not both\n");
  });
});
