/**
 * The segments, webhooks and stale-flags views in headless Chromium against the compiled binary:
 * create a segment with pasted ids (deduplicated and counted), a flag's rule names it through the
 * API, its delete is refused with the flags that use it (and "used by" finds the same by scanning);
 * a 412 when someone saved the segment meanwhile; register a webhook to a local receiver (Bun.serve
 * on 127.0.0.1), change a flag, see the delivery in the page's log, attempt-now and redeliver; the
 * flag list's "Stale only" filter shows a stale flag (made stale by back-dating the flag and the
 * insights' observation start in the stopped binary's database: detection runs at start); a viewer
 * sees no control; axe-core; screenshots at 1280 and 390 px. Run by `npm run test:browser`.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { startReceiver, type Receiver } from "../webhook-receiver";
import { ADMIN, VIEWER, axe, clickText, consoleHarness, control, fill as fillOver, shots } from "./harness";

const P = "/v1/projects/default";
const LONG_AGO = "2020-01-01T00:00:00.000Z";

const { admin, signedIn, problems, url } = consoleHarness("swh", {
  env: { SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" },
  // A flag made stale: created, then (server stopped) back-dated with the insights' observation
  // start, so that the detection run at start finds it never evaluated for 30 days.
  prepare: async ({ admin, offline }) => {
    expect((await admin("POST", `${P}/flags`, { key: "old-flag", name: "Old flag" })).status).toBe(201);
    await offline((dataDir) => {
      const db = new Database(join(dataDir, "flagsvc.db"));
      db.run("UPDATE flags SET created_at = ?1, updated_at = ?1 WHERE key = 'old-flag'", [LONG_AGO]);
      db.run("UPDATE settings SET value = ?1 WHERE key = 'insights_observed_since'", [LONG_AGO]);
      db.close();
    });
  },
});
let receiver: Receiver;

beforeAll(async () => {
  expect((await admin("POST", `${P}/flags`, { key: "checkout", name: "Checkout" })).status).toBe(201);
  receiver = startReceiver({ answer: (_req, n) => new Response(n === 1 ? "busy" : "ok", { status: n === 1 ? 503 : 200 }) });
});

afterAll(() => {
  receiver?.stop?.();
});

/** Fills the control, emptied first. */
const fill = (tab: Page, name: string, text: string) => fillOver(tab, name, text, true);

/** Pastes `text` into the control at once (an input event with the whole text), as a paste does. */
async function paste(tab: Page, name: string, text: string) {
  await (await control(tab, name)).evaluate((e, t) => {
    e.value = t;
    e.dispatchEvent(new Event("input", { bubbles: true }));
  }, text);
}

const textOf = (tab: Page, selector: string) => tab.$eval(selector, (e) => e.textContent!.trim());
const waitText = (tab: Page, selector: string, part: string) =>
  tab.waitForFunction((s, p) => Array.from(document.querySelectorAll(s)).some((e) => e.textContent!.includes(p)), {}, selector, part);

