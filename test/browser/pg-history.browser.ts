/**
 * The playground and the history in headless Chromium against the compiled binary: a flag set up
 * through the API (two variants, a rule, production at 30 %) evaluated in the playground as the
 * signed-in user, no API key made (TARGETING_RULE_MATCH with the rule's name, PERCENTAGE_ROLLOUT,
 * a batch), an invalid context said at its field; the history shows a change made in the console
 * with the signed-in user as actor, its filters work (and the flag page's link), an entry written
 * meanwhile appears live; a viewer reads the history and changes nothing; axe-core with no
 * serious or critical violation; screenshots at 1280 and 390 px.
 * Run by `npm run test:browser`.
 */
import { expect, test } from "bun:test";
import type { Page } from "puppeteer-core";
import { ADMIN, VIEWER, axe, clickText, consoleHarness, control, fill, pick, shots, value } from "./harness";

const { admin, signedIn, problems, url } = consoleHarness("pgh");
const FLAGS = "/v1/projects/default/flags";
const PLAYGROUND = "/projects/default/playground";
const HISTORY = "/projects/default/history";

const apiKeys = async () => (await admin("GET", "/v1/projects/default/api-keys")).body.apiKeys as { id: string }[];

async function setContext(tab: Page, text: string) {
  const el = await control(tab, "Context (JSON)");
  await el.evaluate((e) => {
    e.value = "";
  });
  await el.type(text);
}

const reasonOf = (tab: Page, flag: string) => tab.$eval(`table.results tr[data-flag="${flag}"] td[data-reason]`, (e) => e.getAttribute("data-reason"));

test("set up through the API: a flag with two variants and a rule, on in production at 30 %", async () => {
  expect(
    (
      await admin("POST", FLAGS, {
        key: "promo",
        name: "Promo banner",
        variants: [
          { key: "control", weight: 60 },
          { key: "banner", weight: 40 },
        ],
        rules: [{ name: "beta users", conditions: [{ attribute: "plan", operator: "in", value: ["beta"] }], enabled: true, variant: "banner" }],
      })
    ).status,
  ).toBe(201);
  expect((await admin("PUT", `${FLAGS}/promo/states/production`, { enabled: true, rolloutPercentage: 30 })).status).toBe(200);
  expect((await admin("POST", FLAGS, { key: "other", name: "Other flag" })).status).toBe(201);
});

