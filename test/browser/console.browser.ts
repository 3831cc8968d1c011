/**
 * The admin console in headless Chromium (Debian's `chromium`, puppeteer-core) against the
 * compiled binary: sign in, create a project and a flag, toggle the flag in production, a
 * viewer sees no control that changes anything, a cross-site request with the session cookie
 * is refused, a change made through the API by another user shows on an open flag list without
 * a reload (the live change stream), two concurrent edits of one state: the second is refused
 * with a message (If-Match), no console errors, axe-core on each page (the CSP bypassed in this test only,
 * to inject axe), screenshots at 1280 and 390 px in test/browser/screenshots/ (git-ignored).
 * Run by `npm run test:browser`.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "../e2e/binary";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ADMIN_KEY = `svc_admin_${"cns".repeat(12)}`;
const ADMIN = { email: "admin@example.com", password: "correct horse battery" };
const VIEWER = { email: "viewer@example.com", password: "viewer horse battery" };
const EDITOR = { email: "editor@example.com", password: "editor horse battery" };
const SHOTS = join(import.meta.dir, "screenshots");
const AXE = readFileSync(join(import.meta.dir, "..", "..", "node_modules", "axe-core", "axe.min.js"), "utf8");

let srv: RunningBinary;
let browser: Browser;
let other: ReturnType<typeof Bun.serve>;
const problems: string[] = [];

const admin = (method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  mkdirSync(SHOTS, { recursive: true });
  await binaryPath();
  srv = await startBinary({ env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_ADMIN_EMAIL: ADMIN.email, SVC_ADMIN_PASSWORD: ADMIN.password } });
  expect((await admin("POST", "/v1/users", { ...VIEWER, role: "viewer" })).status).toBe(201);
  expect((await admin("POST", "/v1/users", { ...EDITOR, role: "editor" })).status).toBe(201);
  expect((await admin("POST", "/v1/projects/default/flags", { key: "checkout", name: "Checkout" })).status).toBe(201);
  expect((await admin("PUT", "/v1/projects/default/flags/checkout/states/staging", { enabled: true, rolloutPercentage: 30 })).status).toBe(200);
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, acceptInsecureCerts: true, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  other?.stop(true);
  await srv?.stop();
  cleanup();
});

/** A tab of a fresh browser context: its own cookies. */
async function newTab(): Promise<Page> {
  const tab = await (await browser.createBrowserContext()).newPage();
  // Only so that axe can be injected: the product's CSP is not loosened.
  await tab.setBypassCSP(true);
  tab.on("pageerror", (e) => problems.push(String(e)));
  tab.on("console", (m) => m.type() === "error" && problems.push(`${tab.url()}: ${m.text()}`));
  tab.on("request", (r) => {
    if (!r.url().startsWith(srv.url) && !r.url().startsWith("data:")) problems.push(`request elsewhere: ${r.url()}`);
  });
  return tab;
}

async function signIn(tab: Page, who: { email: string; password: string }) {
  await tab.goto(`${srv.url}/`);
  await tab.waitForSelector("input[name=email]");
  await tab.type("input[name=email]", who.email);
  await tab.type("input[name=password]", who.password);
  await tab.click("button[type=submit]");
  await tab.waitForSelector("nav[aria-label=Main]");
}

/** Clicks the button or link whose text (its accessible name's visible part) is `text`. */
async function clickText(tab: Page, text: string) {
  const handle = await tab.waitForFunction(
    (t) => Array.from(document.querySelectorAll("button, a")).find((e) => e.textContent!.trim() === t && !(e as HTMLButtonElement).disabled),
    {},
    text,
  );
  await (handle as any).click();
}

/** axe-core on the page as it is: no serious or critical violation. */
async function axe(tab: Page, name: string) {
  await tab.addScriptTag({ content: AXE });
  const result = await tab.evaluate(async () => (await (window as any).axe.run()).violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })));
  expect({ name, violations: result.filter((v: { impact: string }) => v.impact === "serious" || v.impact === "critical") }).toEqual({ name, violations: [] });
}

async function shots(tab: Page, name: string) {
  for (const width of [1280, 390]) {
    await tab.setViewport({ width, height: 900 });
    await tab.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
  }
  await tab.setViewport({ width: 1280, height: 900 });
}

