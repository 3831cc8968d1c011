/**
 * Change-log entries of credentials (issue 21, points 1 and 3): every write route of API keys,
 * admin keys and users, and every `flagsvc admin` command, appends exactly one entry with its
 * actor and changes, and no secret (key, password, hash) appears anywhere in it; a refused call
 * appends nothing and changes nothing. The first start's bootstrap is one `system` commit.
 * Entries are read with SQL (the read API is built beside this).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { ChangeLogRow } from "../../src/modules/audit/store";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, entriesAfter, lastPosition, runCliBeside, rawRows, tableRows, externalChanges } from "../helpers";

const MASKED = { before: "********", after: "********", changed: true };


let h: TestApp;
afterEach(() => h.close());

const last = () => lastPosition(h.ctx);
const since = (position: number) => entriesAfter(h.ctx, position);
/** What a refused call must leave as it was: the credentials and the change log. */
const stored = () => Promise.all(["api_keys", "admin_keys", "users", "change_log"].map((t) => tableRows(h.ctx, t)));
/** Every stored hash of a key or password: none may enter an entry (the fixtures' users hold "x"). */
const hashes = async () =>
  ((await rawRows(h.ctx, "SELECT key_hash AS v FROM api_keys UNION ALL SELECT previous_hash FROM api_keys UNION ALL SELECT key_hash FROM admin_keys UNION ALL SELECT password_hash FROM users")) as { v: string | null }[])
    .map((r) => r.v)
    .filter((v): v is string => v !== null && v.length > 1);

/**
 * Runs `call`, expects it to have appended exactly one entry matching `expected`, with none of
 * `secrets` (and no stored hash) in its serialized form; returns the entry's changes.
 */
async function oneEntry(call: () => Promise<unknown>, expected: Partial<ChangeLogRow>, secrets: () => string[] = () => []): Promise<Record<string, any>> {
  const before = await last();
  const hashesBefore = await hashes();
  await call();
  const rows = await since(before);
  expect(rows).toHaveLength(1);
  expect(rows[0]!).toMatchObject(expected);
  const text = JSON.stringify(rows[0]);
  for (const secret of [...secrets(), ...hashesBefore, ...(await hashes())]) expect(text).not.toContain(secret);
  return JSON.parse(rows[0]!.changes);
}

/** A refused call: its status, nothing appended, nothing stored changed. */
async function refused(call: () => Promise<Response>, status: number): Promise<void> {
  const before = await stored();
  expect((await call()).status).toBe(status);
  expect((await stored())).toEqual(before);
}

/** The credentials that may write keys, with the actor each must be recorded as. */
async function callers() {
  const adminKey = await seedAdminKey(h.ctx, "audit admin");
  const adminKeyId = (await h.ctx.stores.adminKeys.list()).find((k) => k.name === "audit admin")!.id;
  const user = async (role: "admin" | "editor") => {
    const headers = await userToken(h.ctx, role);
    const me = await json(await h.request("GET", "/v1/auth/me", { headers }), 200);
    return { headers, actor: { actor_type: "user", actor_id: me.id, actor_label: me.email } };
  };
  const apiKey = async (scope: "mgmt" | "full") => {
    const { id, secret } = await seedApiKey(h.ctx, scope);
    return { headers: bearer(secret), actor: { actor_type: "api_key", actor_id: id, actor_label: `${scope} key` } };
  };
  return {
    "admin key": { headers: bearer(adminKey), actor: { actor_type: "admin_key", actor_id: adminKeyId, actor_label: "audit admin" } },
    "admin JWT": await user("admin"),
    "editor JWT": await user("editor"),
    "mgmt key": await apiKey("mgmt"),
    "full key": await apiKey("full"),
  };
}

