/**
 * OpenFeature's stock web provider (`@openfeature/ofrep-web-provider` with `@openfeature/web-sdk`,
 * unmodified, polling off) in headless Chromium (Debian's `chromium`, driven by puppeteer-core),
 * against the compiled binary. The page is served from another origin, listed in
 * SVC_CORS_ORIGINS: it evaluates with a client key, and a flag change made through the API
 * reaches it through the OFREP change stream. Run by `npm run test:browser` (CI installs the
 * browser); not part of `npm test`, which needs nothing but Node and npm.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import puppeteer, { type Browser } from "puppeteer-core";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "../e2e/binary";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ADMIN_KEY = `svc_admin_${"brw".repeat(12)}`;

let srv: RunningBinary;
let page: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientKey: string;

const admin = (method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  // The page's script, bundled for the browser from node_modules (nothing is downloaded).
  const built = await Bun.build({ entrypoints: [join(import.meta.dir, "page", "app.ts")], target: "browser", format: "esm", minify: true });
  if (!built.success) throw new Error(built.logs.join("\n"));
  const script = await built.outputs[0]!.text();
  page = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) =>
      new URL(req.url).pathname === "/app.js"
        ? new Response(script, { headers: { "content-type": "text/javascript" } })
        : new Response('<!doctype html><html><head><title>flags</title><script type="module" src="/app.js"></script></head><body></body></html>', {
            headers: { "content-type": "text/html" },
          }),
  });
  await binaryPath();
  srv = await startBinary({ env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_CORS_ORIGINS: `http://127.0.0.1:${page.port}` } });
  expect((await admin("POST", "/v1/projects/default/flags", { key: "banner", name: "Banner", rules: [{ name: "pro", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] })).status).toBe(201);
  expect((await admin("PUT", "/v1/projects/default/flags/banner/states/development", { enabled: true })).status).toBe(200);
  clientKey = (await admin("POST", "/v1/projects/default/api-keys", { name: "web", scope: "client", environment: "development" })).body.key;
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, acceptInsecureCerts: true, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  page?.stop(true);
  await srv?.stop();
  cleanup();
});

test("a page of another origin evaluates with a client key, and a change made through the API reaches it through the stream", async () => {
  const tab = await browser.newPage();
  const problems: string[] = [];
  tab.on("pageerror", (e) => problems.push(String(e)));
  tab.on("console", (m) => m.type() === "error" && problems.push(m.text()));
  // What the page asked flagsvc: the stream's answers, and the bulk refetches (one that a stream
  // message triggered carries that message's flagConfigEtag).
  const streams: number[] = [];
  const bulks: string[] = [];
  tab.on("response", (r) => {
    const url = new URL(r.url());
    if (url.pathname === "/ofrep/v1/events") streams.push(r.status());
  });
  tab.on("request", (r) => {
    const url = new URL(r.url());
    if (url.pathname === "/ofrep/v1/evaluate/flags" && r.method() === "POST") bulks.push(url.search);
  });
  await tab.goto(`http://127.0.0.1:${page.port}/?base=${encodeURIComponent(srv.url)}&key=${encodeURIComponent(clientKey)}`);
  await tab.waitForSelector("body[data-ready]", { timeout: 15_000 });
  expect(await tab.evaluate(() => (window as any).flags.error)).toBe("");
  expect(await tab.evaluate(() => (window as any).flags.details("banner"))).toMatchObject({ value: true, reason: "TARGETING_MATCH", flagMetadata: { reason: "TARGETING_RULE_MATCH" } });

  const changedAt = performance.now();
  expect((await admin("PUT", "/v1/projects/default/flags/banner/states/development", { enabled: false })).status).toBe(200);
  await tab.waitForFunction(() => (window as any).flags.value("banner", true) === false, { timeout: 10_000 });
  const ms = performance.now() - changedAt;
  console.log(`change -> page: ${ms.toFixed(0)} ms`);
  expect(await tab.evaluate(() => (window as any).flags.changes)).toBeGreaterThan(0);
  expect(streams).toEqual([200]);
  expect(bulks.some((search) => /flagConfigEtag=/.test(search))).toBe(true);
  expect(ms).toBeLessThan(5_000);
  // No error but the browser's own (none expected: the stream and the refetches were allowed).
  expect(problems).toEqual([]);
}, 60_000);