test("the playground evaluates as the signed-in user, no API key made: the rule's name, a rollout, a batch", async () => {
  const keysBefore = await apiKeys();
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${PLAYGROUND}`);
  await pick(tab, "Environment", "production");

  // An invalid context is said at its field, nothing sent.
  await setContext(tab, '{"userId": "u1",');
  await pick(tab, "Flag", "promo");
  await clickText(tab, "Evaluate");
  const ctx = await control(tab, "Context (JSON)");
  await tab.waitForFunction((e) => e.getAttribute("aria-invalid") === "true", {}, ctx);
  expect(await ctx.evaluate((e) => document.getElementById(e.getAttribute("aria-describedby")!.split(" ").pop()!)!.textContent)).toContain("Not valid JSON");
  await axe(tab, "playground with an error");

  // The rule matches: its name is shown.
  await setContext(tab, '{"userId": "u1", "plan": "beta"}');
  await clickText(tab, "Evaluate");
  await tab.waitForSelector('table.results tr[data-flag="promo"]');
  expect(await reasonOf(tab, "promo")).toBe("TARGETING_RULE_MATCH");
  await tab.waitForFunction(() => document.querySelector('table.results tr[data-flag="promo"] td:last-child')?.textContent === "beta users");
  expect(await tab.$eval('table.results tr[data-flag="promo"]', (e) => Array.from(e.children).map((c) => c.textContent))).toEqual(["promo", "Yes", "banner", "TARGETING_RULE_MATCH", "beta users"]);

  // No rule matches: the rollout decides (included or excluded, by the user's bucket).
  await setContext(tab, '{"userId": "u1", "plan": "free"}');
  await clickText(tab, "Evaluate");
  await tab.waitForFunction(() => document.querySelector('table.results tr[data-flag="promo"] td[data-reason]')?.getAttribute("data-reason")?.startsWith("PERCENTAGE_ROLLOUT"));

  // A batch of every flag.
  await tab.click("input[name=mode][type=radio]:not(:checked)");
  await clickText(tab, "Select all");
  await clickText(tab, "Evaluate selected");
  await tab.waitForSelector('table.results tr[data-flag="other"]');
  expect(await reasonOf(tab, "other")).toBe("FLAG_DISABLED");
  expect(await reasonOf(tab, "promo")).toMatch(/^PERCENTAGE_ROLLOUT/);
  await axe(tab, "playground");
  await shots(tab, "playground");

  expect(await apiKeys()).toEqual(keysBefore);
  await tab.close();
}, 90_000);

test("the history: a change made in the console with the signed-in user as actor, before → after, filters, the flag page's link, live", async () => {
  const tab = await signedIn(ADMIN);
  // A change in the console: toggle the other flag in staging on the flag list.
  await tab.goto(`${url()}/projects/default/flags`);
  await tab.waitForSelector('table.flags tr[data-flag="other"] td[data-env=staging] [role=switch]');
  await tab.click('table.flags tr[data-flag="other"] td[data-env=staging] [role=switch]');
  await tab.waitForSelector('table.flags tr[data-flag="other"] td[data-env=staging] [role=switch][aria-checked=true]');

  await tab.goto(`${url()}${HISTORY}`);
  await tab.waitForSelector("ol.history[data-ready] li");
  const first = await tab.$eval("ol.history li", (e) => ({ head: e.querySelector(".entry-head")!.textContent, changes: e.querySelector(".changes")?.textContent }));
  expect(first.head).toContain("admin@example.com enabled flag state other in staging");
  expect(first.changes).toContain("enabled");
  expect(first.changes).toContain("→");

  // Filters: by actor (the signed-in user's e-mail), by resource type, by action.
  await fill(tab, "Actor", "admin@example.com");
  await clickText(tab, "Apply filters");
  await tab.waitForFunction(() => location.search.includes("actorId="));
  await tab.waitForFunction(() => Array.from(document.querySelectorAll("ol.history li .actor")).every((e) => e.textContent === "admin@example.com"));
  // The toggle alone: the playground wrote nothing.
  expect(await tab.$$eval("ol.history li", (es) => es.map((e) => `${e.getAttribute("data-action")} ${e.querySelector("code")!.textContent}`))).toEqual(["enabled other"]);
  await clickText(tab, "Clear");
  await tab.waitForFunction(() => document.querySelectorAll("ol.history li").length > 1);
  await pick(tab, "Resource type", "flag");
  await pick(tab, "Action", "created");
  await clickText(tab, "Apply filters");
  await tab.waitForFunction(() => document.querySelectorAll("ol.history li").length === 2);
  expect(await tab.$$eval("ol.history li code", (es) => es.map((e) => e.textContent))).toEqual(["other", "promo"]);
  await axe(tab, "history");
  await shots(tab, "history");

  // The flag page links to the flag's history; an entry written meanwhile shows live.
  await tab.goto(`${url()}/projects/default/flags/promo`);
  await (await tab.waitForSelector(".crumbs a[href$='history?resourceKey=promo']"))!.click();
  await tab.waitForFunction(() => location.search === "?resourceKey=promo");
  await tab.waitForSelector("ol.history[data-ready] li");
  expect(await value(tab, "Resource key")).toBe("promo");
  expect(new Set(await tab.$$eval("ol.history li code", (es) => es.map((e) => e.textContent)))).toEqual(new Set(["promo"]));
  await tab.waitForSelector(".live-status[data-live=live]");
  const before = await tab.$$eval("ol.history li", (es) => es.length);
  expect((await admin("PATCH", `${FLAGS}/promo`, { description: "Spring" })).status).toBe(200);
  expect((await admin("PATCH", `${FLAGS}/other`, { description: "Not this one" })).status).toBe(200);
  await tab.waitForFunction((n) => document.querySelectorAll("ol.history li").length === n + 1, {}, before);
  expect(await tab.$eval("ol.history li", (e) => e.textContent)).toContain("Spring");
  await Bun.sleep(300);
  expect(await tab.$$eval("ol.history li", (es) => es.length)).toBe(before + 1);
  await tab.close();
}, 90_000);

test("the history pages with nextCursor: older entries are added below", async () => {
  for (let i = 0; i < 55; i++) expect((await admin("POST", FLAGS, { key: `bulk-${i}`, name: `Bulk ${i}` })).status).toBe(201);
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${HISTORY}?resourceType=flag&action=created`);
  await tab.waitForSelector("ol.history[data-ready] li");
  expect(await tab.$$eval("ol.history li", (es) => es.length)).toBe(50);
  await clickText(tab, "Older entries");
  await tab.waitForFunction(() => document.querySelectorAll("ol.history li").length === 57);
  const keys = await tab.$$eval("ol.history li code", (es) => es.map((e) => e.textContent));
  expect([keys[0], keys.at(-2), keys.at(-1), new Set(keys).size]).toEqual(["bulk-54", "other", "promo", 57]);
  expect(await tab.$$eval("main button", (bs) => bs.some((b) => b.textContent === "Older entries"))).toBe(false);
  await tab.close();
}, 60_000);

test("a viewer reads the history", async () => {
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}${HISTORY}`);
  await tab.waitForSelector("ol.history[data-ready] li");
  await axe(tab, "history, viewer");
  await tab.close();
}, 60_000);

test("no console errors on the playground and history", () => {
  expect(problems.filter((p) => !/\b(400|401)\b/.test(p))).toEqual([]);
});