test("sign in with a wrong password shows the error; then signs in; the session is the HttpOnly cookie only", async () => {
  const tab = await newTab();
  await tab.goto(`${srv.url}/`);
  await tab.waitForSelector("input[name=email]");
  await axe(tab, "sign-in");
  await shots(tab, "sign-in");
  await tab.type("input[name=email]", ADMIN.email);
  await tab.type("input[name=password]", "wrong password!");
  await tab.click("button[type=submit]");
  await tab.waitForSelector("[role=alert]");
  expect(await tab.$eval("[role=alert]", (e) => e.textContent)).toContain("Invalid email or password");
  await tab.$eval("input[name=password]", (e) => ((e as HTMLInputElement).value = ""));
  await tab.type("input[name=password]", ADMIN.password);
  await tab.click("button[type=submit]");
  await tab.waitForSelector("nav[aria-label=Main]");
  const cookies = await tab.browserContext().cookies();
  const session = cookies.find((c) => c.name === "flagsvc_session")!;
  expect([session.httpOnly, session.secure, session.sameSite]).toEqual([true, true, "Strict"]);
  expect(await tab.evaluate(() => [document.cookie, localStorage.length, sessionStorage.length])).toEqual(["", 0, 0]);
  await tab.close();
}, 60_000);

test("projects: create one, delete it with confirmation; axe; screenshots", async () => {
  const tab = await newTab();
  await signIn(tab, ADMIN);
  await tab.goto(`${srv.url}/projects`);
  await tab.waitForSelector(".cards");
  await axe(tab, "projects");
  await shots(tab, "projects");
  await clickText(tab, "New project");
  await tab.waitForSelector("form.inline-form input");
  const inputs = await tab.$$("form.inline-form input");
  await inputs[0]!.type("mobile");
  await inputs[1]!.type("Mobile app");
  await clickText(tab, "Create project");
  await tab.waitForFunction(() => document.body.textContent!.includes("Mobile app"));
  expect((await admin("GET", "/v1/projects/mobile")).body.name).toBe("Mobile app");
  await clickText(tab, "Delete project Mobile app");
  await tab.waitForSelector("dialog[open]");
  await axe(tab, "projects: confirm");
  await tab.locator("dialog button.danger").click();
  await tab.waitForFunction(() => !document.body.textContent!.includes("Mobile app"));
  expect((await admin("GET", "/v1/projects/mobile")).status).toBe(404);
  await tab.close();
}, 60_000);

test("flags: create a flag with two variants, find it, toggle it on in production; axe; screenshots", async () => {
  const tab = await newTab();
  await signIn(tab, ADMIN);
  await tab.goto(`${srv.url}/projects/default/flags/new`);
  await tab.waitForSelector("form.form");
  await tab.type("form.form input", "new-banner");
  const [, name] = await tab.$$("form.form input");
  await name!.type("New banner");
  await clickText(tab, "Add variant");
  await clickText(tab, "Add variant");
  await tab.waitForFunction(() => document.querySelectorAll(".variant input").length === 4);
  const variantInputs = await tab.$$(".variant input");
  await variantInputs[0]!.type("a");
  await variantInputs[1]!.type("60");
  await variantInputs[2]!.type("b");
  await variantInputs[3]!.type("30");
  expect(await tab.$eval("fieldset [role=alert]", (e) => e.textContent)).toBe("The weights add up to 90, not 100");
  await axe(tab, "new flag");
  await shots(tab, "new-flag");
  await variantInputs[3]!.click({ count: 3 });
  await variantInputs[3]!.type("40");
  await clickText(tab, "Create flag");
  await tab.waitForSelector("table.flags tr[data-flag=new-banner]");
  expect((await admin("GET", "/v1/projects/default/flags/new-banner")).body.variants.map((v: any) => [v.key, v.weight])).toEqual([["a", 60], ["b", 40]]);

  await tab.goto(`${srv.url}/projects/default/flags`);
  await tab.waitForSelector("table.flags tr[data-flag=checkout]");
  expect(await tab.$eval("tr[data-flag=checkout] td[data-env=staging] [role=switch]", (e) => e.textContent)).toBe("On");
  expect(await tab.$eval("tr[data-flag=checkout] td[data-env=staging] input", (e) => [(e as HTMLInputElement).value, e.getAttribute("aria-label")])).toEqual([
    "30",
    "Rollout of Checkout in Staging (%)",
  ]);
  await axe(tab, "flags");
  await shots(tab, "flags");
  const sw = "tr[data-flag=checkout] td[data-env=production] [role=switch]";
  expect(await tab.$eval(sw, (e) => e.getAttribute("aria-checked"))).toBe("false");
  await tab.focus(sw);
  await tab.keyboard.press("Enter");
  await tab.waitForFunction((s) => document.querySelector(s)?.getAttribute("aria-checked") === "true", {}, sw);
  expect((await admin("GET", "/v1/projects/default/flags/checkout/states/production")).body.enabled).toBe(true);

  await tab.type("#flag-search", "banner");
  await tab.waitForFunction(() => document.querySelectorAll("table.flags tbody tr").length === 1);
  await tab.goto(`${srv.url}/health`);
  await tab.waitForSelector("dl.facts");
  await axe(tab, "health");
  await tab.goto(`${srv.url}/plugins`);
  await tab.waitForSelector("main h1");
  await axe(tab, "coming soon");
  await tab.close();
}, 90_000);

