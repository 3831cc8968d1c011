/**
 * The flag page in headless Chromium against the compiled binary: create a flag, give it two
 * variants (the weights' sum said before saving) and a rule, enable it in production with a
 * 30 % rollout, reload and see it stored (and through the API); a validation error lands at its
 * field; a concurrent change is refused with who made it (If-Match); a viewer sees no control;
 * axe-core with no serious or critical violation; screenshots at 1280 and 390 px.
 * Run by `npm run test:browser`.
 */
import { expect, test } from "bun:test";
import { ADMIN, VIEWER, axe, clickText, consoleHarness, control, fill, pick, shots, value } from "./harness";

const { admin, signedIn, problems, url } = consoleHarness("flp");
const PAGE = "/projects/default/flags/promo";

test("create a flag, give it two variants and a rule, enable it in production at 30 %: stored, shown after a reload", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}/projects/default/flags/new`);
  await fill(tab, "Key", "promo");
  await fill(tab, "Name", "Promo banner");
  await clickText(tab, "Create flag");
  await tab.waitForSelector("table.flags tr[data-flag=promo]");

  await tab.goto(`${url()}${PAGE}`);
  await tab.waitForSelector(".flag-page[data-ready]");
  await fill(tab, "Description", "Spring campaign");
  await clickText(tab, "Add variant");
  await clickText(tab, "Add variant");
  await fill(tab, "Variant 1 key", "control");
  await fill(tab, "Variant 1 weight", "60");
  await fill(tab, "Variant 2 key", "banner");
  await fill(tab, "Variant 2 weight", "30");
  // The weights are checked as they are typed, and saving waits for them.
  expect(await tab.$eval("fieldset [role=alert]", (e) => e.textContent)).toBe("The weights add up to 90, not 100");
  expect(await tab.$eval("form[aria-label=Definition] button[type=submit]", (e) => (e as HTMLButtonElement).disabled)).toBe(true);
  await fill(tab, "Variant 2 weight", "40");

  await clickText(tab, "Add rule");
  await fill(tab, "Rule 1 name", "beta users");
  await clickText(tab, "Add condition to rule 1");
  await fill(tab, "Rule 1 condition 1 attribute", "plan");
  await pick(tab, "Rule 1 condition 1 operator", "in");
  await fill(tab, "Rule 1 condition 1 values", "beta\ntrial");
  await clickText(tab, "Add condition to rule 1");
  await fill(tab, "Rule 1 condition 2 attribute", "age");
  await pick(tab, "Rule 1 condition 2 operator", "greater_than_or_equal");
  await fill(tab, "Rule 1 condition 2 value", "18");
  await pick(tab, "Rule 1 serves", "banner");
  await clickText(tab, "Save flag");
  await tab.waitForFunction(() => document.querySelector("form[aria-label=Definition] [role=status]")?.textContent === "Saved.");

  const prod = "[data-env=production] form.state-form";
  await tab.click(`${prod} input[name=enabled]`);
  await fill(tab, "Rollout in Production (%)", "30");
  await clickText(tab, "Save Production");
  await tab.waitForFunction((s) => document.querySelector(`${s} [role=status]`)?.textContent === "Saved.", {}, prod);

  // Stored: through the API, and on the page after a reload.
  const flag = (await admin("GET", "/v1/projects/default/flags/promo")).body;
  expect([flag.description, flag.variants]).toEqual(["Spring campaign", [{ key: "control", weight: 60 }, { key: "banner", weight: 40 }]]);
  expect(flag.rules.map((r: any) => [r.name, r.conditions, r.enabled, r.variant])).toEqual([
    ["beta users", [{ attribute: "plan", operator: "in", value: ["beta", "trial"] }, { attribute: "age", operator: "greater_than_or_equal", value: 18 }], true, "banner"],
  ]);
  const state = (await admin("GET", "/v1/projects/default/flags/promo/states/production")).body;
  expect([state.enabled, state.rolloutPercentage]).toEqual([true, 30]);

  await tab.reload();
  await tab.waitForSelector(".flag-page[data-ready]");
  await tab.waitForSelector(`${prod} input[name=rolloutPercentage]`);
  expect(await tab.$eval(`${prod} input[name=enabled]`, (e) => (e as HTMLInputElement).checked)).toBe(true);
  expect(await tab.$eval(`${prod} input[name=rolloutPercentage]`, (e) => (e as HTMLInputElement).value)).toBe("30");
  expect(await value(tab, "Rule 1 condition 1 values")).toBe("beta\ntrial");
  expect(await value(tab, "Rule 1 serves")).toBe("banner");
  await axe(tab, "flag page");
  await shots(tab, "flag");
  await tab.close();
}, 90_000);

test("a validation error shows at its field; a change made meanwhile by someone else is refused with who made it", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}${PAGE}`);
  await tab.waitForSelector(".flag-page[data-ready]");
  await pick(tab, "Rule 1 condition 2 operator", "semver_greater_than");
  await fill(tab, "Rule 1 condition 2 value", "1.2");
  await clickText(tab, "Save flag");
  await tab.waitForSelector("[aria-invalid=true]");
  const input = await control(tab, "Rule 1 condition 2 value");
  expect(await input.evaluate((e) => e.getAttribute("aria-invalid"))).toBe("true");
  const message = await input.evaluate((e) => document.getElementById(e.getAttribute("aria-describedby")!.split(" ").pop()!)!.textContent);
  expect(message).toContain("1.2");
  await axe(tab, "flag page with an error");

  // Keyboard: move the rule's condition back and reorder rules with Up/Down.
  await pick(tab, "Rule 1 condition 2 operator", "greater_than_or_equal");
  await fill(tab, "Rule 1 condition 2 value", "21");
  await clickText(tab, "Add rule");
  await fill(tab, "Rule 2 name", "everyone else");
  await tab.$$eval("main button", (bs) => (bs.find((b) => b.textContent === "Up (move rule 2 up)") as HTMLButtonElement).focus());
  await tab.keyboard.press("Enter");
  expect(await value(tab, "Rule 1 name")).toBe("everyone else");

  // Someone else changes the flag meanwhile: this save is refused (412), nothing written.
  expect((await admin("PATCH", "/v1/projects/default/flags/promo", { name: "Promo (renamed)" })).status).toBe(200);
  await clickText(tab, "Save flag");
  await tab.waitForFunction(() => document.querySelector("form[aria-label=Definition] .banner.error")?.textContent?.includes("since you loaded it"));
  expect((await admin("GET", "/v1/projects/default/flags/promo")).body.rules.length).toBe(1);
  await clickText(tab, "Reload the flag");
  await tab.waitForFunction(() => document.querySelector("h1")?.textContent === "Promo (renamed)");
  await tab.close();
}, 90_000);

test("a viewer sees the flag read-only: no button, form or switch", async () => {
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}${PAGE}`);
  await tab.waitForSelector(".flag-page[data-ready]");
  await tab.waitForSelector("[data-env=production] [data-state=on]");
  const controls = await tab.$$eval("main button, main form, main [role=switch], main a.button", (els) => els.map((e) => e.textContent));
  expect(controls).toEqual([]);
  expect(await (await control(tab, "Rule 1 name")).evaluate((e) => e.readOnly)).toBe(true);
  await axe(tab, "flag page, viewer");
  await shots(tab, "flag-viewer");
  await tab.close();
}, 60_000);

test("no console errors on the flag page", () => {
  expect(problems.filter((p) => !/\b(400|401|412)\b/.test(p))).toEqual([]);
});
