/** Project API keys (decisions §4) through app.handle over a real database. */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../src/db/client";
import { sha256Hex } from "../../src/lib/secrets";
import { bearer, seedAdminKey, testApp, type TestApp, userToken, json, ISO_TIMESTAMP, countRows, sqliteOnly } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
});
afterEach(() => h.close());

const FIELDS = ["createdAt", "environment", "id", "keyPrefix", "lastUsedAt", "name", "projectId", "scope"];

function createKey(body: unknown, headers = admin, slug = "default") {
  return h.request("POST", `/v1/projects/${slug}/api-keys`, { body, headers });
}

async function newKey(scope: string, environment = "development", headers = admin, slug = "default") {
  return json(await createKey({ name: `${scope} key`, scope, environment }, headers, slug), 201);
}

/** A request that needs mgmt or full scope, to tell a working key from a refused one. */
const probe = (secret: string) => h.request("GET", "/v1/projects", { headers: bearer(secret) });


const projectId = async () => (await h.ctx.stores.projects.bySlug("default"))!.id;

describe("create", () => {
  test("201 with the full shape; the key has the documented format and works at once", async () => {
    const body = await newKey("mgmt", "staging");
    expect(Object.keys(body).sort()).toEqual([...FIELDS, "key"].sort());
    expect(body.id).toMatch(/^key_[A-Za-z0-9]{22,}$/);
    expect(body).toMatchObject({ name: "mgmt key", scope: "mgmt", environment: "staging", projectId: (await projectId()), lastUsedAt: null });
    expect(body.key).toMatch(/^svc_sk_mgmt_[A-Za-z0-9]{32}$/);
    expect(body.key.startsWith(body.keyPrefix)).toBe(true);
    expect(body.keyPrefix).toMatch(/^svc_sk_mgmt_[A-Za-z0-9]{6}$/);
    expect(body.createdAt).toBe("2026-11-22T10:00:00.000Z");

    const projects = await json(await probe(body.key), 200);
    expect(projects.projects.map((p: any) => p.slug)).toEqual(["default"]);
  });

  test("each scope gets its prefix; an eval key is refused on management routes with the scope message", async () => {
    for (const scope of ["eval", "test", "mgmt", "full"]) {
      const body = await newKey(scope);
      expect(body.key).toMatch(new RegExp(`^svc_sk_${scope}_[A-Za-z0-9]{32}$`));
    }
    const evalKey = await newKey("eval");
    expect(await json(await probe(evalKey.key), 403)).toEqual({
      error: "FORBIDDEN",
      message: "This key scope does not have access to this endpoint",
      details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope mgmt or full" }],
    });
  });

  test("validation: missing, bad and unknown fields 400 with details; nothing written", async () => {
    const cases: [unknown, string][] = [
      [{ scope: "eval", environment: "development" }, "body.name"],
      [{ name: "", scope: "eval", environment: "development" }, "body.name"],
      [{ name: "x".repeat(201), scope: "eval", environment: "development" }, "body.name"],
      [{ name: "n", scope: "admin", environment: "development" }, "body.scope"],
      [{ name: "n", environment: "development" }, "body.scope"],
      [{ name: "n", scope: "eval" }, "body.environment"],
      [{ name: "n", scope: "eval", environment: "development", projectId: "proj_x" }, "body.projectId"],
    ];
    for (const [input, path] of cases) {
      const body = await json(await createKey(input), 400);
      expect(body.error).toBe("VALIDATION_ERROR");
      expect(body.details.map((d: any) => d.path)).toContain(path);
    }
    const scope = await json(await createKey({ name: "n", scope: "admin", environment: "development" }), 400);
    expect(scope.details).toEqual([{ path: "body.scope", message: "Must be one of eval, test, mgmt, full, client" }]);
    expect((await json(await h.request("GET", "/v1/projects/default/api-keys", { headers: admin }), 200)).apiKeys).toEqual([]);
  });

  test("unknown environment: 400 at body.environment; unknown project: 404", async () => {
    const body = await json(await createKey({ name: "n", scope: "eval", environment: "nowhere" }), 400);
    expect(body.error).toBe("VALIDATION_ERROR");
    expect(body.details).toEqual([{ path: "body.environment", message: expect.stringContaining("nowhere") }]);
    expect((await json(await createKey({ name: "n", scope: "eval", environment: "development" }, admin, "nope"), 404)).error).toBe("NOT_FOUND");
    expect({ n: await countRows(h.ctx, "api_keys") }).toEqual({ n: 0 });
  });

  test("privileges: mgmt key creates eval/test/mgmt but not full; full key creates full; only in its own project", async () => {
    const mgmt = bearer((await newKey("mgmt")).key);
    for (const scope of ["eval", "test", "mgmt"]) await newKey(scope, "development", mgmt);
    const refused = await json(await createKey({ name: "n", scope: "full", environment: "development" }, mgmt), 403);
    expect(refused.error).toBe("FORBIDDEN");
    const full = bearer((await newKey("full")).key);
    expect((await newKey("full", "production", full)).scope).toBe("full");

    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const other = await json(await createKey({ name: "n", scope: "eval", environment: "development" }, mgmt, "other"), 403);
    expect(other).toEqual({ error: "FORBIDDEN", message: "This key does not have access to this project" });
    expect((await createKey({ name: "n", scope: "eval", environment: "development" }, full, "other")).status).toBe(403);
    // Admin key and admin/editor JWTs create any scope in any project; a viewer none.
    expect((await newKey("full", "development", admin, "other")).scope).toBe("full");
    expect((await newKey("full", "development", await userToken(h.ctx, "editor"), "other")).scope).toBe("full");
    expect((await newKey("full", "development", await userToken(h.ctx, "admin"))).scope).toBe("full");
    expect((await createKey({ name: "n", scope: "eval", environment: "development" }, await userToken(h.ctx, "viewer"))).status).toBe(403);
    // An eval key reaches no key route.
    expect((await h.request("GET", "/v1/projects/default/api-keys", { headers: bearer((await newKey("eval")).key) })).status).toBe(403);
  });
});

