/**
 * Identity through the compiled binary: the first start's admin credentials, login over HTTPS,
 * `flagsvc admin create-key` / `create-user` beside a running server, restarts, CLI errors.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { BANNER_END } from "../../scripts/lib/proc";
import { binaryPath, cleanup, runBinary, startBinary, tempDir, type RunningBinary } from "./binary";

const T = 60_000;
const TLS = { rejectUnauthorized: false };
const LOGIN_LINE = /^\s*Admin login: +(\S+) \/ (\S+)\s*$/m;
const KEY_LINE = /^\s*Admin key: +(svc_admin_[A-Za-z0-9]{32,})\s*$/m;

beforeAll(async () => {
  await binaryPath();
}, 120_000);

afterAll(() => {
  cleanup();
});

async function api(srv: RunningBinary, method: string, path: string, opts: { token?: string; body?: unknown } = {}) {
  return fetch(`${srv.url}${path}`, {
    method,
    headers: {
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      ...(opts.body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    tls: TLS,
  });
}

async function login(srv: RunningBinary, email: string, password: string): Promise<Response> {
  return api(srv, "POST", "/v1/auth/login", { body: { email, password } });
}

/** Polls until `check` is true (the server picks up external writes within a second). */
async function eventually(check: () => Promise<boolean>, timeoutMs = 3_000): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check()) return performance.now() - start;
    if (performance.now() - start > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await Bun.sleep(100);
  }
}

let cwd: string;
let email: string;
let password: string;
let adminKey: string;
let cliKey: string;
let evalKey: string;

