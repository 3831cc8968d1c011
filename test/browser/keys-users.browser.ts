/**
 * API keys, admin keys and users in headless Chromium against the compiled binary: create an eval
 * key, read its secret from the page (shown once, copied), evaluate with it with curl;
 * rotate with a grace period (old and new secrets both work), delete (both refused); a viewer
 * sees the keys read-only; viewers and editors see no admin page in the navigation; an admin
 * creates an admin key and a user, who then signs in; axe-core with no serious or critical
 * violation; screenshots at 1280 and 390 px. Run by `npm run test:browser`.
 */
import { beforeAll, expect, test } from "bun:test";
import type { Page } from "puppeteer-core";
import { callServer } from "../helpers";
import { ADMIN, EDITOR, VIEWER, axe, clickText, consoleHarness, fill, pick, shots } from "./harness";

const { admin, signedIn, problems, url } = consoleHarness("kyu", { users: [{ ...EDITOR, role: "editor" }] });

beforeAll(async () => {
  expect((await admin("POST", "/v1/projects/default/flags", { key: "hello", name: "Hello" })).status).toBe(201);
});

const evaluate = (key: string) => callServer(url(), "POST", "/v1/evaluate", { key, body: { flagKey: "hello", context: { userId: "u1" } } });
/** An evaluation with `curl`, as the user would make it with the key copied from the page. */
async function curlEvaluate(key: string): Promise<{ status: number; body: { variant?: string; reason?: string } }> {
  const body = JSON.stringify({ flagKey: "hello", context: { userId: "u1" } });
  const curl = Bun.spawn(["curl", "-sSk", "-w", "\n%{http_code}", "-X", "POST", `${url()}/v1/evaluate`, "-H", `Authorization: Bearer ${key}`, "-H", "Content-Type: application/json", "-d", body], { stdout: "pipe" });
  const out = await new Response(curl.stdout).text();
  expect(await curl.exited).toBe(0);
  const cut = out.lastIndexOf("\n");
  return { status: Number(out.slice(cut + 1)), body: JSON.parse(out.slice(0, cut)) };
}
const secretOnPage = (tab: Page) => tab.$eval("[data-secret] input[name=secret]", (e) => (e as HTMLInputElement).value);
const navLabels = (tab: Page) => tab.$$eval("nav[aria-label=Main] a", (as) => as.map((a) => a.textContent));