describe("API keys", () => {
  beforeEach(async () => {
    h = await testApp();
  });

  test("create, rotate (with a grace period) and delete: one entry each, for every credential that may, with no secret in it", async () => {
    for (const [who, { headers, actor }] of Object.entries(await callers())) {
      let created: Record<string, any> = {};
      const createdChanges = await oneEntry(
        async () => {
          const res = await h.request("POST", "/v1/projects/default/api-keys", { headers, body: { name: `by ${who}`, scope: "eval", environment: "staging" } });
          created = await json(res, 201);
        },
        { ...actor, project_slug: "default", environment: "staging", resource_type: "api_key", resource_key: `by ${who}`, action: "created" },
        () => [created.key],
      );
      expect((await since((await last()) - 1))[0]!.resource_id).toBe(created.id);
      expect((await since((await last()) - 1))[0]!.request_id).toMatch(/.+/);
      expect(createdChanges).toEqual({
        id: { before: null, after: created.id },
        name: { before: null, after: `by ${who}` },
        scope: { before: null, after: "eval" },
        environment: { before: null, after: "staging" },
        projectId: { before: null, after: created.projectId },
        keyPrefix: { before: null, after: created.keyPrefix },
        createdAt: { before: null, after: created.createdAt },
        lastUsedAt: { before: null, after: null },
        keyHash: { before: null, after: "********", changed: true },
      });

      let rotated: Record<string, any> = {};
      const rotatedChanges = await oneEntry(
        async () => (rotated = await json(await h.request("POST", `/v1/api-keys/${created.id}/rotate`, { headers, body: { gracePeriodSeconds: 60 } }), 200)),
        { ...actor, project_slug: "default", environment: "staging", resource_type: "api_key", resource_id: created.id, resource_key: `by ${who}`, action: "rotated" },
        () => [created.key, rotated.key],
      );
      expect(rotatedChanges).toEqual({
        keyHash: MASKED,
        keyPrefix: { before: created.keyPrefix, after: rotated.keyPrefix },
        previousExpiresAt: { before: null, after: new Date(h.clock.ms + 60_000).toISOString() },
      });

      const deletedChanges = await oneEntry(
        async () => json(await h.request("DELETE", `/v1/api-keys/${created.id}`, { headers }), 204),
        { ...actor, project_slug: "default", environment: "staging", resource_type: "api_key", resource_id: created.id, action: "deleted" },
        () => [created.key, rotated.key],
      );
      expect(deletedChanges.keyHash).toEqual({ before: "********", after: null });
      expect(deletedChanges.name).toEqual({ before: `by ${who}`, after: null });
    }
  });

  test("rotating without a grace period records the new secret only (masked)", async () => {
    const { "admin key": admin } = await callers();
    const { id } = await seedApiKey(h.ctx, "eval");
    const changes = await oneEntry(async () => json(await h.request("POST", `/v1/api-keys/${id}/rotate`, { headers: admin.headers }), 200), { action: "rotated" });
    expect(Object.keys(changes).sort()).toEqual(["keyHash", "keyPrefix"]);
    expect(changes.keyHash).toEqual(MASKED);
  });

  test("refused calls (400, 403, 404) append nothing and change nothing", async () => {
    const { "admin key": admin, "mgmt key": mgmt, "editor JWT": editor } = await callers();
    const full = await seedApiKey(h.ctx, "full");
    await json(await h.request("POST", "/v1/projects", { headers: admin.headers, body: { slug: "other", name: "Other" } }), 201);
    const elsewhere = await seedApiKey(h.ctx, "eval", "other");
    const create = (headers: Record<string, string>, body: unknown, slug = "default") => () => h.request("POST", `/v1/projects/${slug}/api-keys`, { headers, body });
    await refused(create(admin.headers, { name: "x", scope: "eval", environment: "nowhere" }), 400);
    await refused(create(admin.headers, { name: "", scope: "eval", environment: "staging" }), 400);
    await refused(create(mgmt.headers, { name: "x", scope: "full", environment: "staging" }), 403);
    await refused(create(mgmt.headers, { name: "x", scope: "eval", environment: "development" }, "other"), 403);
    await refused(create(admin.headers, { name: "x", scope: "eval", environment: "staging" }, "nope"), 404);
    await refused(() => h.request("POST", `/v1/api-keys/${full.id}/rotate`, { headers: mgmt.headers }), 403);
    await refused(() => h.request("POST", `/v1/api-keys/${elsewhere.id}/rotate`, { headers: mgmt.headers }), 403);
    await refused(() => h.request("POST", `/v1/api-keys/${full.id}/rotate`, { headers: editor.headers, body: { gracePeriodSeconds: -1 } }), 400);
    await refused(() => h.request("POST", "/v1/api-keys/key_unknown/rotate", { headers: admin.headers }), 404);
    await refused(() => h.request("DELETE", `/v1/api-keys/${full.id}`, { headers: mgmt.headers }), 403);
    await refused(() => h.request("DELETE", "/v1/api-keys/key_unknown", { headers: admin.headers }), 404);
  });
});

