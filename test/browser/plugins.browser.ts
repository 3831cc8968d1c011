/**
 * The plugins and integrations pages in headless Chromium against the compiled binary (Pro):
 * search the marketplace (text and category), install the first-party PostHog plugin through the
 * form made from its configSchema (its secret `apiKey` a password input; a missing required field
 * told at the field), see its status and log lines, uninstall it (asked first); configure a
 * Segment integration through its type's form (the write key a password input), delete it; a
 * viewer gets neither page's controls nor their links; on the Community Edition (a second binary)
 * both pages say Pro is needed instead of breaking. axe-core; screenshots at 1280 and 390 px.
 * Run by `npm run test:browser`.
 */
import { expect, test } from "bun:test";
import type { Page } from "puppeteer-core";
import { ADMIN, VIEWER, axe, clickText, consoleHarness, control, fill, pick, shots, value } from "./harness";

const P = "/v1/projects/default";
const pro = consoleHarness("plp", { env: { SVC_EDITION: "pro" } });
const ce = consoleHarness("plc");

/** Console errors other than the 401 of the session asked before sign-in, and the 400 of the install sent without its required field. */
const unexpected = (problems: string[]) => problems.filter((p) => !/status of (400|401)\b/.test(p));

const waitText = (tab: Page, selector: string, part: string) =>
  tab.waitForFunction((s, p) => Array.from(document.querySelectorAll(s)).some((e) => e.textContent!.includes(p)), {}, selector, part);
const packagesShown = (tab: Page) => tab.$$eval(".market [data-package]", (els) => els.map((e) => e.getAttribute("data-package")));
const typeOf = async (tab: Page, name: string) => (await control(tab, name)).evaluate((e) => e.type);

test("marketplace search, install PostHog from its configSchema form, its status and logs, uninstall", async () => {
  const tab = await pro.signedIn(ADMIN);
  await clickText(tab, "Plugins", "nav");
  await tab.waitForSelector(".market[data-ready]");
  expect(new URL(tab.url()).pathname).toBe("/projects/default/plugins");

  await pick(tab, "Category", "monitoring");
  await tab.waitForFunction(() => Array.from(document.querySelectorAll(".market [data-package]")).every((e) => e.textContent!.includes("monitoring")));
  expect(await packagesShown(tab)).toContain("@flagsvc/grafana");
  await pick(tab, "Category", "");
  await fill(tab, "Search", "posthog");
  await tab.waitForFunction(() => document.querySelectorAll(".market [data-package]").length === 1);
  expect(await packagesShown(tab)).toEqual(["@flagsvc/posthog"]);

  await clickText(tab, "Details and install PostHog");
  await tab.waitForSelector("form[aria-label='Install @flagsvc/posthog']");
  expect(await typeOf(tab, "apiKey")).toBe("password");
  expect(await typeOf(tab, "baseUrl")).toBe("text");
  expect(await value(tab, "baseUrl")).toBe("https://us.i.posthog.com");
  expect(await value(tab, "Version")).toBe("latest");
  // Required and missing: the API's detail (body.config.apiKey) is shown at the field; nothing installed.
  await clickText(tab, "Install", "form[aria-label='Install @flagsvc/posthog']");
  await tab.waitForFunction(() => {
    const input = document.querySelector("input[name=apiKey]");
    return input?.getAttribute("aria-invalid") === "true" && input.closest(".field")!.querySelector(".error") !== null;
  });
  expect((await pro.admin("GET", `${P}/plugins`)).body.plugins).toEqual([]);
  await axe(tab, "plugins: install form");
  await shots(tab, "plugins-install");

  await fill(tab, "apiKey", "phc_browser_secret");
  await (await control(tab, "personProperties")).click();
  await clickText(tab, "Install", "form[aria-label='Install @flagsvc/posthog']");
  await tab.waitForSelector(".installed [data-plugin='@flagsvc/posthog']");
  const [installed] = (await pro.admin("GET", `${P}/plugins`)).body.plugins;
  expect([installed.packageName, installed.version, installed.config]).toEqual([
    "@flagsvc/posthog",
    "1.1.0",
    { apiKey: "********", baseUrl: "https://us.i.posthog.com", personProperties: true, changesDistinctId: "flagsvc" },
  ]);

  await clickText(tab, "Status and logs of @flagsvc/posthog");
  await tab.waitForSelector(".plugin-status[data-status=active]");
  await waitText(tab, ".plugin-logs", "sending $feature_flag_called and flag change events to https://us.i.posthog.com");
  expect((await pro.admin("GET", `${P}/plugins/${installed.id}/status`)).body.status).toBe("active");
  const card = ".installed [data-plugin='@flagsvc/posthog']";
  await waitText(tab, `${card} .state`, "active");
  await axe(tab, "plugins: installed with status");
  await shots(tab, "plugins");

  // Configure: the form holds the stored config, the secret masked; sent as it is, the API keeps it.
  await clickText(tab, "Configure @flagsvc/posthog");
  await tab.waitForSelector("form[aria-label='Configure @flagsvc/posthog']");
  expect([await typeOf(tab, "apiKey"), await value(tab, "apiKey")]).toEqual(["password", "********"]);
  await fill(tab, "changesDistinctId", "flagsvc-console", true);
  await clickText(tab, "Save configuration");
  await tab.waitForFunction(() => document.querySelector("form[aria-label='Configure @flagsvc/posthog']") === null);
  expect((await pro.admin("GET", `${P}/plugins/${installed.id}`)).body.config).toEqual({ ...installed.config, changesDistinctId: "flagsvc-console" });
  await waitText(tab, `${card} .state`, "active");

  await clickText(tab, "Disable @flagsvc/posthog");
  await waitText(tab, `${card} .state`, "disabled");
  expect((await pro.admin("GET", `${P}/plugins/${installed.id}`)).body.status).toBe("disabled");

  await clickText(tab, "Uninstall @flagsvc/posthog");
  await clickText(tab, "Uninstall", "dialog");
  await tab.waitForFunction(() => document.querySelector(".installed [data-plugin]") === null);
  expect((await pro.admin("GET", `${P}/plugins`)).body.plugins).toEqual([]);
  expect(unexpected(pro.problems)).toEqual([]);
  await tab.close();
}, 90_000);