test("a viewer sees no control that changes anything", async () => {
  const ctx = await browser.createBrowserContext();
  const tab = await ctx.newPage();
  tab.on("pageerror", (e) => problems.push(String(e)));
  await signIn(tab, VIEWER);
  for (const path of ["/projects", "/projects/default/flags"]) {
    await tab.goto(`${srv.url}${path}`);
    await tab.waitForSelector(path === "/projects" ? ".cards" : "table.flags");
    const controls = await tab.$$eval("main button, main [role=switch], main form, main a.button", (els) => els.map((e) => e.textContent));
    expect({ path, controls }).toEqual({ path, controls: [] });
  }
  await shots(tab, "flags-viewer");
  await ctx.close();
}, 60_000);

test("a cross-site request with the session cookie is refused", async () => {
  const tab = await newTab();
  await signIn(tab, ADMIN);
  // With the cookie but no or a wrong X-CSRF-Token (what a forged form or fetch could send): 403, nothing changes.
  const results = await tab.evaluate(async () => {
    const send = (headers: Record<string, string>) =>
      fetch("/v1/projects/default/flags", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ key: "forged", name: "Forged" }) }).then((r) => r.status);
    return [await send({}), await send({ "x-csrf-token": "not-the-token" })];
  });
  expect(results).toEqual([403, 403]);
  expect((await admin("GET", "/v1/projects/default/flags/forged")).status).toBe(404);
  // A page of another origin cannot make the browser send the SameSite=Strict cookie: its
  // cross-site request arrives without it (401 at the API), whatever it carries.
  let seen: string | undefined = "unset";
  other = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () =>
      new Response(`<!doctype html><title>evil</title><form method="post" action="${srv.url}/v1/auth/session" id="f"></form>`, { headers: { "content-type": "text/html" } }),
  });
  const spy = await tab.browserContext().newPage();
  await spy.setRequestInterception(true);
  spy.on("request", (r) => {
    if (r.url().startsWith(srv.url)) seen = r.headers().cookie;
    void r.continue();
  });
  await spy.goto(`http://127.0.0.1:${other.port}/`);
  await Promise.all([spy.waitForNavigation(), spy.evaluate(() => (document.getElementById("f") as HTMLFormElement).submit())]);
  expect(seen).toBeUndefined();
  await spy.close();
  await tab.close();
}, 60_000);

test("sign-out clears the session; expiry sends the user back to sign-in with a message", async () => {
  const tab = await newTab();
  await signIn(tab, ADMIN);
  await clickText(tab, "Sign out");
  await tab.waitForSelector("input[name=email]");
  expect((await tab.browserContext().cookies()).find((c) => c.name === "flagsvc_session")).toBeUndefined();
  await signIn(tab, ADMIN);
  // The session ends under the page (the cookie is gone): the next call answers 401.
  await tab.deleteCookie({ name: "flagsvc_session", url: srv.url });
  await clickText(tab, "Flags");
  await tab.waitForSelector("input[name=email]");
  expect(await tab.$eval("[role=status]", (e) => e.textContent)).toContain("Your session expired");
  await tab.close();
}, 60_000);

/** The editor's API calls, as another person's (a login token, not the admin key). */
async function editorCalls() {
  const login = await callServer(srv.url, "POST", "/v1/auth/login", { body: EDITOR });
  expect(login.status).toBe(200);
  return (method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: login.body.token, body });
}

const cell = (flag: string, env: string) => `tr[data-flag=${flag}] td[data-env=${env}]`;

