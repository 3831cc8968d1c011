/** /v1/users: CRUD, validation, access, last-admin protection, effects on live tokens; bootstrap of the first admin. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { rmSync } from "node:fs";
import { bootstrap } from "../../src/bootstrap";
import { loadConfig } from "../../src/config";
import { settings, users } from "../../src/db/schema";
import { tokensValidFrom } from "../../src/http/credentials";
import { createLogger } from "../../src/lib/log";
import { createContext } from "../../src/server";
import { bearer, seedAdminKey, seedApiKey, TestClock, tempDir, testApp, type TestApp, sqliteOf, sqliteOnly } from "../helpers";

const PASSWORD = "correct horse battery";

let h: TestApp;
let admin: string;
beforeAll(async () => {
  h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
  admin = await seedAdminKey(h.ctx);
});
afterAll(() => h.close());

type Json = Record<string, any>;

async function create(app: TestApp, key: string, body: unknown) {
  return app.request("POST", "/v1/users", { headers: bearer(key), body });
}

async function createOk(app: TestApp, key: string, email: string, role = "viewer", password = "a long password"): Promise<Json> {
  const res = await create(app, key, { email, password, role });
  expect(res.status).toBe(201);
  return (await res.json()) as Json;
}

async function loginToken(app: TestApp, email: string, password: string): Promise<string> {
  const res = await app.request("POST", "/v1/auth/login", { body: { email, password } });
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).token;
}

async function list(app: TestApp, key: string): Promise<Json[]> {
  const res = await app.request("GET", "/v1/users", { headers: bearer(key) });
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).users;
}

describe("create and list", () => {
  test("POST 201 returns { id, email, role }; the email is stored trimmed and lower-case; GET lists by email", async () => {
    const user = await createOk(h, admin, "  Zoe@Example.com ", "editor");
    expect(user).toEqual({ id: expect.stringMatching(/^usr_[A-Za-z0-9]{22}$/), email: "zoe@example.com", role: "editor" });
    await createOk(h, admin, "bob@example.com", "viewer");
    const users = await list(h, admin);
    expect(users.map((u) => u.email)).toEqual(["admin@localhost", "bob@example.com", "zoe@example.com"]);
    for (const u of users) expect(Object.keys(u).sort()).toEqual(["email", "id", "role"]);
  });

  test("a new user can log in (email in any case) and gets its role", async () => {
    await createOk(h, admin, "carol@example.com", "editor", "carol's password");
    const t = await loginToken(h, "CAROL@example.com", "carol's password");
    const me = await h.request("GET", "/v1/auth/me", { headers: bearer(t) });
    expect(await me.json()).toMatchObject({ email: "carol@example.com", role: "editor" });
  });

  test("a duplicate email (in any case) is 409 CONFLICT", async () => {
    await createOk(h, admin, "dup@example.com");
    const res = await create(h, admin, { email: "DUP@example.com", password: "a long password", role: "admin" });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ error: "CONFLICT", message: "A user with email dup@example.com already exists" });
  });

  test("validation: short password, bad role, bad email, missing or unknown fields are 400 with details", async () => {
    const cases: [unknown, string][] = [
      [{ email: "v@example.com", password: "123456789", role: "viewer" }, "body.password"],
      [{ email: "v@example.com", password: "a long password", role: "owner" }, "body.role"],
      [{ email: "not-an-email", password: "a long password", role: "viewer" }, "body.email"],
      [{ email: "v w@example.com", password: "a long password", role: "viewer" }, "body.email"],
      [{ email: "v@example.com", password: "a long password" }, "body.role"],
      [{ email: "v@example.com", password: "a long password", role: "viewer", name: "V" }, "body.name"],
      [{ email: "v@example.com", password: 1234567890, role: "viewer" }, "body.password"],
    ];
    for (const [body, path] of cases) {
      const res = await create(h, admin, body);
      expect(res.status).toBe(400);
      const json = (await res.json()) as Json;
      expect(json.error).toBe("VALIDATION_ERROR");
      expect(json.details.map((d: Json) => d.path)).toContain(path);
    }
    expect((await list(h, admin)).some((u) => u.email === "v@example.com")).toBe(false);
  });

  test("exactly 10 characters is enough", async () => {
    await createOk(h, admin, "ten@example.com", "viewer", "1234567890");
  });

  sqliteOnly("passwords and their hashes are never returned or logged", async () => {
    await createOk(h, admin, "secret@example.com", "viewer", "my very secret password");
    const res = await h.request("GET", "/v1/users", { headers: bearer(admin) });
    const text = await res.text();
    expect(text).not.toContain("password");
    expect(text).not.toContain("argon2");
    const logs = JSON.stringify(h.logs());
    expect(logs).not.toContain("my very secret password");
    expect(logs).not.toContain("argon2");
    const row = h.db.select().from(users).where(eq(users.email, "secret@example.com")).get()!;
    expect(row.passwordHash).toStartWith("$argon2id$");
  });
});

describe("access", () => {
  test("no credential 401; editor and viewer JWTs 403; project keys 403; admin JWT and admin key 200", async () => {
    expect((await h.request("GET", "/v1/users")).status).toBe(401);
    await createOk(h, admin, "ed@example.com", "editor", "editor password");
    await createOk(h, admin, "vi@example.com", "viewer", "viewer password");
    const editor = await loginToken(h, "ed@example.com", "editor password");
    const viewer = await loginToken(h, "vi@example.com", "viewer password");
    for (const t of [editor, viewer]) {
      const res = await h.request("GET", "/v1/users", { headers: bearer(t) });
      expect(res.status).toBe(403);
      expect(((await res.json()) as Json).error).toBe("FORBIDDEN");
      expect((await create(h, t, { email: "x@example.com", password: "a long password", role: "admin" })).status).toBe(403);
    }
    const full = await seedApiKey(h.ctx, "full");
    const res = await h.request("GET", "/v1/users", { headers: bearer(full.secret) });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: "FORBIDDEN", message: "This key scope does not have access to this endpoint", details: [{ path: "headers.authorization", message: "This key has scope full; this endpoint takes no API key, only an admin key or a login token of role admin (POST /v1/auth/login)" }] });
    const adminJwt = await loginToken(h, "admin@localhost", PASSWORD);
    expect((await h.request("GET", "/v1/users", { headers: bearer(adminJwt) })).status).toBe(200);
    await createOk(h, adminJwt, "by-jwt@example.com");
  });
});

describe("update", () => {
  test("PATCH role applies at once to existing tokens", async () => {
    const user = await createOk(h, admin, "promote@example.com", "editor", "promote password");
    const t = await loginToken(h, "promote@example.com", "promote password");
    expect((await h.request("GET", "/v1/users", { headers: bearer(t) })).status).toBe(403);
    const res = await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: { role: "admin" } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: user.id, email: "promote@example.com", role: "admin" });
    expect((await h.request("GET", "/v1/users", { headers: bearer(t) })).status).toBe(200);
    expect(await (await h.request("GET", "/v1/auth/me", { headers: bearer(t) })).json()).toMatchObject({ role: "admin" });

    const back = await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: { role: "viewer" } });
    expect(back.status).toBe(200);
    expect((await h.request("GET", "/v1/users", { headers: bearer(t) })).status).toBe(403);
  });

  test("PATCH password: the old one stops working, its sessions end, the new one works", async () => {
    const user = await createOk(h, admin, "pw@example.com", "viewer", "old password 1");
    const before = await loginToken(h, "pw@example.com", "old password 1");
    expect((await h.request("GET", "/v1/auth/me", { headers: bearer(before) })).status).toBe(200);
    // The same instant (the test clock stands still): a token of the change's own second ends
    // too, though `iat` has whole seconds; a login after the change works at once.
    const res = await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: { password: "new password 2" } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(user);
    expect((await h.request("POST", "/v1/auth/login", { body: { email: "pw@example.com", password: "old password 1" } })).status).toBe(401);
    const stale = await h.request("GET", "/v1/auth/me", { headers: bearer(before) });
    expect(stale.status).toBe(401);
    expect(await stale.json()).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired token" });
    const after = await loginToken(h, "pw@example.com", "new password 2");
    expect((await h.request("GET", "/v1/auth/me", { headers: bearer(after) })).status).toBe(200);
    const claims = JSON.parse(Buffer.from(after.split(".")[1]!, "base64url").toString());
    expect(claims.exp - claims.iat).toBe(3600);
    // A second change in the same instant ends the token dated ahead by the first one.
    expect((await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: { password: "new password 3" } })).status).toBe(200);
    expect((await h.request("GET", "/v1/auth/me", { headers: bearer(after) })).status).toBe(401);
    const third = await loginToken(h, "pw@example.com", "new password 3");
    expect((await h.request("GET", "/v1/auth/me", { headers: bearer(third) })).status).toBe(200);
    h.clock.advance(3_000);
    const later = await loginToken(h, "pw@example.com", "new password 3");
    expect(JSON.parse(Buffer.from(later.split(".")[1]!, "base64url").toString()).iat).toBe(Math.floor(h.clock.now() / 1000));
  });

  test("tokensValidFrom: past the change's second and past the previous value; old rows in milliseconds", () => {
    const at = (s: number) => new Date(s * 1000).toISOString();
    const S = 1_795_000_000;
    expect(tokensValidFrom(null, S * 1000 + 500)).toBe(at(S + 1));
    expect(tokensValidFrom(at(S + 1), S * 1000 + 700)).toBe(at(S + 2));
    expect(tokensValidFrom(at(S + 2), S * 1000 + 900)).toBe(at(S + 3));
    expect(tokensValidFrom(at(S + 1), (S + 5) * 1000)).toBe(at(S + 6));
    expect(tokensValidFrom(new Date(S * 1000 + 500).toISOString(), S * 1000 + 600)).toBe(at(S + 2));
  });

  test("PATCH role only: sessions stay open with the new role", async () => {
    const user = await createOk(h, admin, "role-only@example.com", "viewer", "a password 1");
    const t = await loginToken(h, "role-only@example.com", "a password 1");
    h.clock.advance(1_000);
    expect((await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: { role: "editor" } })).status).toBe(200);
    const me = await h.request("GET", "/v1/auth/me", { headers: bearer(t) });
    expect(me.status).toBe(200);
    expect(((await me.json()) as Json).role).toBe("editor");
  });

  test("PATCH validation: unknown field, email change, short password, bad role are 400; unknown user 404; {} changes nothing", async () => {
    const user = await createOk(h, admin, "patch@example.com");
    const empty = await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body: {} });
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual(user);
    for (const body of [{ name: "x" }, { email: "other@example.com" }, { password: "short" }, { role: "root" }]) {
      const res = await h.request("PATCH", `/v1/users/${user.id}`, { headers: bearer(admin), body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error).toBe("VALIDATION_ERROR");
    }
    const missing = await h.request("PATCH", "/v1/users/usr_doesnotexist", { headers: bearer(admin), body: { role: "viewer" } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as Json).error).toBe("NOT_FOUND");
  });
});

describe("delete and the last admin", () => {
  test("DELETE 204; the user's tokens are 401 at once; a second DELETE is 404", async () => {
    const user = await createOk(h, admin, "gone@example.com", "editor", "gone password");
    const t = await loginToken(h, "gone@example.com", "gone password");
    expect((await h.request("GET", "/v1/auth/me", { headers: bearer(t) })).status).toBe(200);
    const res = await h.request("DELETE", `/v1/users/${user.id}`, { headers: bearer(admin) });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const after = await h.request("GET", "/v1/auth/me", { headers: bearer(t) });
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired token" });
    expect((await h.request("DELETE", `/v1/users/${user.id}`, { headers: bearer(admin) })).status).toBe(404);
    expect((await h.request("POST", "/v1/auth/login", { body: { email: "gone@example.com", password: "gone password" } })).status).toBe(401);
  });

  test("the last admin can be neither deleted nor demoted (409); with a second admin both work", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const key = await seedAdminKey(app.ctx);
      const [first] = await list(app, key);
      expect(first!.role).toBe("admin");

      const del = await app.request("DELETE", `/v1/users/${first!.id}`, { headers: bearer(key) });
      expect(del.status).toBe(409);
      const delBody = (await del.json()) as Json;
      expect(delBody.error).toBe("CONFLICT");
      expect(delBody.message).toContain("last admin");
      const demote = await app.request("PATCH", `/v1/users/${first!.id}`, { headers: bearer(key), body: { role: "editor" } });
      expect(demote.status).toBe(409);
      expect(((await demote.json()) as Json).message).toContain("last admin");
      // Keeping the role, or changing only the password, is fine.
      expect((await app.request("PATCH", `/v1/users/${first!.id}`, { headers: bearer(key), body: { role: "admin", password: "another password" } })).status).toBe(200);

      const second = await createOk(app, key, "second@example.com", "admin", "second password");
      expect((await app.request("PATCH", `/v1/users/${first!.id}`, { headers: bearer(key), body: { role: "viewer" } })).status).toBe(200);
      // An admin may delete themselves when another admin remains... but now `second` is the last.
      const own = await loginToken(app, "second@example.com", "second password");
      expect((await app.request("DELETE", `/v1/users/${second.id}`, { headers: bearer(own) })).status).toBe(409);
      expect((await app.request("PATCH", `/v1/users/${first!.id}`, { headers: bearer(own), body: { role: "admin" } })).status).toBe(200);
      expect((await app.request("DELETE", `/v1/users/${second.id}`, { headers: bearer(own) })).status).toBe(204);
      expect((await app.request("GET", "/v1/auth/me", { headers: bearer(own) })).status).toBe(401);
      expect((await list(app, key)).map((u) => u.email)).toEqual(["admin@localhost"]);
    } finally {
      app.close();
    }
  });
});

describe("bootstrap: the first admin user and admin key", () => {
  async function start(dir: string, env: Record<string, string> = {}) {
    const config = loadConfig({ SVC_DATA_DIR: dir, SVC_LOG_FORMAT: "json", SVC_LOG_LEVEL: "error", ...env });
    const ctx = await createContext(config, { log: createLogger({ level: "error", format: "json", write: () => {} }), clock: new TestClock() });
    return { ctx, result: await bootstrap(ctx) };
  }

  sqliteOnly("first start prints a generated password and key once; both work; the next start prints nothing", async () => {
    const dir = tempDir();
    try {
      const first = await start(dir);
      const text = first.result.lines.join("\n");
      const login = text.match(/^Admin login: +admin@localhost \/ ([A-Za-z0-9]{20})$/m);
      const key = text.match(/^Admin key: +(svc_admin_[A-Za-z0-9]{32,})$/m);
      expect(login).not.toBeNull();
      expect(key).not.toBeNull();
      expect(await first.ctx.credentials.resolve(`Bearer ${key![1]}`)).toMatchObject({ principal: { kind: "adminKey" } });
      const row = sqliteOf(first.ctx).db.select().from(users).get()!;
      expect(row).toMatchObject({ email: "admin@localhost", role: "admin" });
      expect(await Bun.password.verify(login![1]!, row.passwordHash)).toBe(true);
      first.ctx.close();

      const second = await start(dir);
      expect(second.result).toEqual({ firstStart: false, lines: [] });
      second.ctx.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  sqliteOnly("configured SVC_ADMIN_EMAIL, SVC_ADMIN_PASSWORD and SVC_ADMIN_KEY are used and never printed", async () => {
    const dir = tempDir();
    const key = `svc_admin_${"Ab3".repeat(12)}`;
    try {
      const { ctx, result } = await start(dir, { SVC_ADMIN_EMAIL: "Ops@Example.com", SVC_ADMIN_PASSWORD: "configured password", SVC_ADMIN_KEY: key });
      const text = result.lines.join("\n");
      expect(text).toContain("Admin login:  ops@example.com / (password from SVC_ADMIN_PASSWORD / --admin-password)");
      expect(text).toContain("Admin key:    (from SVC_ADMIN_KEY / --admin-key)");
      expect(text).not.toContain("configured password");
      expect(text).not.toContain(key);
      expect(await ctx.credentials.resolve(`Bearer ${key}`)).toMatchObject({ principal: { kind: "adminKey" } });
      const row = sqliteOf(ctx).db.select().from(users).get()!;
      expect(row.email).toBe("ops@example.com");
      expect(await Bun.password.verify("configured password", row.passwordHash)).toBe(true);
      ctx.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  sqliteOnly("an instance bootstrapped before identity existed (no user, no key) gets both on its next start", async () => {
    const dir = tempDir();
    try {
      const first = await start(dir);
      sqliteOf(first.ctx).sqlite.run("DELETE FROM users");
      sqliteOf(first.ctx).sqlite.run("DELETE FROM admin_keys");
      expect(sqliteOf(first.ctx).db.select().from(settings).where(eq(settings.key, "bootstrapped_at")).get()).toBeDefined();
      first.ctx.close();
      const again = await start(dir);
      expect(again.result.firstStart).toBe(false);
      expect(again.result.lines.join("\n")).toMatch(/Admin login: .*\n.*Admin key: +svc_admin_/);
      again.ctx.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  sqliteOnly("a later start creates a configured SVC_ADMIN_KEY again when no admin key exists, printing no secret", async () => {
    const dir = tempDir();
    const key = `svc_admin_${"Xy9".repeat(12)}`;
    try {
      const first = await start(dir, { SVC_ADMIN_KEY: key });
      sqliteOf(first.ctx).sqlite.run("DELETE FROM admin_keys");
      first.ctx.close();
      const again = await start(dir, { SVC_ADMIN_KEY: key });
      expect(again.result.lines).toEqual(["Admin key:    (from SVC_ADMIN_KEY / --admin-key)"]);
      expect(await again.ctx.credentials.resolve(`Bearer ${key}`)).toMatchObject({ principal: { kind: "adminKey" } });
      again.ctx.close();
      const third = await start(dir, { SVC_ADMIN_KEY: key });
      expect(third.result.lines).toEqual([]);
      expect(sqliteOf(third.ctx).sqlite.query("SELECT COUNT(*) AS n FROM admin_keys").get()).toEqual({ n: 1 });
      third.ctx.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  sqliteOnly("later starts do not generate a key for a deleted one, nor a user, while another way in exists", async () => {
    const dir = tempDir();
    try {
      const first = await start(dir);
      sqliteOf(first.ctx).sqlite.run("DELETE FROM admin_keys");
      first.ctx.close();
      const again = await start(dir);
      expect(again.result.lines).toEqual([]);
      expect(sqliteOf(again.ctx).sqlite.query("SELECT COUNT(*) AS n FROM admin_keys").get()).toEqual({ n: 0 });
      again.ctx.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