test("integrations: configure Segment from its type's form (write key a password input), then delete it", async () => {
  const tab = await pro.signedIn(ADMIN);
  await clickText(tab, "Integrations", "nav");
  await pick(tab, "Type", "segment");
  await tab.waitForSelector("form[aria-label='New Segment integration']");
  expect(await typeOf(tab, "writeKey")).toBe("password");
  expect(await value(tab, "region")).toBe("us");
  await fill(tab, "writeKey", "wk_browser_secret");
  await clickText(tab, "Create integration");
  await tab.waitForSelector(".integrations-page [data-integration=segment]");
  const [made] = (await pro.admin("GET", `${P}/integrations`)).body.integrations;
  expect([made.type, made.enabled, made.config.writeKey, made.config.region]).toEqual(["segment", true, "********", "us"]);
  await waitText(tab, ".integration-stats", "Sent 0, failed 0");
  await axe(tab, "integrations");
  await shots(tab, "integrations");

  // Edited with the secret left as "********": the stored write key is kept.
  await clickText(tab, "Edit Segment");
  await pick(tab, "region", "eu");
  await clickText(tab, "Save integration");
  await tab.waitForFunction(() => document.querySelector("form[aria-label='Edit Segment']") === null);
  expect((await pro.admin("GET", `${P}/integrations/${made.id}`)).body.config).toMatchObject({ writeKey: "********", region: "eu" });

  await clickText(tab, "Delete Segment");
  await clickText(tab, "Delete", "dialog");
  await tab.waitForFunction(() => document.querySelector("[data-integration]") === null);
  expect((await pro.admin("GET", `${P}/integrations`)).body.integrations).toEqual([]);
  expect(unexpected(pro.problems)).toEqual([]);
  await tab.close();
}, 90_000);

test("a viewer sees neither page's links nor any control on them", async () => {
  const tab = await pro.signedIn(VIEWER);
  expect(await tab.$$eval("nav a", (els) => els.map((e) => e.textContent))).not.toContain("Plugins");
  for (const page of ["plugins", "integrations"]) {
    await tab.goto(`${pro.url()}/projects/default/${page}`);
    await waitText(tab, "main p", "admins only");
    expect(await tab.$$eval("main button, main form, main input, main select", (els) => els.length)).toBe(0);
    await axe(tab, `${page}: viewer`);
  }
  await shots(tab, "plugins-viewer");
  await tab.close();
}, 60_000);

test("Community Edition: both pages say the marketplace and integrations need Pro", async () => {
  const tab = await ce.signedIn(ADMIN);
  await tab.goto(`${ce.url()}/plugins`);
  await waitText(tab, "main .banner.info", "The marketplace is part of the Pro edition");
  expect(new URL(tab.url()).pathname).toBe("/projects/default/plugins");
  await axe(tab, "plugins: CE");
  await shots(tab, "plugins-ce");
  await clickText(tab, "Integrations", "nav");
  await waitText(tab, "main .banner.info", "part of the Pro edition");
  await axe(tab, "integrations: CE");
  await shots(tab, "integrations-ce");
  // No 403: the pages read the edition from /v1/health rather than asking a Pro endpoint in vain.
  expect(unexpected(ce.problems)).toEqual([]);
  await tab.close();
}, 60_000);