test("a segment with pasted ids and a condition; used by a flag: its delete is refused with the flag; a concurrent save is refused", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}/projects/default/segments`);
  await tab.waitForSelector("form[aria-label='New segment']");
  await fill(tab, "Key", "beta-testers");
  await fill(tab, "Name", "Beta testers");
  await clickText(tab, "Create segment");
  await tab.waitForSelector(".segment-page[data-ready]");

  // Pasted at once: lines and commas, with duplicates; the count says what will be saved.
  const ids = Array.from({ length: 1200 }, (_, i) => `user-${i}`);
  await paste(tab, "Included user ids", `${ids.slice(0, 600).join("\n")}\n${ids.slice(600).join(", ")}\nuser-1\nuser-2`);
  await waitText(tab, ".ids-count", "1,200 ids (2 duplicates dropped)");
  await paste(tab, "Excluded user ids", "bad-1, bad-2");
  await fill(tab, "Description", "People who asked for early access");
  await clickText(tab, "Add condition");
  await fill(tab, "Condition 1 attribute", "plan");
  await (await control(tab, "Condition 1 operator")).select("equals");
  await fill(tab, "Condition 1 value", "beta");
  await clickText(tab, "Save segment");
  await waitText(tab, "form[aria-label=Segment] [role=status]", "Saved.");
  const seg = (await admin("GET", `${P}/segments/beta-testers`)).body;
  expect([seg.included.length, seg.included[0], seg.included[1199], seg.excluded, seg.description, seg.conditions]).toEqual([
    1200,
    "user-0",
    "user-1199",
    ["bad-1", "bad-2"],
    "People who asked for early access",
    [{ attribute: "plan", operator: "equals", value: "beta" }],
  ]);
  await axe(tab, "segment page");
  await shots(tab, "segment");

  // A flag's rule names it (through the API): "used by" finds it by scanning; the delete is refused, naming the flag.
  const rule = { name: "betas", enabled: true, variant: null, conditions: [{ attribute: "userId", operator: "in_segment", value: "beta-testers" }] };
  expect((await admin("PATCH", `${P}/flags/checkout`, { rules: [rule] })).status).toBe(200);
  await clickText(tab, "Find the flags that use it");
  await waitText(tab, "ul.used-by", "checkout");
  await clickText(tab, "Delete segment");
  await clickText(tab, "Delete", "dialog");
  await waitText(tab, ".banner.error", "is used by flag checkout");
  expect(await textOf(tab, "ul.used-by")).toContain("names segment beta-testers in rule");
  expect((await admin("GET", `${P}/segments/beta-testers`)).status).toBe(200);

  // Someone else saves meanwhile: this save is refused (412), nothing overwritten.
  expect((await admin("PATCH", `${P}/segments/beta-testers`, { name: "Beta (renamed)" })).status).toBe(200);
  await fill(tab, "Name", "Mine");
  await clickText(tab, "Save segment");
  await waitText(tab, ".banner.error", "since you loaded it");
  expect((await admin("GET", `${P}/segments/beta-testers`)).body.name).toBe("Beta (renamed)");
  await clickText(tab, "Reload the segment");
  await tab.waitForFunction(() => document.querySelector("h1")?.textContent === "Beta (renamed)");

  await tab.goto(`${url()}/projects/default/segments`);
  await tab.waitForSelector(".segment-list [data-segment=beta-testers]");
  await axe(tab, "segments list");
  await shots(tab, "segments");
  await tab.close();
}, 90_000);

test("a webhook registered to a local receiver: a flag change shows in its delivery log; attempt-now and redeliver", async () => {
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}/projects/default/webhooks`);
  await tab.waitForSelector("form[aria-label='Register a webhook']");
  await fill(tab, "URL", receiver.url);
  const secret = await (await control(tab, "Signing secret")).evaluate((e) => e.value);
  expect(secret).toMatch(/^[0-9a-f]{64}$/);
  await (await control(tab, "flag.stale")).click();
  await (await control(tab, "production")).click();
  await clickText(tab, "Register webhook");
  await waitText(tab, ".banner.info", secret); // shown once, to copy
  const hooks = (await admin("GET", `${P}/webhooks`)).body.webhooks;
  expect(hooks.map((h: any) => [h.url, h.events.includes("flag.stale"), h.environments, h.enabled])).toEqual([[receiver.url, true, ["production"], true]]);

  // A change of the flag: the first attempt gets a 503 (pending, retried later); attempt-now delivers it.
  expect((await admin("PUT", `${P}/flags/checkout/states/production`, { enabled: true })).status).toBe(200);
  await clickText(tab, "Delivery log of " + receiver.url);
  await tab.waitForSelector("tr[data-status=pending]");
  await tab.waitForFunction(() => document.querySelector("tr[data-status=pending] td:nth-child(3)")?.textContent === "1");
  expect(await textOf(tab, "tr[data-status=pending] td:nth-child(4)")).toBe("503");
  await axe(tab, "webhooks page with its log");
  await shots(tab, "webhooks");
  await tab.click("tr[data-status=pending] button");
  await tab.waitForSelector("tr[data-status=succeeded]");
  expect(await textOf(tab, "tr[data-status=succeeded] td:nth-child(4)")).toBe("200");
  expect(receiver.received.map((r) => r.json.event)).toEqual(["flag.enabled", "flag.enabled"]);

  await tab.click("tr[data-status=succeeded] button");
  await waitText(tab, "tbody td", "redelivery");
  await tab.waitForFunction(() => document.querySelectorAll("tr[data-status=succeeded]").length === 2);
  expect(receiver.received.length).toBe(3);

  // Disable, then delete (asked first).
  await clickText(tab, `Disable ${receiver.url}`);
  await waitText(tab, ".card .state", "Disabled");
  expect((await admin("GET", `${P}/webhooks`)).body.webhooks[0].enabled).toBe(false);
  await clickText(tab, `Delete ${receiver.url}`);
  await clickText(tab, "Delete", "dialog");
  await waitText(tab, "main", "No webhooks yet.");
  expect((await admin("GET", `${P}/webhooks`)).body.webhooks).toEqual([]);
  await tab.close();
}, 90_000);

test("the flag list's Stale only filter shows the stale flag only", async () => {
  expect((await admin("GET", `${P}/flags/old-flag`)).body.stale).toEqual({ reason: "not_evaluated", since: expect.any(String) });
  const tab = await signedIn(ADMIN);
  await tab.goto(`${url()}/projects/default/flags`);
  await tab.waitForSelector("table.flags tr[data-flag=checkout]");
  await (await control(tab, "Stale only")).click();
  await tab.waitForFunction(() => !document.querySelector("tr[data-flag=checkout]") && document.querySelector("tr[data-flag=old-flag]"));
  expect(await tab.$$eval("table.flags tbody tr", (rows) => rows.map((r) => r.getAttribute("data-flag")))).toEqual(["old-flag"]);
  expect(await textOf(tab, "tr[data-flag=old-flag] .badge.stale")).toBe("Stale: not evaluated");
  await axe(tab, "stale flags");
  await shots(tab, "flags-stale");
  await tab.close();
}, 60_000);

test("a viewer sees segments read-only, and no webhooks", async () => {
  const tab = await signedIn(VIEWER);
  await tab.goto(`${url()}/projects/default/segments/beta-testers`);
  await tab.waitForSelector(".segment-page[data-ready]");
  const controls = await tab.$$eval("main button, main form[aria-label='New segment']", (els) => els.map((e) => e.textContent!.trim()));
  expect(controls).toEqual(["Find the flags that use it"]); // reading, not changing
  expect(await (await control(tab, "Included user ids")).evaluate((e) => e.readOnly)).toBe(true);
  await axe(tab, "segment page, viewer");
  await tab.goto(`${url()}/projects/default/segments`);
  await tab.waitForSelector(".segment-list");
  expect(await tab.$("form[aria-label='New segment']")).toBeNull();
  await tab.goto(`${url()}/projects/default/webhooks`);
  await waitText(tab, "main", "editors and admins");
  expect(await tab.$$("main button, main form")).toEqual([]);
  await tab.close();
}, 60_000);

test("no console errors on these pages", () => {
  expect(problems.filter((p) => !/\b(401|409|412)\b/.test(p))).toEqual([]);
});