test("create an eval key, copy its secret from the page, evaluate with it; rotate with a grace period; delete", async () => {
  const tab = await signedIn(ADMIN);
  await tab.browserContext().overridePermissions(url(), ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
  await tab.goto(`${url()}/projects/default/keys`);
  await clickText(tab, "New API key");
  await fill(tab, "Name", "console eval");
  await pick(tab, "Scope", "eval");
  await pick(tab, "Environment", "production");
  await clickText(tab, "Create key");
  await tab.waitForSelector("[data-secret]");
  const secret = await secretOnPage(tab);
  expect(secret).toMatch(/^svc_sk_eval_[0-9A-Za-z]{32}$/);
  await clickText(tab, "Copy the secret key");
  await tab.waitForFunction(() => document.querySelector("[data-secret] [role=status]")?.textContent === "Copied.");
  expect(await tab.evaluate(() => navigator.clipboard.readText())).toBe(secret);

  // The secret read from the page, used with curl.
  const answer = await curlEvaluate(secret);
  expect(answer.status).toBe(200);
  expect(answer.body.reason).toBe("FLAG_DISABLED");
  const [key] = (await admin("GET", "/v1/projects/default/api-keys")).body.apiKeys;
  expect([key.name, key.scope, key.environment]).toEqual(["console eval", "eval", "production"]);
  await tab.waitForSelector(`tr[data-key=${key.id}]`);
  await axe(tab, "API keys, secret shown");
  await shots(tab, "api-keys");

  // Hidden on "Done": never shown again.
  await clickText(tab, "Done, hide the key");
  expect(await tab.$("[data-secret]")).toBeNull();
  await tab.reload();
  await tab.waitForSelector(`tr[data-key=${key.id}]`);
  expect(await tab.$eval("main", (m) => m.textContent)).not.toContain(secret);

  // Rotate, the old secret kept for an hour: both work.
  await clickText(tab, "Rotate key console eval");
  await pick(tab, "Old secret keeps working for", "3600");
  await axe(tab, "API keys, rotate dialog");
  await clickText(tab, "Rotate");
  await tab.waitForSelector("[data-secret]");
  const rotated = await secretOnPage(tab);
  expect(rotated).not.toBe(secret);
  expect(await tab.$eval("#secret-title", (e) => e.textContent)).toContain("The old secret works until");
  expect([(await evaluate(secret)).status, (await evaluate(rotated)).status]).toEqual([200, 200]);

  // Delete, confirmed: both secrets refused.
  await clickText(tab, "Delete key console eval");
  await tab.waitForSelector("dialog[open]");
  await clickText(tab, "Delete");
  await tab.waitForFunction((id) => !document.querySelector(`tr[data-key=${id}]`), {}, key.id);
  expect([(await evaluate(secret)).status, (await evaluate(rotated)).status]).toEqual([401, 401]);
  expect((await admin("GET", "/v1/projects/default/api-keys")).body.apiKeys).toEqual([]);
  await tab.close();
}, 90_000);

test("a viewer reads the keys and changes nothing; viewers and editors see no admin page", async () => {
  expect((await admin("POST", "/v1/projects/default/api-keys", { name: "sdk", scope: "client", environment: "development" })).status).toBe(201);
  const viewer = await signedIn(VIEWER);
  expect(await navLabels(viewer)).not.toContain("Users");
  expect(await navLabels(viewer)).not.toContain("Admin keys");
  await viewer.goto(`${url()}/projects/default/keys`);
  await viewer.waitForSelector("table.keys[data-ready]");
  expect(await viewer.$$eval("main button, main form, main input", (els) => els.map((e) => e.outerHTML))).toEqual([]);
  expect(await viewer.$$eval("table.keys tbody th", (els) => els.map((e) => e.textContent))).toContain("sdk");
  await axe(viewer, "API keys, viewer");
  await shots(viewer, "api-keys-viewer");
  await viewer.goto(`${url()}/admin/users`);
  await viewer.waitForFunction(() => document.querySelector("main p")?.textContent === "Only admins see this page.");
  expect(await viewer.$$eval("main button", (els) => els.length)).toBe(0);
  await viewer.close();

  const editor = await signedIn(EDITOR);
  expect(await navLabels(editor)).not.toContain("Users");
  expect(await navLabels(editor)).not.toContain("Admin keys");
  await editor.goto(`${url()}/projects/default/keys`);
  await editor.waitForSelector("table.keys[data-ready]");
  expect(await editor.$$eval("main button", (els) => els.map((e) => e.textContent))).toContain("New API key");
  await editor.close();
}, 60_000);

test("an admin creates an admin key (shown once, works) and deletes it", async () => {
  const tab = await signedIn(ADMIN);
  expect(await navLabels(tab)).toEqual(expect.arrayContaining(["Admin keys", "Users"]));
  await clickText(tab, "Admin keys");
  await clickText(tab, "New admin key");
  await fill(tab, "Name", "ci");
  await clickText(tab, "Create admin key");
  await tab.waitForSelector("[data-secret]");
  const secret = await secretOnPage(tab);
  expect(secret).toMatch(/^svc_admin_[0-9A-Za-z]{32}$/);
  expect((await callServer(url(), "GET", "/v1/users", { key: secret })).status).toBe(200);
  await axe(tab, "admin keys");
  await shots(tab, "admin-keys");
  await clickText(tab, "Delete admin key ci");
  await tab.waitForSelector("dialog[open]");
  await clickText(tab, "Delete");
  await tab.waitForFunction(() => !Array.from(document.querySelectorAll("table.keys tbody th")).some((t) => t.textContent === "ci"));
  expect((await callServer(url(), "GET", "/v1/users", { key: secret })).status).toBe(401);
  await tab.close();
}, 60_000);

test("an admin creates a user, who signs in; changes the role, resets the password, deletes the user", async () => {
  const tab = await signedIn(ADMIN);
  await clickText(tab, "Users");
  await clickText(tab, "New user");
  await fill(tab, "E-mail", "new@example.com");
  await fill(tab, "Password", "short");
  await clickText(tab, "Create user");
  await tab.waitForSelector("[aria-invalid=true]"); // the API's message at its field
  await fill(tab, "Password", "new user horse battery");
  await pick(tab, "Role", "editor");
  await clickText(tab, "Create user");
  await tab.waitForSelector("[data-user='new@example.com']");
  await axe(tab, "users");
  await shots(tab, "users");

  const user = await signedIn({ email: "new@example.com", password: "new user horse battery" });
  expect(await user.$eval(".who .role", (e) => e.textContent)).toBe("editor");
  await user.close();

  await clickText(tab, "Change role of new@example.com");
  await pick(tab, "Role", "viewer");
  await clickText(tab, "Save role");
  await tab.waitForFunction(() => document.querySelector("main [role=status]")?.textContent === "Role of new@example.com changed.");
  await clickText(tab, "Reset password of new@example.com");
  await fill(tab, "New password", "another horse battery");
  await axe(tab, "users, reset password");
  await clickText(tab, "Set password");
  await tab.waitForFunction(() => document.querySelector("main [role=status]")?.textContent?.startsWith("Password of new@example.com changed"));
  const users = (await admin("GET", "/v1/users")).body.users;
  const created = users.find((u: { email: string }) => u.email === "new@example.com");
  expect(created.role).toBe("viewer");
  expect((await callServer(url(), "POST", "/v1/auth/login", { body: { email: "new@example.com", password: "another horse battery" } })).status).toBe(200);

  await clickText(tab, "Delete user new@example.com");
  await tab.waitForSelector("dialog[open]");
  await clickText(tab, "Delete");
  await tab.waitForFunction(() => !document.querySelector("[data-user='new@example.com']"));
  expect((await admin("GET", "/v1/users")).body.users.map((u: { email: string }) => u.email)).not.toContain("new@example.com");
  await tab.close();
}, 90_000);

test("no console errors on these pages", () => {
  expect(problems.filter((p) => !/\b(400|401)\b/.test(p))).toEqual([]);
});