describe("admin keys", () => {
  beforeEach(async () => {
    h = await testApp();
  });

  test("create and delete by an admin key and an admin JWT: one entry each, instance-level, no secret", async () => {
    const all = await callers();
    for (const who of ["admin key", "admin JWT"] as const) {
      const { headers, actor } = all[who];
      let created: Record<string, any> = {};
      const changes = await oneEntry(
        async () => (created = await json(await h.request("POST", "/v1/admin-keys", { headers, body: { name: `by ${who}` } }), 201)),
        { ...actor, project_slug: null, environment: null, resource_type: "admin_key", resource_key: `by ${who}`, action: "created" },
        () => [created.key],
      );
      expect(changes).toEqual({
        id: { before: null, after: created.id },
        name: { before: null, after: `by ${who}` },
        keyHash: { before: null, after: "********", changed: true },
        keyPrefix: { before: null, after: created.keyPrefix },
        createdAt: { before: null, after: created.createdAt },
        lastUsedAt: { before: null, after: null },
      });
      const deleted = await oneEntry(
        async () => json(await h.request("DELETE", `/v1/admin-keys/${created.id}`, { headers }), 204),
        { ...actor, resource_type: "admin_key", resource_id: created.id, resource_key: `by ${who}`, action: "deleted" },
        () => [created.key],
      );
      expect(deleted.keyHash).toEqual({ before: "********", after: null });
    }
  });

  test("refused calls (400, 403, 404, 409) append nothing and change nothing", async () => {
    const { "admin key": admin, "editor JWT": editor, "full key": full } = await callers();
    await refused(() => h.request("POST", "/v1/admin-keys", { headers: admin.headers, body: { name: "" } }), 400);
    await refused(() => h.request("POST", "/v1/admin-keys", { headers: editor.headers, body: { name: "x" } }), 403);
    await refused(() => h.request("POST", "/v1/admin-keys", { headers: full.headers }), 403);
    await refused(() => h.request("DELETE", "/v1/admin-keys/key_unknown", { headers: admin.headers }), 404);
    // The last admin key while no admin user exists: 409.
    await rawRows(h.ctx, "DELETE FROM admin_keys WHERE name <> 'audit admin'");
    await rawRows(h.ctx, "DELETE FROM users");
    await h.ctx.credentials.reload();
    const own = ((await rawRows(h.ctx, "SELECT id FROM admin_keys"))[0] as { id: string }).id;
    await refused(() => h.request("DELETE", `/v1/admin-keys/${own}`, { headers: admin.headers }), 409);
  });
});

describe("users", () => {
  beforeEach(async () => {
    h = await testApp();
  });

  test("create, role change, password change and delete by an admin key and an admin JWT: one entry each, no password or hash", async () => {
    const all = await callers();
    for (const who of ["admin key", "admin JWT"] as const) {
      const { headers, actor } = all[who];
      const email = `${who.replace(" ", "-").toLowerCase()}@example.com`;
      const password = `first password of ${who}`;
      const newPassword = `second password of ${who}`;
      let user: Record<string, any> = {};
      const created = await oneEntry(
        async () => (user = await json(await h.request("POST", "/v1/users", { headers, body: { email: email.toUpperCase(), password, role: "viewer" } }), 201)),
        { ...actor, project_slug: null, environment: null, resource_type: "user", resource_key: email, action: "created" },
        () => [password],
      );
      expect(created).toEqual({
        id: { before: null, after: user.id },
        email: { before: null, after: email },
        role: { before: null, after: "viewer" },
        passwordHash: { before: null, after: "********", changed: true },
        createdAt: { before: null, after: expect.any(String) },
        updatedAt: { before: null, after: expect.any(String) },
      });
      const patch = (body: unknown) => async () => json(await h.request("PATCH", `/v1/users/${user.id}`, { headers, body }), 200);
      const target = { ...actor, resource_type: "user", resource_id: user.id, resource_key: email, action: "updated" };
      expect(await oneEntry(patch({ role: "editor" }), target)).toEqual({ role: { before: "viewer", after: "editor" } });
      expect(await oneEntry(patch({ password: newPassword }), target, () => [password, newPassword])).toEqual({ password: MASKED });
      expect(await oneEntry(patch({ role: "admin", password }), target, () => [password, newPassword])).toEqual({
        role: { before: "editor", after: "admin" },
        password: MASKED,
      });
      // The same role again, or an empty body: nothing changes, nothing is appended.
      const before = await last();
      await patch({ role: "admin" })();
      await patch({})();
      expect(await last()).toBe(before);
      const deleted = await oneEntry(
        async () => json(await h.request("DELETE", `/v1/users/${user.id}`, { headers }), 204),
        { ...actor, resource_type: "user", resource_id: user.id, resource_key: email, action: "deleted" },
        () => [password, newPassword],
      );
      expect(deleted.passwordHash).toEqual({ before: "********", after: null });
      expect(deleted.role).toEqual({ before: "admin", after: null });
    }
  });

  test("refused calls (400, 403, 404, 409) append nothing and change nothing", async () => {
    const { "admin key": admin, "editor JWT": editor } = await callers();
    const first = (await h.ctx.stores.users.byEmail("admin@localhost"))!.id; // the bootstrap's admin
    await rawRows(h.ctx, "DELETE FROM users WHERE role = 'admin' AND id <> ?", [first]);
    await h.ctx.credentials.reload();
    await refused(() => h.request("POST", "/v1/users", { headers: admin.headers, body: { email: "x@example.com", password: "short", role: "viewer" } }), 400);
    await refused(() => h.request("POST", "/v1/users", { headers: editor.headers, body: { email: "x@example.com", password: "long enough password", role: "viewer" } }), 403);
    await refused(() => h.request("POST", "/v1/users", { headers: admin.headers, body: { email: "ADMIN@localhost", password: "long enough password", role: "viewer" } }), 409);
    await refused(() => h.request("PATCH", "/v1/users/usr_unknown", { headers: admin.headers, body: { role: "viewer" } }), 404);
    await refused(() => h.request("PATCH", `/v1/users/${first}`, { headers: admin.headers, body: { role: "viewer" } }), 409);
    await refused(() => h.request("DELETE", `/v1/users/${first}`, { headers: admin.headers }), 409);
    await refused(() => h.request("DELETE", "/v1/users/usr_unknown", { headers: admin.headers }), 404);
  });
});

