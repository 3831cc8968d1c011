/**
 * `flagsvc admin reset-password` (issue 20, point 6): the command function (`main`) run in this
 * process against the data dir of a running app, as the CLI runs beside the server: it writes
 * through its own connection, and the app notices through `pollExternalChanges` (the
 * `credentials-reload` job, every second) or at the next login. The app's clock is set to the
 * real time, which the command uses.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, testApp, type TestApp, runCliBeside, rawRows, externalChanges } from "../helpers";

const OLD = "the old password";

let h: TestApp;
let admin: Record<string, string>;
let noticed: () => Promise<boolean>;

beforeEach(async () => {
  h = await testApp();
  h.clock.ms = Date.now();
  admin = bearer(await seedAdminKey(h.ctx));
  await json(await h.request("POST", "/v1/users", { headers: admin, body: { email: "ops@example.com", password: OLD, role: "editor" } }), 201);
  noticed = externalChanges(h.ctx);
});
afterEach(() => h.close());

const flagsvc = (...args: string[]) => runCliBeside(h, ...args);
const login = (email: string, password: string) => h.request("POST", "/v1/auth/login", { body: { email, password } });
const tokenOf = async (password: string) => bearer((await json(await login("ops@example.com", password), 200)).token);
const me = async (headers: Record<string, string>) => (await h.request("GET", "/v1/auth/me", { headers })).status;
/** The users table as stored: what a refused command must leave alone. */
const rows = async () => (await rawRows(h.ctx, "SELECT * FROM users ORDER BY id"));

describe("admin reset-password beside a running app", () => {
  test("without --password: a generated password on stdout alone (the note on stderr); the old tokens are refused once the app polls; the new password logs in, the old one does not", async () => {
    const old = await tokenOf(OLD);
    expect(await me(old)).toBe(200);
    const r = await flagsvc("admin", "reset-password", "--email", "Ops@Example.com");
    expect(r.code).toBe(0);
    const password = r.stdout.trim();
    expect(r.stdout).toBe(`${password}\n`);
    expect(password).toMatch(/^[A-Za-z0-9]{20}$/);
    expect(r.stderr).toMatch(/^password of user usr_\S+ ops@example\.com reset; .*shown only this once\n$/);
    expect(r.stderr).not.toContain(password);

    expect(await noticed()).toBe(true); // what the credentials-reload job runs (or PostgreSQL's change feed)
    expect(await me(old)).toBe(401);
    expect((await login("ops@example.com", OLD)).status).toBe(401);
    const fresh = await tokenOf(password);
    expect(await me(fresh)).toBe(200);
  });

  test("with --password: that password; a login right after it (before the job's poll, in the same second) gets a token that works", async () => {
    const old = await tokenOf(OLD);
    const r = await flagsvc("admin", "reset-password", "--email", "ops@example.com", "--password", "the new password");
    expect(r).toEqual({ code: 0, stdout: expect.stringMatching(/^password of user usr_\S+ ops@example\.com reset; /), stderr: "" });
    expect(r.stdout).not.toContain("the new password");
    // The login reads the change itself: its token is dated after the cut-off, the old one is refused.
    const fresh = await tokenOf("the new password");
    expect(await me(fresh)).toBe(200);
    expect(await me(old)).toBe(401);
    expect((await login("ops@example.com", OLD)).status).toBe(401);
  });

  test("refusals change nothing: unknown email exit 1; short password, missing --email, a stray argument exit 2; one line each", async () => {
    const old = await tokenOf(OLD);
    const before = await rows();
    const cases: [string[], number, string][] = [
      [["--email", "nobody@example.com"], 1, "flagsvc: User with email nobody@example.com not found\n"],
      [["--email", "ops@example.com", "--password", "short"], 2, "flagsvc: --password: Expected a password of 10 to 1024 characters\n"],
      [["--email", "not-an-email", "--password", "long enough pw"], 2, "flagsvc: --email: Expected an email address\n"],
      [["--password", "long enough pw"], 2, "flagsvc: admin reset-password needs --email\n"],
      [["extra", "--email", "ops@example.com"], 2, 'flagsvc: unexpected argument "extra"\n'],
    ];
    for (const [args, code, stderr] of cases) {
      expect({ args, ...(await flagsvc("admin", "reset-password", ...args)) }).toEqual({ args, code, stdout: "", stderr });
    }
    expect((await rows())).toEqual(before);
    expect(await h.ctx.credentials.pollExternalChanges()).toBe(false);
    expect(await me(old)).toBe(200);
  });

  test("help lists it: flagsvc help admin, flagsvc admin reset-password --help", async () => {
    const group = await flagsvc("help", "admin");
    expect(group.code).toBe(0);
    expect(group.stdout).toMatch(/^ {2}reset-password {2}Set a login user's password/m);
    const own = await flagsvc("admin", "reset-password", "--help");
    expect(own.code).toBe(0);
    expect(own.stdout).toStartWith("Usage: flagsvc admin reset-password --email EMAIL [--password PASSWORD] [--data-dir DIR]\n");
    expect(own.stdout).toContain("--password VALUE");
    expect((await flagsvc("help")).stdout).toContain("create-user, create-key, reset-password");
  });
});
