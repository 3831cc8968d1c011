/**
 * The playground without API keys, and the flag page's live updates, in headless Chromium against
 * the compiled binary: a viewer evaluates one flag and a batch in the playground (through
 * POST /v1/projects/{slug}/environments/{env}/evaluate), and the project's API keys are the same
 * before and after; an open flag page shows a change made through the API (definition and state)
 * without a reload; with unsaved edits it keeps them and says who changed the flag, and "Reload the
 * flag" shows the new version; a viewer's read-only page follows too. axe-core with no serious or
 * critical violation; screenshots at 1280 and 390 px. Run by `npm run test:browser`.
 */
import { expect, test } from "bun:test";
import type { Page } from "puppeteer-core";
import { ADMIN, VIEWER, axe, clickText, consoleHarness, control, fill, pick, shots, value } from "./harness";

const { admin, signedIn, problems, url } = consoleHarness("pgl");
const FLAGS = "/v1/projects/default/flags";
const FLAG_PAGE = "/projects/default/flags/promo";

const apiKeys = async () => (await admin("GET", "/v1/projects/default/api-keys")).body.apiKeys as { id: string }[];
const reasonOf = (tab: Page, flag: string) => tab.$eval(`table.results tr[data-flag="${flag}"] td[data-reason]`, (e) => e.getAttribute("data-reason"));

/** Waits until `probe` holds in the page; returns how long it took after the call, in ms (printed). */
async function shownWithin(tab: Page, what: string, probe: () => boolean): Promise<number> {
  const started = performance.now();
  await tab.waitForFunction(probe, { timeout: 10_000, polling: 20 });
  const ms = Math.round(performance.now() - started);
  console.log(`${what}: shown ${ms} ms after the API answered`);
  return ms;
}

test("set up through the API: a flag with two variants and a rule, on in production", async () => {
  const promo = {
    key: "promo",
    name: "Promo banner",
    variants: [{ key: "control" }, { key: "banner" }],
    rules: [{ name: "beta users", conditions: [{ attribute: "plan", operator: "equals", value: "beta" }], enabled: true, variant: "banner" }],
  };
  expect((await admin("POST", FLAGS, promo)).status).toBe(201);
  expect((await admin("PUT", `${FLAGS}/promo/states/production`, { enabled: true })).status).toBe(200);
  expect((await admin("POST", FLAGS, { key: "other", name: "Other flag" })).status).toBe(201);
});

test("a viewer evaluates one flag and a batch in the playground; no API key is made", async () => {
  const before = await apiKeys();
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}/projects/default/playground`);
  await pick(tab, "Environment", "production");
  await pick(tab, "Flag", "promo");
  const ctx = await control(tab, "Context (JSON)");
  await ctx.evaluate((e) => (e.value = ""));
  await ctx.type('{"userId": "u1", "plan": "beta"}');
  await clickText(tab, "Evaluate");
  await tab.waitForFunction(() => document.querySelector('table.results tr[data-flag="promo"] td:last-child')?.textContent === "beta users");
  expect(await tab.$eval('table.results tr[data-flag="promo"]', (e) => Array.from(e.children).map((c) => c.textContent))).toEqual(["promo", "Yes", "banner", "TARGETING_RULE_MATCH", "beta users"]);

  await tab.click("input[name=mode][type=radio]:not(:checked)");
  await clickText(tab, "Select all");
  await clickText(tab, "Evaluate selected");
  await tab.waitForSelector('table.results tr[data-flag="other"]');
  expect([await reasonOf(tab, "promo"), await reasonOf(tab, "other")]).toEqual(["TARGETING_RULE_MATCH", "FLAG_DISABLED"]);
  await axe(tab, "playground, viewer");
  await shots(tab, "playground-viewer");
  expect(await apiKeys()).toEqual(before);
  // Not counted as traffic: the flag's state was never evaluated.
  expect((await admin("GET", `${FLAGS}/promo/states/production`)).body.lastEvaluatedAt).toBeNull();
  await tab.close();
}, 90_000);

test("an open flag page shows a change made through the API, definition and state, without a reload", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${FLAG_PAGE}`);
  await tab.waitForSelector(".flag-page[data-ready]");
  await tab.waitForSelector(".live-status[data-live=live]");
  const navigations: string[] = [];
  tab.on("framenavigated", (f) => navigations.push(f.url()));

  expect((await admin("PATCH", `${FLAGS}/promo`, { description: "From the API" })).status).toBe(200);
  await shownWithin(tab, "description", () => ((Array.from(document.querySelectorAll("main label")).find((l) => l.textContent!.trim() === "Description") as HTMLLabelElement | undefined)?.control as HTMLInputElement | undefined)?.value === "From the API");
  expect((await admin("PUT", `${FLAGS}/promo/states/staging`, { enabled: true, rolloutPercentage: 20 })).status).toBe(200);
  await shownWithin(tab, "state", () => (document.querySelector("[data-env=staging] input[name=enabled]") as HTMLInputElement | null)?.checked === true);
  expect(await value(tab, "Rollout in Staging (%)")).toBe("20");
  expect(await tab.$$(".remote-change")).toHaveLength(0);
  expect(navigations).toEqual([]);
  await tab.close();
}, 60_000);

