/**
 * The test sessions page and the flag list's sparklines in headless Chromium against the compiled
 * binary: an editor creates a session, sets an override on a multi-variant flag (its variants
 * offered), an evaluation through an eval key made via the API with the session's token
 * (`X-Service-Session`) gets it (TEST_OVERRIDE), the override is removed (the evaluation is back
 * to normal), the session destroyed after a confirmation (checked through the API); a viewer sees
 * the sessions but no control; the flag list shows a sparkline with the evaluations of a flag
 * (counts flushed every second here, SVC_INSIGHTS_FLUSH_SECONDS=1, as the insights e2e test does);
 * axe-core; screenshots at 1280 and 390 px. Run by `npm run test:browser`.
 */
import { beforeAll, expect, test } from "bun:test";
import type { Page } from "puppeteer-core";
import { callServer } from "../helpers";
import { EDITOR, VIEWER, axe, clickText, consoleHarness, fill, pick, shots } from "./harness";

const P = "/v1/projects/default";
const { admin, signedIn, problems, url } = consoleHarness("tss", {
  env: { SVC_INSIGHTS_FLUSH_SECONDS: "1" },
  users: [{ ...EDITOR, role: "editor" }],
});
let evalKey: string;

beforeAll(async () => {
  expect((await admin("POST", `${P}/flags`, { key: "theme", name: "Theme", variants: [{ key: "blue" }, { key: "green" }] })).status).toBe(201);
  expect((await admin("PUT", `${P}/flags/theme/states/production`, { enabled: true })).status).toBe(200);
  expect((await admin("POST", `${P}/flags`, { key: "quiet", name: "Quiet" })).status).toBe(201);
  const made = await admin("POST", `${P}/api-keys`, { name: "browser eval", scope: "eval", environment: "production" });
  expect(made.status).toBe(201);
  evalKey = made.body.key;
});

const evaluate = async (session?: string) =>
  (await callServer(url(), "POST", "/v1/evaluate", { key: evalKey, body: { flagKey: "theme", context: { targetingKey: "u1" } }, headers: session ? { "x-service-session": session } : {} })).body;
const sessions = async () => (await callServer(url(), "GET", `/v1/testing/sessions?projectId=default`, { key: (await admin("POST", `${P}/api-keys`, { name: `t${Date.now()}`, scope: "test", environment: "production" })).body.key })).body.sessions;
const waitText = (tab: Page, selector: string, part: string) =>
  tab.waitForFunction((s, p) => Array.from(document.querySelectorAll(s)).some((e) => e.textContent!.includes(p)), {}, selector, part);

test("an editor creates a session, overrides a flag, sees the evaluation change, removes the override and destroys the session", async () => {
  const tab = await signedIn(EDITOR);
  await tab.goto(`${url()}/projects/default/test-sessions`);
  await clickText(tab, "Test sessions", "nav");
  await tab.waitForSelector("form[aria-label='Create a test session']");
  await fill(tab, "Label (optional)", "checkout suite");
  await clickText(tab, "Create session");
  await tab.waitForSelector("tr[data-session]");
  const [made] = await sessions();
  expect(made).toMatchObject({ label: "checkout suite", overrides: {} });
  // The opened session: its token, and a value input fit for the flag (its variants).
  await tab.waitForSelector("#session-detail [data-token]");
  expect(await tab.$eval("#session-detail [data-token]", (e) => e.textContent)).toBe(made.token);
  await pick(tab, "Flag", "theme");
  await tab.waitForFunction(() => Array.from(document.querySelectorAll("#session-detail select option")).some((o) => o.textContent === "green"));
  await pick(tab, "Value", "green");
  await axe(tab, "test sessions (editor, opened)");
  await clickText(tab, "Set override");
  await tab.waitForSelector("tr[data-override=theme]");
  expect((await sessions())[0].overrides).toEqual({ theme: "green" });
  expect(await evaluate(made.token)).toMatchObject({ variant: "green", reason: "TEST_OVERRIDE" });
  expect((await evaluate()).reason).not.toBe("TEST_OVERRIDE");
  await shots(tab, "test-sessions");

  await clickText(tab, "Remove the override of theme", "#session-detail");
  await tab.waitForFunction(() => !document.querySelector("tr[data-override=theme]"));
  expect((await sessions())[0].overrides).toEqual({});
  expect((await evaluate(made.token)).reason).not.toBe("TEST_OVERRIDE");

  await clickText(tab, "Destroy checkout suite");
  await tab.waitForSelector("dialog[open]");
  await axe(tab, "test sessions (confirm destroy)");
  await clickText(tab, "Destroy session", "dialog");
  await waitText(tab, "main", "No live test session.");
  expect(await sessions()).toEqual([]);
  expect(problems.filter((p) => !/\b401\b/.test(p))).toEqual([]); // 401: the sign-in page asks for a session first
});

test("a viewer sees the sessions and their overrides but no control that changes anything", async () => {
  const key = (await admin("POST", `${P}/api-keys`, { name: "suite", scope: "test", environment: "production" })).body.key;
  const s = (await callServer(url(), "POST", "/v1/testing/sessions", { key, body: { projectId: "default", label: "nightly" } })).body;
  expect((await callServer(url(), "PUT", `/v1/testing/sessions/${s.id}/overrides/quiet`, { key, body: { value: true } })).status).toBe(200);
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}/projects/default/test-sessions`);
  await tab.waitForSelector("tr[data-session]");
  await clickText(tab, "Open nightly");
  await tab.waitForSelector("tr[data-override=quiet]");
  const writes = await tab.$$eval("main form, main button.danger, main button.primary", (els) => els.length);
  expect(writes).toBe(0);
  expect(await tab.$$eval("#session-detail button", (els) => els.length)).toBe(0);
  await axe(tab, "test sessions (viewer)");
  await shots(tab, "test-sessions-viewer");
  expect(problems.filter((p) => !/\b401\b/.test(p))).toEqual([]); // 401: the sign-in page asks for a session first
});

test("the flag list shows each flag's evaluations of the last 7 days as a sparkline", async () => {
  const totals = async () => (await admin("GET", `${P}/insights?flags=theme,quiet&days=7`)).body.flags.map((f: { flagKey: string; total: number }) => [f.flagKey, f.total]);
  const [[, before]] = await totals(); // the evaluations of the tests above
  for (let i = 0; i < 12; i++) await evaluate();
  await Bun.sleep(1_500); // more than a flush interval: the counts are stored
  expect(await totals()).toEqual([
    ["theme", before + 12],
    ["quiet", 0],
  ]);
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}/projects/default/flags`);
  await tab.waitForSelector("tr[data-flag=theme] svg[role=img]");
  expect(await tab.$eval("tr[data-flag=theme] svg[role=img]", (e) => e.getAttribute("aria-label"))).toBe(`${before + 12} evaluations in the last 7 days`);
  expect(await tab.$eval("tr[data-flag=quiet] svg[role=img]", (e) => e.getAttribute("aria-label"))).toBe("0 evaluations in the last 7 days");
  await axe(tab, "flag list with sparklines");
  await shots(tab, "flags-sparklines");
  expect(problems.filter((p) => !/\b401\b/.test(p))).toEqual([]); // 401: the sign-in page asks for a session first
});