describe("list", () => {
  test("200 { apiKeys } without secrets, oldest first, only this project's keys", async () => {
    const a = await newKey("eval");
    h.clock.advance(1000);
    const b = await newKey("mgmt", "production");
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    await newKey("full", "development", admin, "other");

    const res = await h.request("GET", "/v1/projects/default/api-keys", { headers: admin });
    const text = await res.text();
    expect(res.status).toBe(200);
    const body = JSON.parse(text);
    expect(Object.keys(body)).toEqual(["apiKeys"]);
    expect(body.apiKeys.map((k: any) => k.id)).toEqual([a.id, b.id]);
    for (const k of body.apiKeys) expect(Object.keys(k).sort()).toEqual(FIELDS);
    const { key: _a, ...aListed } = a;
    expect(body.apiKeys[0]).toEqual(aListed);
    expect(text).not.toContain(a.key);
    expect(text).not.toContain(b.key);
    expect(text).not.toContain('"key"');
    expect((await h.request("GET", "/v1/projects/nope/api-keys", { headers: admin })).status).toBe(404);
  });

  test("lastUsedAt: null until used, then the time of the last use", async () => {
    const k = await newKey("mgmt");
    h.clock.advance(60_000);
    expect((await probe(k.key)).status).toBe(200);
    const body = await json(await h.request("GET", "/v1/projects/default/api-keys", { headers: admin }), 200);
    expect(body.apiKeys[0].lastUsedAt).toBe("2026-11-22T10:01:00.000Z");
    expect(body.apiKeys[0].lastUsedAt).toMatch(ISO_TIMESTAMP);
  });
});