test("with unsaved edits the page keeps them and says who changed the flag; reloading shows the new version", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${FLAG_PAGE}`);
  await tab.waitForSelector(".live-status[data-live=live]");
  await fill(tab, "Name", "My unsaved name", true);
  await fill(tab, "Rollout in Staging (%)", "55", true);

  expect((await admin("PATCH", `${FLAGS}/promo`, { description: "Changed meanwhile" })).status).toBe(200);
  await shownWithin(tab, "notice (definition)", () => document.querySelector("#def-title ~ .remote-change")?.textContent?.includes("changed this flag; reload to see") === true);
  expect(await value(tab, "Name")).toBe("My unsaved name");
  expect(await value(tab, "Description")).toBe("From the API");

  expect((await admin("PUT", `${FLAGS}/promo/states/staging`, { enabled: false })).status).toBe(200);
  await shownWithin(tab, "notice (state)", () => document.querySelector("[data-env=staging] .remote-change")?.textContent?.includes("changed this flag in Staging; reload to see") === true);
  expect(await value(tab, "Rollout in Staging (%)")).toBe("55");
  await axe(tab, "flag page with a change by someone else");
  await shots(tab, "flag-remote-change");

  await clickText(tab, "Reload the flag");
  await tab.waitForFunction(() => !document.querySelector("#def-title ~ .remote-change"));
  expect([await value(tab, "Name"), await value(tab, "Description")]).toEqual(["Promo banner", "Changed meanwhile"]);
  await clickText(tab, "Reload the state", "[data-env=staging]");
  await tab.waitForFunction(() => !document.querySelector("[data-env=staging] .remote-change"));
  expect(await tab.$eval("[data-env=staging] input[name=enabled]", (e) => (e as HTMLInputElement).checked)).toBe(false);
  expect(await value(tab, "Rollout in Staging (%)")).toBe("20");
  await tab.close();
}, 60_000);

test("one's own save shows no notice; a viewer's read-only page follows changes too", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${FLAG_PAGE}`);
  await tab.waitForSelector(".live-status[data-live=live]");
  await fill(tab, "Description", "Saved here", true);
  await clickText(tab, "Save flag");
  await tab.waitForFunction(() => document.querySelector("form[aria-label=Definition] [role=status]")?.textContent === "Saved.");
  await Bun.sleep(500); // the save's own entry arrives meanwhile
  expect(await tab.$$(".remote-change")).toHaveLength(0);
  await tab.close();

  const viewer = await signedIn(VIEWER);
  await viewer.goto(`${url()}${FLAG_PAGE}`);
  await viewer.waitForSelector(".live-status[data-live=live]");
  expect((await admin("PUT", `${FLAGS}/promo/states/development`, { enabled: true })).status).toBe(200);
  await shownWithin(viewer, "viewer's state", () => document.querySelector("[data-env=development] [data-state]")?.getAttribute("data-state") === "on");
  expect((await admin("PATCH", `${FLAGS}/promo`, { name: "Promo banner 2" })).status).toBe(200);
  await shownWithin(viewer, "viewer's definition", () => document.querySelector("h1")?.textContent === "Promo banner 2");
  await axe(viewer, "flag page, viewer, live");
  await shots(viewer, "flag-live-viewer");
  await viewer.close();
}, 60_000);

test("no console errors (but the sign-in page's 401 before signing in)", () => {
  expect(problems.filter((p) => !/^https:\/\/[^/]+\/: .*\b401\b/.test(p))).toEqual([]);
});