test("first start prints the admin login and key once; both work over HTTPS", async () => {
  cwd = tempDir();
  const srv = await startBinary({ cwd });
  try {
    await srv.waitFor(BANNER_END);
    const out = srv.stdout();
    const loginLine = out.match(LOGIN_LINE);
    const keyLine = out.match(KEY_LINE);
    expect(loginLine).not.toBeNull();
    expect(keyLine).not.toBeNull();
    [, email, password] = loginLine! as unknown as [string, string, string];
    adminKey = keyLine![1]!;
    expect(email).toBe("admin@localhost");
    expect(password).toMatch(/^[A-Za-z0-9]{20}$/);
    // The secrets are printed in the banner only, never in a log line.
    expect(srv.stderr()).not.toContain(password);
    for (const line of srv.output().split("\n").filter((l) => l.startsWith("{"))) {
      expect(line).not.toContain(password);
      expect(line).not.toContain(adminKey);
    }

    const res = await login(srv, email, password);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { token: string; user: { email: string; role: string } };
    expect(body.user).toMatchObject({ email, role: "admin" });
    expect((await api(srv, "GET", "/v1/auth/me", { token: body.token })).status).toBe(200);

    const users = await api(srv, "GET", "/v1/users", { token: adminKey });
    expect(users.status).toBe(200);
    expect(((await users.json()) as { users: { email: string }[] }).users.map((u) => u.email)).toEqual([email]);

    // An eval key made with the admin key is refused on management endpoints (403, the spec's message).
    const created = await api(srv, "POST", "/v1/projects/default/api-keys", { token: adminKey, body: { name: "sdk", scope: "eval", environment: "production" } });
    expect(created.status).toBe(201);
    evalKey = ((await created.json()) as { key: string }).key;
    expect(evalKey).toMatch(/^svc_sk_eval_[A-Za-z0-9]{32}$/);
    for (const [method, path] of [["GET", "/v1/projects/default/flags"], ["POST", "/v1/projects/default/flags"], ["GET", "/v1/projects/default"], ["GET", "/v1/projects/default/api-keys"], ["POST", "/v1/projects/default/environments"]] as const) {
      const refused = await api(srv, method, path, { token: evalKey, body: method === "POST" ? { slug: "qa", name: "QA" } : undefined });
      expect(refused.status).toBe(403);
      expect(await refused.json()).toEqual({
        error: "FORBIDDEN",
        message: "This key scope does not have access to this endpoint",
        details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope mgmt or full" }],
      });
    }
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);

test("flagsvc admin create-key and create-user work while the server runs", async () => {
  const srv = await startBinary({ cwd });
  try {
    await srv.waitFor(BANNER_END);
    const dataDir = join(cwd, "data");

    const key = await runBinary(["admin", "create-key", "--name", "ci", "--data-dir", dataDir]);
    expect(key.exitCode).toBe(0);
    cliKey = key.stdout.trim();
    expect(cliKey).toMatch(/^svc_admin_[A-Za-z0-9]{32,}$/);
    expect(key.stderr).toContain("shown only this once");
    const waited = await eventually(async () => (await api(srv, "GET", "/v1/users", { token: cliKey })).status === 200);
    expect(waited).toBeLessThan(2_500);
    const keys = (await (await api(srv, "GET", "/v1/admin-keys", { token: cliKey })).json()) as { adminKeys: { name: string }[] };
    expect(keys.adminKeys.map((k) => k.name)).toEqual(["bootstrap", "ci"]);

    const user = await runBinary(["admin", "create-user", "--email", "Ops@Example.com", "--password", "ops password 1", "--role", "editor", "--data-dir", dataDir]);
    expect(user.exitCode).toBe(0);
    expect(user.stdout).toContain("ops@example.com");
    expect(user.stdout).not.toContain("ops password 1");
    const res = await login(srv, "ops@example.com", "ops password 1");
    expect(res.status).toBe(200);
    const { token } = (await res.json()) as { token: string };
    const me = await api(srv, "GET", "/v1/auth/me", { token });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ email: "ops@example.com", role: "editor" });

    // A duplicate email: one line, exit 1, nothing changed.
    const dup = await runBinary(["admin", "create-user", "--email", "ops@example.com", "--password", "another password", "--role", "admin", "--data-dir", dataDir]);
    expect(dup.exitCode).toBe(1);
    expect(dup.stderr.trim().split("\n")).toHaveLength(1);
    expect(dup.stderr).toContain("already exists");
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);

test("a restart prints no secret and keeps users and keys", async () => {
  const srv = await startBinary({ cwd });
  try {
    await srv.waitFor(BANNER_END);
    const out = srv.output();
    expect(out).not.toMatch(/Admin login:/);
    expect(out).not.toMatch(/Admin key:/);
    expect(out).not.toContain(password);
    expect(out).not.toContain(adminKey);

    expect((await login(srv, email, password)).status).toBe(200);
    expect((await login(srv, "ops@example.com", "ops password 1")).status).toBe(200);
    expect((await api(srv, "GET", "/v1/users", { token: adminKey })).status).toBe(200);
    expect((await api(srv, "GET", "/v1/users", { token: cliKey })).status).toBe(200);
    // The project key survived too: still known (403 by scope, not 401).
    expect((await api(srv, "GET", "/v1/projects/default", { token: evalKey })).status).toBe(403);
    expect((await api(srv, "GET", "/v1/projects/default", { token: `${evalKey.slice(0, -1)}x` })).status).toBe(401);
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);

test("configured SVC_ADMIN_EMAIL, SVC_ADMIN_PASSWORD and SVC_ADMIN_KEY are used and not printed", async () => {
  const key = `svc_admin_${"Zx9".repeat(11)}`;
  const srv = await startBinary({ env: { SVC_ADMIN_EMAIL: "root@example.com", SVC_ADMIN_PASSWORD: "configured secret", SVC_ADMIN_KEY: key } });
  try {
    await srv.waitFor(BANNER_END);
    const out = srv.output();
    expect(out).toContain("root@example.com / (password from SVC_ADMIN_PASSWORD / --admin-password)");
    expect(out).toContain("(from SVC_ADMIN_KEY / --admin-key)");
    expect(out).not.toContain("configured secret");
    expect(out).not.toContain(key);
    expect((await login(srv, "root@example.com", "configured secret")).status).toBe(200);
    expect((await api(srv, "GET", "/v1/admin-keys", { token: key })).status).toBe(200);
  } finally {
    expect(await srv.stop()).toBe(0);
  }
}, T);

test("admin CLI: help, bad or missing values (exit 2, one line), no database (exit 1)", async () => {
  const help = await runBinary(["admin", "--help"]);
  expect(help.exitCode).toBe(0);
  expect(help.stdout).toContain("create-user");
  expect(help.stdout).toContain("create-key");
  const subHelp = await runBinary(["admin", "create-user", "--help"]);
  expect(subHelp.exitCode).toBe(0);
  expect(subHelp.stdout).toContain("--email");
  expect(subHelp.stdout).toContain("--role");

  const empty = tempDir();
  const cases: string[][] = [
    ["admin"],
    ["admin", "frobnicate"],
    ["admin", "create-user", "--email", "a@example.com", "--data-dir", empty],
    ["admin", "create-user", "--email", "a@example.com", "--password", "short", "--role", "admin", "--data-dir", empty],
    ["admin", "create-user", "--email", "a@example.com", "--password", "long enough pw", "--role", "owner", "--data-dir", empty],
    ["admin", "create-key", "--name", "", "--data-dir", empty],
    ["admin", "create-key", "--email", "a@example.com", "--data-dir", empty],
    ["serve", "--name", "x"],
  ];
  for (const args of cases) {
    const r = await runBinary(args);
    expect({ args, code: r.exitCode }).toEqual({ args, code: 2 });
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toStartWith("flagsvc: ");
  }

  const noDb = await runBinary(["admin", "create-key", "--data-dir", empty]);
  expect(noDb.exitCode).toBe(1);
  expect(noDb.stderr).toContain("run flagsvc migrate first");
}, T);

test("admin CLI refuses a database that needs migrating or is from a newer version", async () => {
  const dir = tempDir();
  const dataDir = join(dir, "data");
  expect((await runBinary(["migrate", "--data-dir", dataDir])).exitCode).toBe(0);
  const { Database } = await import("bun:sqlite");
  const db = new Database(join(dataDir, "flagsvc.db"));
  db.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('from-the-future', 0)");
  db.close();
  const newer = await runBinary(["admin", "create-key", "--data-dir", dataDir]);
  expect(newer.exitCode).toBe(1);
  expect(newer.stderr).toContain("newer flagsvc");

  const db2 = new Database(join(dataDir, "flagsvc.db"));
  db2.run("DELETE FROM __drizzle_migrations");
  db2.close();
  const pending = await runBinary(["admin", "create-user", "--email", "a@example.com", "--password", "long enough pw", "--role", "admin", "--data-dir", dataDir]);
  expect(pending.exitCode).toBe(1);
  expect(pending.stderr).toContain("run flagsvc migrate first");
}, T);