test("live: changes made through the API by another user show on an open flag list, without a reload", async () => {
  const editor = await editorCalls();
  const tab = await newTab();
  await signIn(tab, ADMIN);
  await tab.goto(`${srv.url}/projects/default/flags`);
  await tab.waitForSelector("table.flags[data-ready]");
  await tab.waitForSelector("[data-live=live]");
  // Gone if the page were loaded again.
  await tab.evaluate(() => ((window as any).stillThisPage = true));
  const shows = (check: string, arg: unknown = null) => tab.waitForFunction(check, { timeout: 5_000 }, arg);
  const started = performance.now();
  expect((await editor("POST", "/v1/projects/default/flags", { key: "live-flag", name: "Live flag" })).status).toBe(201);
  await tab.waitForSelector("tr[data-flag=live-flag]", { timeout: 5_000 });
  const created = performance.now() - started;
  expect((await editor("PUT", "/v1/projects/default/flags/live-flag/states/production", { enabled: true })).status).toBe(200);
  await shows(`document.querySelector("${cell("live-flag", "production")} [role=switch]")?.getAttribute("aria-checked") === "true"`);
  expect((await editor("PUT", "/v1/projects/default/flags/live-flag/states/production", { enabled: true, rolloutPercentage: 40 })).status).toBe(200);
  await shows(`document.querySelector("${cell("live-flag", "production")} input")?.value === "40"`);
  expect((await editor("DELETE", "/v1/projects/default/flags/live-flag")).status).toBe(204);
  await shows(`!document.querySelector("tr[data-flag=live-flag]")`);
  expect(await tab.evaluate(() => (window as any).stillThisPage)).toBe(true);
  console.log(`a flag created by another user showed on the open list after ${created.toFixed(0)} ms`);
  // Leaving the page closes the stream.
  const metrics = () => fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` }, tls: { rejectUnauthorized: false } } as RequestInit).then((r) => r.text());
  const streams = async () => Number(/flagsvc_streams_connected\{kind="audit"\} (\d+)/.exec(await metrics())?.[1] ?? -1);
  expect(await streams()).toBeGreaterThanOrEqual(1);
  await clickText(tab, "Health");
  await tab.waitForSelector("dl.facts");
  for (let i = 0; i < 50 && (await streams()) > 0; i++) await Bun.sleep(100);
  expect(await streams()).toBe(0);
  await tab.close();
}, 60_000);

test("two concurrent edits of one state: the second is refused (If-Match), its message shown and the row refreshed", async () => {
  await admin("POST", "/v1/projects/default/flags", { key: "contested", name: "Contested" });
  const first = await newTab();
  await signIn(first, ADMIN);
  // The second person's tab hears no live change (its stream is cut), so it still shows what it loaded when it saves.
  const ctx = await browser.createBrowserContext();
  const second = await ctx.newPage();
  second.on("pageerror", (e) => problems.push(String(e)));
  await second.setBypassCSP(true); // only to inject axe
  await second.setRequestInterception(true);
  second.on("request", (r) => void (r.url().includes("/audit-log/stream") ? r.abort() : r.continue()));
  await signIn(second, EDITOR);
  for (const tab of [first, second]) {
    await tab.goto(`${srv.url}/projects/default/flags`);
    await tab.waitForSelector(`${cell("contested", "production")} [role=switch]`);
  }
  const sw = `${cell("contested", "production")} [role=switch]`;
  // The first saves: on.
  await first.click(sw);
  await first.waitForFunction((s) => document.querySelector(s)?.getAttribute("aria-checked") === "true", {}, sw);
  // The second, on the version it loaded, sets a rollout: refused, the message says who changed what.
  const rollout = `${cell("contested", "production")} input`;
  await second.click(rollout);
  await second.type(rollout, "55");
  await second.keyboard.press("Enter");
  await second.waitForSelector("[role=alert]");
  const message = await second.$eval("[role=alert]", (e) => e.textContent!);
  // (Its first write: both fields set.)
  expect(message).toMatch(/^Flag contested's state in production changed by admin@example\.com at \S+ \(enabled, rolloutPercentage\) since you loaded it: reload it and apply your change again$/);
  // Nothing overwritten; the row now shows the state as it is.
  expect((await admin("GET", "/v1/projects/default/flags/contested/states/production")).body).toMatchObject({ enabled: true, rolloutPercentage: null });
  await second.waitForFunction((s) => document.querySelector(s)?.getAttribute("aria-checked") === "true", {}, sw);
  await axe(second, "flags: edit conflict");
  await shots(second, "flags-conflict");
  // Again with a toggle: the first turns it off, the second (still showing on) toggles: refused too.
  await first.click(sw);
  await first.waitForFunction((s) => document.querySelector(s)?.getAttribute("aria-checked") === "false", {}, sw);
  await second.click(sw);
  await second.waitForFunction((s) => document.querySelector(s)?.getAttribute("aria-checked") === "false", {}, sw);
  expect(await second.$eval("[role=alert]", (e) => e.textContent!)).toContain("(enabled) since you loaded it");
  expect((await admin("GET", "/v1/projects/default/flags/contested/states/production")).body.enabled).toBe(false);
  // On the refreshed row the second's change goes through.
  await second.click(sw);
  await second.waitForFunction(() => !document.querySelector("[role=alert]"));
  expect((await admin("GET", "/v1/projects/default/flags/contested/states/production")).body.enabled).toBe(true);
  await first.close();
  await ctx.close();
}, 60_000);

test("no console errors and no request to anything but the server", () => {
  expect(problems.filter((p) => !p.includes("401") && !p.includes("403"))).toEqual([]);
});