describe("flagsvc admin (the CLI, beside the running app)", () => {
  let noticed: () => Promise<boolean>;
  beforeEach(async () => {
    h = await testApp();
    h.clock.ms = Date.now();
    noticed = externalChanges(h.ctx);
  });

  const flagsvc = (...args: string[]) => runCliBeside(h, ...args);

  const cli = { actor_type: "cli", actor_id: expect.stringMatching(/^cli:.+/), request_id: null };

  test("create-user, create-key and reset-password each append one entry by the cli actor, which the app notices; no secret in them", async () => {
    const password = "a password from the cli";
    const user = await oneEntry(async () => expect((await flagsvc("admin", "create-user", "--email", "ops@example.com", "--password", password, "--role", "editor")).code).toBe(0), {
      ...cli,
      resource_type: "user",
      resource_key: "ops@example.com",
      action: "created",
    }, () => [password]);
    expect(user.passwordHash).toEqual({ before: null, after: "********", changed: true });
    expect(await noticed()).toBe(true);

    let key = "";
    await oneEntry(
      async () => {
        const r = await flagsvc("admin", "create-key", "--name", "from cli");
        expect(r.code).toBe(0);
        key = r.stdout.trim();
      },
      { ...cli, resource_type: "admin_key", resource_key: "from cli", action: "created" },
      () => [key],
    );
    expect(await noticed()).toBe(true);
    expect((await h.request("GET", "/v1/admin-keys", { headers: bearer(key) })).status).toBe(200);

    let generated = "";
    const reset = await oneEntry(
      async () => {
        const r = await flagsvc("admin", "reset-password", "--email", "OPS@example.com");
        expect(r.code).toBe(0);
        generated = r.stdout.trim();
      },
      { ...cli, resource_type: "user", resource_key: "ops@example.com", action: "updated" },
      () => [password, generated],
    );
    expect(reset).toEqual({ password: MASKED });
    expect(await noticed()).toBe(true);
  });

  test("a refused command appends nothing and changes nothing", async () => {
    const before = await stored();
    expect((await flagsvc("admin", "reset-password", "--email", "nobody@example.com", "--password", "long enough password")).code).toBe(1);
    expect((await flagsvc("admin", "create-user", "--email", "admin@localhost", "--password", "long enough password", "--role", "viewer")).code).toBe(1);
    expect((await flagsvc("admin", "create-key", "--name", "")).code).toBe(2);
    expect((await stored())).toEqual(before);
    expect(await h.ctx.credentials.pollExternalChanges()).toBe(false);
  });
});

describe("bootstrap", () => {
  test("the first start is one commit by the system actor: the default project, the first admin user and admin key, no secret", async () => {
    const password = "the configured admin password";
    const key = `svc_admin_${"K".repeat(32)}`;
    h = await testApp({ SVC_ADMIN_PASSWORD: password, SVC_ADMIN_KEY: key, SVC_ADMIN_EMAIL: "root@example.com" });
    const rows = await since(0);
    expect(rows.map((r) => [r.actor_type, r.actor_id, r.resource_type, r.resource_key, r.action])).toEqual([
      ["system", "system", "project", "default", "created"],
      ["system", "system", "user", "root@example.com", "created"],
      ["system", "system", "admin_key", "bootstrap", "created"],
    ]);
    expect(new Set(rows.map((r) => (r as unknown as { at: string }).at)).size).toBe(1); // one transaction, one time
    const text = JSON.stringify(rows);
    for (const secret of [password, key, ...(await hashes())]) expect(text).not.toContain(secret);
    expect(JSON.parse(rows[1]!.changes).passwordHash).toEqual({ before: null, after: "********", changed: true });
    expect(JSON.parse(rows[2]!.changes).keyHash).toEqual({ before: null, after: "********", changed: true });
  });
});
