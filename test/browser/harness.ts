/**
 * What the console's browser tests share: the compiled binary with an admin key, an admin user and
 * a viewer; Chromium; signing in; finding controls by their label; axe-core; screenshots at 1280
 * and 390 px. `consoleHarness(tag)` registers beforeAll/afterAll in the calling test file.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import puppeteer, { type Browser, type ElementHandle, type Page } from "puppeteer-core";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "../e2e/binary";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const ADMIN = { email: "admin@example.com", password: "correct horse battery" };
export const VIEWER = { email: "viewer@example.com", password: "viewer horse battery" };
export const EDITOR = { email: "editor@example.com", password: "editor horse battery" };
const SHOTS = join(import.meta.dir, "screenshots");
const AXE = readFileSync(join(import.meta.dir, "..", "..", "node_modules", "axe-core", "axe.min.js"), "utf8");

/** The form control labelled `name` (its `<label>`'s text). */
export async function control(tab: Page, name: string): Promise<ElementHandle<HTMLInputElement>> {
  const handle = await tab.waitForFunction(
    (n) => {
      const label = Array.from(document.querySelectorAll("main label")).find((l) => l.textContent!.trim() === n) as HTMLLabelElement | undefined;
      return label?.control ?? null;
    },
    {},
    name,
  );
  return handle as unknown as ElementHandle<HTMLInputElement>;
}

/** Types `text` into the control labelled `name`, over what it holds (`clear`: emptied first too). */
export async function fill(tab: Page, name: string, text: string, clear = false) {
  const el = await control(tab, name);
  await el.click({ count: 3 });
  if (clear) await el.evaluate((e) => ((e as HTMLInputElement).value = ""));
  await el.type(text);
}

export const value = async (tab: Page, name: string) => (await control(tab, name)).evaluate((e) => e.value);
export const pick = async (tab: Page, name: string, v: string) => (await control(tab, name)).select(v);

/** Clicks the first enabled button or link whose text is `text` (inside `scope`, a selector, if given). */
export async function clickText(tab: Page, text: string, scope = "") {
  const handle = await tab.waitForFunction(
    (t, s) => Array.from(document.querySelectorAll(`${s} button, ${s} a`)).find((e) => e.textContent!.trim() === t && !(e as HTMLButtonElement).disabled),
    {},
    text,
    scope,
  );
  await (handle as any).click();
}

/** axe-core on the page as it is: no serious or critical violation. */
export async function axe(tab: Page, name: string) {
  await tab.addScriptTag({ content: AXE });
  const result = await tab.evaluate(async () => (await (window as any).axe.run()).violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n: any) => n.target.join(" ")).slice(0, 3) })));
  expect({ name, violations: result.filter((v: { impact: string }) => v.impact === "serious" || v.impact === "critical") }).toEqual({ name, violations: [] });
}

/** Full-page screenshots at 1280 and 390 px (nothing wider than 390 px at 390). */
export async function shots(tab: Page, name: string) {
  for (const width of [1280, 390]) {
    await tab.setViewport({ width, height: 900 });
    await tab.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
    if (width === 390) expect(await tab.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  }
  await tab.setViewport({ width: 1280, height: 900 });
}

export interface Harness {
  /** The running binary's URL. */
  url: () => string;
  /** An API call with the admin key. */
  admin: (method: string, path: string, body?: unknown) => ReturnType<typeof callServer>;
  /** A new browser context, signed in as `who`; page errors and console errors go to `problems`. */
  signedIn: (who: { email: string; password: string }) => Promise<Page>;
  problems: string[];
}

export interface HarnessOptions {
  /** Added to the binary's environment. */
  env?: Record<string, string>;
  /** Users made after the viewer. */
  users?: { email: string; password: string; role: string }[];
  /**
   * Runs once the binary is up, before the users are made; the binary then has its own data
   * directory, and `offline(fn)` stops it, runs `fn(dataDir)` and starts it again.
   */
  prepare?: (h: { admin: Harness["admin"]; offline: (fn: (dataDir: string) => void | Promise<void>) => Promise<void> }) => Promise<void>;
}

/** Starts the binary (admin key `svc_admin_<tag × 12>`, the admin, a viewer) and Chromium for this test file. */
export function consoleHarness(tag: string, opts: HarnessOptions = {}): Harness {
  const key = `svc_admin_${tag.repeat(12)}`;
  let srv: RunningBinary;
  let browser: Browser;
  const problems: string[] = [];
  const admin = (method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key, body });
  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
    mkdirSync(SHOTS, { recursive: true });
    await binaryPath();
    const env = { SVC_ADMIN_KEY: key, SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password, ...opts.env };
    if (opts.prepare) {
      const dataDir = tempDir();
      srv = await startBinary({ dataDir, env });
      const offline = async (fn: (dataDir: string) => void | Promise<void>) => {
        await srv.stop();
        await fn(dataDir);
        srv = await startBinary({ dataDir, env });
      };
      await opts.prepare({ admin, offline });
    } else {
      srv = await startBinary({ env });
    }
    for (const user of [{ ...VIEWER, role: "viewer" }, ...(opts.users ?? [])]) expect((await admin("POST", "/v1/users", user)).status).toBe(201);
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, acceptInsecureCerts: true, args: ["--no-sandbox"] });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.stop();
    cleanup();
  });
  const signedIn = async (who: { email: string; password: string }): Promise<Page> => {
    const tab = await (await browser.createBrowserContext()).newPage();
    await tab.setBypassCSP(true); // only to inject axe
    tab.on("pageerror", (e) => problems.push(String(e)));
    tab.on("console", (m) => m.type() === "error" && problems.push(`${tab.url()}: ${m.text()}`));
    await tab.goto(`${srv.url}/`);
    await tab.waitForSelector("input[name=email]");
    await tab.type("input[name=email]", who.email);
    await tab.type("input[name=password]", who.password);
    await tab.click("button[type=submit]");
    await tab.waitForSelector("nav[aria-label=Main]");
    return tab;
  };
  return { url: () => srv.url, admin, signedIn, problems };
}