describe("rotate", () => {
  test("without grace: 200 with a new key; the old one is 401 at once, the new one works", async () => {
    const k = await newKey("mgmt", "staging");
    const res = await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { headers: admin });
    const body = await json(res, 200);
    expect(Object.keys(body).sort()).toEqual([...FIELDS, "key"].sort());
    expect(body).toMatchObject({ id: k.id, name: k.name, scope: "mgmt", environment: "staging", projectId: k.projectId, createdAt: k.createdAt });
    expect(body.key).toMatch(/^svc_sk_mgmt_[A-Za-z0-9]{32}$/);
    expect(body.key).not.toBe(k.key);
    expect(body.key.startsWith(body.keyPrefix)).toBe(true);
    expect(await json(await probe(k.key), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired API key" });
    expect((await probe(body.key)).status).toBe(200);
    // The listing shows the new prefix.
    const list = await json(await h.request("GET", "/v1/projects/default/api-keys", { headers: admin }), 200);
    expect(list.apiKeys[0].keyPrefix).toBe(body.keyPrefix);
  });

  test("explicit gracePeriodSeconds 0 behaves as no grace", async () => {
    const k = await newKey("mgmt");
    const body = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 0 }, headers: admin }), 200);
    expect((await probe(k.key)).status).toBe(401);
    expect((await probe(body.key)).status).toBe(200);
  });

  test("with grace: the old key works until the grace ends, then 401", async () => {
    const k = await newKey("mgmt");
    const body = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 60 }, headers: admin }), 200);
    expect((await probe(k.key)).status).toBe(200);
    expect((await probe(body.key)).status).toBe(200);
    h.clock.advance(59_999);
    expect((await probe(k.key)).status).toBe(200);
    h.clock.advance(1);
    expect((await probe(k.key)).status).toBe(401);
    expect((await probe(body.key)).status).toBe(200);
  });

  test("a second rotation ends the earlier grace", async () => {
    const k = await newKey("mgmt");
    const r1 = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 3600 }, headers: admin }), 200);
    const r2 = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 60 }, headers: admin }), 200);
    expect((await probe(k.key)).status).toBe(401);
    expect((await probe(r1.key)).status).toBe(200);
    expect((await probe(r2.key)).status).toBe(200);
  });

  test("validation: grace outside 0..86400, not an integer, unknown fields, not an object: 400 and the key unchanged", async () => {
    const k = await newKey("mgmt");
    // Strings go as they are: JSON bodies that are not objects.
    const cases: unknown[] = [{ gracePeriodSeconds: -1 }, { gracePeriodSeconds: 86_401 }, { gracePeriodSeconds: 1.5 }, { gracePeriodSeconds: "60" }, { grace: 60 }, [1], "[]", "5", '"x"', "true", "null"];
    for (const input of cases) {
      const body = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: input, headers: admin }), 400);
      expect(body.error).toBe("VALIDATION_ERROR");
      expect(body.details[0].path).toMatch(/^body/);
    }
    expect((await probe(k.key)).status).toBe(200);
    await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 86_400 }, headers: admin }), 200);
  });

  test("unknown key 404; mgmt key cannot rotate a full key nor another project's key (403)", async () => {
    expect((await json(await h.request("POST", "/v1/api-keys/key_nope/rotate", { headers: admin }), 404)).error).toBe("NOT_FOUND");
    const mgmt = bearer((await newKey("mgmt")).key);
    const full = await newKey("full");
    const refused = await json(await h.request("POST", `/v1/api-keys/${full.id}/rotate`, { headers: mgmt }), 403);
    expect(refused.error).toBe("FORBIDDEN");
    expect((await probe(full.key)).status).toBe(200);

    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const foreign = await newKey("eval", "development", admin, "other");
    expect(await json(await h.request("POST", `/v1/api-keys/${foreign.id}/rotate`, { headers: mgmt }), 403)).toEqual({
      error: "FORBIDDEN",
      message: "This key does not have access to this project",
    });
    // A full key of this project may rotate a full key here.
    const fullCaller = bearer((await newKey("full")).key);
    await json(await h.request("POST", `/v1/api-keys/${full.id}/rotate`, { headers: fullCaller }), 200);
  });
});

