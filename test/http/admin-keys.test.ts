/** /v1/admin-keys: create (secret once), list, use, delete (401 at once), access, the last-key rule. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { adminKeys } from "../../src/db/schema";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp, sqliteOnly } from "../helpers";

const PASSWORD = "correct horse battery";
const INVALID_KEY = { error: "UNAUTHORIZED", message: "Invalid or expired API key" };

let h: TestApp;
let admin: string;
beforeAll(async () => {
  h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
  admin = await seedAdminKey(h.ctx);
});
afterAll(() => h.close());

type Json = Record<string, any>;

async function createKey(app: TestApp, credential: string, name = "ci"): Promise<Json> {
  const res = await app.request("POST", "/v1/admin-keys", { headers: bearer(credential), body: { name } });
  expect(res.status).toBe(201);
  return (await res.json()) as Json;
}

async function listKeys(app: TestApp, credential: string): Promise<Json[]> {
  const res = await app.request("GET", "/v1/admin-keys", { headers: bearer(credential) });
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).adminKeys;
}

async function adminJwt(app: TestApp): Promise<string> {
  const res = await app.request("POST", "/v1/auth/login", { body: { email: "admin@localhost", password: PASSWORD } });
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).token;
}

describe("lifecycle", () => {
  sqliteOnly("create: 201 with the secret once; it works at once; the list shows it without the secret", async () => {
    const created = await createKey(h, admin, "deploy bot");
    expect(created).toEqual({
      id: expect.stringMatching(/^key_[A-Za-z0-9]{22}$/),
      name: "deploy bot",
      keyPrefix: created.key.slice(0, 16),
      createdAt: "2026-11-22T10:00:00.000Z",
      lastUsedAt: null,
      key: expect.stringMatching(/^svc_admin_[A-Za-z0-9]{32}$/),
    });
    // Stored only as a hash.
    const row = h.db.select().from(adminKeys).where(eq(adminKeys.id, created.id)).get()!;
    expect(JSON.stringify(row)).not.toContain(created.key);

    const listed = (await listKeys(h, admin)).find((k) => k.id === created.id)!;
    expect(listed).toEqual({ id: created.id, name: "deploy bot", keyPrefix: created.keyPrefix, createdAt: created.createdAt, lastUsedAt: null });

    h.clock.advance(5000);
    expect((await h.request("GET", "/v1/users", { headers: bearer(created.key) })).status).toBe(200);
    const used = (await listKeys(h, admin)).find((k) => k.id === created.id)!;
    expect(used.lastUsedAt).toBe("2026-11-22T10:00:05.000Z");
    await h.ctx.credentials.flushLastUsed();
    expect(h.db.select().from(adminKeys).where(eq(adminKeys.id, created.id)).get()!.lastUsedAt).toBe("2026-11-22T10:00:05.000Z");
  });

  test("list: every key, oldest first, without secrets", async () => {
    await createKey(h, admin, "listed");
    const keys = await listKeys(h, admin);
    expect(keys.length).toBeGreaterThanOrEqual(3); // bootstrap, seeded, created
    expect(keys[0]!.name).toBe("bootstrap");
    for (const k of keys) {
      expect(Object.keys(k).sort()).toEqual(["createdAt", "id", "keyPrefix", "lastUsedAt", "name"]);
      expect(k.keyPrefix).toMatch(/^svc_admin_[A-Za-z0-9]{6}$/);
    }
    const created = keys.map((k) => k.createdAt);
    expect([...created].sort()).toEqual(created);
  });

  test("delete: 204, the key is 401 at once, a second delete is 404", async () => {
    const created = await createKey(h, admin, "short-lived");
    expect((await h.request("GET", "/v1/users", { headers: bearer(created.key) })).status).toBe(200);
    const res = await h.request("DELETE", `/v1/admin-keys/${created.id}`, { headers: bearer(admin) });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const after = await h.request("GET", "/v1/users", { headers: bearer(created.key) });
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual(INVALID_KEY);
    const again = await h.request("DELETE", `/v1/admin-keys/${created.id}`, { headers: bearer(admin) });
    expect(again.status).toBe(404);
    expect(((await again.json()) as Json).error).toBe("NOT_FOUND");
    expect((await listKeys(h, admin)).some((k) => k.id === created.id)).toBe(false);
  });

  test("a key may delete itself (then it is 401)", async () => {
    const created = await createKey(h, admin, "self");
    expect((await h.request("DELETE", `/v1/admin-keys/${created.id}`, { headers: bearer(created.key) })).status).toBe(204);
    expect((await h.request("GET", "/v1/admin-keys", { headers: bearer(created.key) })).status).toBe(401);
  });

  test("an admin JWT manages keys too", async () => {
    const t = await adminJwt(h);
    const created = await createKey(h, t, "made by a user");
    expect((await h.request("DELETE", `/v1/admin-keys/${created.id}`, { headers: bearer(t) })).status).toBe(204);
  });
});

describe("validation and access", () => {
  test("name: empty, too long, not a string, or extra fields are 400 and create nothing", async () => {
    const before = ((await (await h.request("GET", "/v1/admin-keys", { headers: bearer(admin) })).json()) as Json).adminKeys.length;
    for (const body of [{ name: "" }, { name: "x".repeat(101) }, { name: 5 }, { name: "ok", scope: "full" }, { scope: "full" }, "[]"]) {
      const res = await h.request("POST", "/v1/admin-keys", { headers: bearer(admin), body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error).toBe("VALIDATION_ERROR");
    }
    expect(((await (await h.request("GET", "/v1/admin-keys", { headers: bearer(admin) })).json()) as Json).adminKeys.length).toBe(before);
  });

  test("the name may be left out, or the whole body: the key is named \"admin key\"", async () => {
    for (const body of [undefined, {}]) {
      const res = await h.request("POST", "/v1/admin-keys", { headers: bearer(admin), body });
      expect(res.status).toBe(201);
      const created = (await res.json()) as Json;
      expect(created.name).toBe("admin key");
      expect((await h.request("GET", "/v1/admin-keys", { headers: bearer(created.key) })).status).toBe(200);
    }
  });

  test("no credential 401; project keys, editor and viewer JWTs 403", async () => {
    expect((await h.request("GET", "/v1/admin-keys")).status).toBe(401);
    expect((await h.request("POST", "/v1/admin-keys", { body: { name: "x" } })).status).toBe(401);
    const full = await seedApiKey(h.ctx, "full");
    expect((await h.request("GET", "/v1/admin-keys", { headers: bearer(full.secret) })).status).toBe(403);
    for (const role of ["editor", "viewer"]) {
      const email = `${role}@example.com`;
      const res = await h.request("POST", "/v1/users", { headers: bearer(admin), body: { email, password: "a long password", role } });
      expect(res.status).toBe(201);
      const login = await h.request("POST", "/v1/auth/login", { body: { email, password: "a long password" } });
      const t = ((await login.json()) as Json).token;
      expect((await h.request("GET", "/v1/admin-keys", { headers: bearer(t) })).status).toBe(403);
      expect((await h.request("POST", "/v1/admin-keys", { headers: bearer(t), body: { name: "x" } })).status).toBe(403);
    }
  });
});

describe("the last admin key", () => {
  test("may be deleted while an admin user exists", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const t = await adminJwt(app);
      const keys = await listKeys(app, t);
      expect(keys).toHaveLength(1);
      expect((await app.request("DELETE", `/v1/admin-keys/${keys[0]!.id}`, { headers: bearer(t) })).status).toBe(204);
      expect(await listKeys(app, t)).toEqual([]);
    } finally {
      app.close();
    }
  });

  sqliteOnly("is refused (409) when no admin user exists; another key may go", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const key = await seedAdminKey(app.ctx);
      app.sqlite.run("DELETE FROM users");
      await app.ctx.credentials.reload();
      const [bootstrapKey, seeded] = await listKeys(app, key);
      expect((await app.request("DELETE", `/v1/admin-keys/${bootstrapKey!.id}`, { headers: bearer(key) })).status).toBe(204);
      const res = await app.request("DELETE", `/v1/admin-keys/${seeded!.id}`, { headers: bearer(key) });
      expect(res.status).toBe(409);
      const body = (await res.json()) as Json;
      expect(body.error).toBe("CONFLICT");
      expect(body.message).toContain("last admin key");
      expect((await app.request("GET", "/v1/admin-keys", { headers: bearer(key) })).status).toBe(200);
    } finally {
      app.close();
    }
  });
});