describe("delete", () => {
  test("204 and the key is 401 at once; then 404", async () => {
    const k = await newKey("mgmt");
    expect((await probe(k.key)).status).toBe(200);
    const res = await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: admin });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(await json(await probe(k.key), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired API key" });
    expect((await json(await h.request("GET", "/v1/projects/default/api-keys", { headers: admin }), 200)).apiKeys).toEqual([]);
    expect((await json(await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: admin }), 404)).error).toBe("NOT_FOUND");
  });

  test("a rotated-out secret in its grace period is refused once the key is deleted", async () => {
    const k = await newKey("mgmt");
    await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { body: { gracePeriodSeconds: 3600 }, headers: admin }), 200);
    expect((await probe(k.key)).status).toBe(200);
    expect((await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: admin })).status).toBe(204);
    expect((await probe(k.key)).status).toBe(401);
  });

  test("mgmt key: deletes its project's eval key and itself, not a full key nor another project's key", async () => {
    const mgmtKey = await newKey("mgmt");
    const mgmt = bearer(mgmtKey.key);
    const evalKey = await newKey("eval");
    const full = await newKey("full");
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const foreign = await newKey("eval", "development", admin, "other");

    expect((await json(await h.request("DELETE", `/v1/api-keys/${full.id}`, { headers: mgmt }), 403)).error).toBe("FORBIDDEN");
    expect((await json(await h.request("DELETE", `/v1/api-keys/${foreign.id}`, { headers: mgmt }), 403)).message).toBe(
      "This key does not have access to this project",
    );
    expect((await probe(full.key)).status).toBe(200);
    expect((await h.request("DELETE", `/v1/api-keys/${evalKey.id}`, { headers: mgmt })).status).toBe(204);
    expect((await h.request("DELETE", `/v1/api-keys/${mgmtKey.id}`, { headers: mgmt })).status).toBe(204);
    expect((await probe(mgmtKey.key)).status).toBe(401);
  });

  test("editor JWT may delete; viewer JWT may list but not delete", async () => {
    const k = await newKey("eval");
    const viewer = await userToken(h.ctx, "viewer");
    expect((await h.request("GET", "/v1/projects/default/api-keys", { headers: viewer })).status).toBe(200);
    expect((await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: viewer })).status).toBe(403);
    expect((await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: await userToken(h.ctx, "editor") })).status).toBe(204);
  });
});

describe("secrets at rest and in logs", () => {
  // SQLite-only: reads the database file's bytes.
  sqliteOnly("the database file holds only hashes; no secret in any log line", async () => {
    const created = await newKey("full");
    const rotated = await json(await h.request("POST", `/v1/api-keys/${created.id}/rotate`, { body: { gracePeriodSeconds: 60 }, headers: admin }), 200);
    expect((await probe(rotated.key)).status).toBe(200);
    await h.ctx.credentials.flushLastUsed();
    h.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
    const bytes = readFileSync(join(h.dir, DB_FILE)).toString("latin1");
    for (const secret of [created.key, rotated.key]) {
      expect(bytes).not.toContain(secret);
      expect(bytes).not.toContain(secret.slice(-32));
    }
    // What is stored is the SHA-256 of the secret.
    expect(bytes).toContain(sha256Hex(rotated.key));
    expect(bytes).toContain(sha256Hex(created.key));
    await new Promise((r) => setImmediate(r));
    const lines = h.logs();
    expect(lines.some((l) => l.msg === "request" && String(l.path).includes("/rotate"))).toBe(true);
    const logs = JSON.stringify(lines);
    expect(logs).not.toContain(created.key.slice(-32));
    expect(logs).not.toContain(rotated.key.slice(-32));
  });
});

describe("OpenAPI", () => {
  test("the key routes are documented with response schemas; the create response names key", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    const post = doc.paths["/v1/projects/{slug}/api-keys"].post;
    expect(post.tags).toEqual(["API keys"]);
    expect(JSON.stringify(post.responses["201"])).toContain("key");
    expect(doc.paths["/v1/api-keys/{keyId}/rotate"].post.description).toContain("gracePeriodSeconds");
    expect(doc.paths["/v1/api-keys/{keyId}"].delete.responses["204"]).toBeDefined();
  });
});
