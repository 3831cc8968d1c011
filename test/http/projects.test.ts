/** Projects and environments (decisions §5) through app.handle over a real database. */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { projects } from "../../src/db/schema";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp, userToken, json, ISO_TIMESTAMP, rawRows, sqliteOnly } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
});
afterEach(() => h.close());


async function create(body: unknown, headers = admin) {
  return h.request("POST", "/v1/projects", { body, headers });
}


describe("projects", () => {
  test("create with the default environments: 201 and the full shape", async () => {
    const body = await json(await create({ slug: "web-shop", name: "Web shop" }), 201);
    expect(Object.keys(body).sort()).toEqual(["createdAt", "environments", "id", "name", "slug", "staleAfterDays", "updatedAt"]);
    expect(body.staleAfterDays).toBe(30); // issue 32: the default (docs/insights.md)
    expect(body.id).toMatch(/^proj_[A-Za-z0-9]{22,}$/);
    expect(body.slug).toBe("web-shop");
    expect(body.name).toBe("Web shop");
    expect(body.createdAt).toMatch(ISO_TIMESTAMP);
    expect(body.createdAt).toBe("2026-11-22T10:00:00.000Z");
    expect(body.updatedAt).toBe(body.createdAt);
    expect(body.environments.map((e: any) => e.slug)).toEqual(["development", "staging", "production"]);
    for (const e of body.environments) {
      expect(Object.keys(e).sort()).toEqual(["createdAt", "id", "name", "slug"]);
      expect(e.id).toMatch(/^env_/);
      expect(e.createdAt).toMatch(ISO_TIMESTAMP);
    }
    // And it is stored: GET returns the same thing.
    expect(await json(await h.request("GET", "/v1/projects/web-shop", { headers: admin }), 200)).toEqual(body);
  });

  test("create with explicit environments keeps their order", async () => {
    const body = await json(await create({ slug: "app", name: "App", environments: [{ slug: "qa", name: "QA" }, { slug: "prod", name: "Prod" }] }), 201);
    expect(body.environments.map((e: any) => [e.slug, e.name])).toEqual([["qa", "QA"], ["prod", "Prod"]]);
  });

  test("duplicate project slug: 409 CONFLICT, nothing changes", async () => {
    await json(await create({ slug: "dup", name: "One" }), 201);
    const body = await json(await create({ slug: "dup", name: "Two" }), 409);
    expect(body.error).toBe("CONFLICT");
    const got = await json(await h.request("GET", "/v1/projects/dup", { headers: admin }), 200);
    expect(got.name).toBe("One");
    const body2 = await json(await create({ slug: "default", name: "Again" }), 409);
    expect(body2.error).toBe("CONFLICT");
  });

  sqliteOnly("duplicate environment slug in the request: 400 with details, nothing written", async () => {
    const body = await json(await create({ slug: "x", name: "X", environments: [{ slug: "a", name: "A" }, { slug: "a", name: "A2" }] }), 400);
    expect(body.error).toBe("VALIDATION_ERROR");
    expect(body.details).toEqual([{ path: "body.environments[1].slug", message: expect.any(String) }]);
    expect(h.db.select().from(projects).where(eq(projects.slug, "x")).get()).toBeUndefined();
  });

  test("validation: slug shape and length, name length, empty environments, unknown fields", async () => {
    const cases: [unknown, string][] = [
      [{ slug: "Bad_Slug", name: "n" }, "body.slug"],
      [{ slug: "-lead", name: "n" }, "body.slug"],
      [{ slug: "a--b", name: "n" }, "body.slug"],
      [{ slug: "a".repeat(65), name: "n" }, "body.slug"],
      [{ slug: "", name: "n" }, "body.slug"],
      [{ slug: "ok", name: "" }, "body.name"],
      [{ slug: "ok", name: "n".repeat(201) }, "body.name"],
      [{ slug: "ok" }, "body.name"],
      [{ name: "n" }, "body.slug"],
      [{ slug: "ok", name: "n", environments: [] }, "body.environments"],
      [{ slug: "ok", name: "n", environments: [{ slug: "Bad", name: "B" }] }, "body.environments[0].slug"],
      [{ slug: "ok", name: "n", environments: [{ slug: "e", name: "E", extra: 1 }] }, "body.environments[0].extra"],
      [{ slug: "ok", name: "n", colour: "red" }, "body.colour"],
    ];
    for (const [input, path] of cases) {
      const body = await json(await create(input), 400);
      expect(body.error).toBe("VALIDATION_ERROR");
      expect(body.details.map((d: any) => d.path)).toContain(path);
    }
    // Edges that pass: 64-character slug, 200-character name.
    await json(await create({ slug: "a".repeat(64), name: "n".repeat(200) }), 201);
    expect((await json(await h.request("GET", "/v1/projects", { headers: admin }), 200)).projects.length).toBe(2);
  });

  test("list: ordered by slug; admin key and JWT see all, an API key only its own", async () => {
    await json(await create({ slug: "zeta", name: "Z" }), 201);
    await json(await create({ slug: "alpha", name: "A" }), 201);
    const all = await json(await h.request("GET", "/v1/projects", { headers: admin }), 200);
    expect(all.projects.map((p: any) => p.slug)).toEqual(["alpha", "default", "zeta"]);
    expect(all.projects[1].environments.map((e: any) => e.slug)).toEqual(["development", "staging", "production"]);
    const viewer = await json(await h.request("GET", "/v1/projects", { headers: await userToken(h.ctx, "viewer") }), 200);
    expect(viewer.projects.map((p: any) => p.slug)).toEqual(["alpha", "default", "zeta"]);
    const key = await seedApiKey(h.ctx, "mgmt", "zeta", "staging");
    const own = await json(await h.request("GET", "/v1/projects", { headers: bearer(key.secret) }), 200);
    expect(own.projects.map((p: any) => p.slug)).toEqual(["zeta"]);
    expect(own.projects[0].environments).toHaveLength(3);
  });

  test("who may create: admin JWT yes; editor JWT, mgmt and full keys 403; no credential 401", async () => {
    await json(await create({ slug: "by-admin-user", name: "A" }, await userToken(h.ctx, "admin")), 201);
    expect((await json(await create({ slug: "by-editor", name: "E" }, await userToken(h.ctx, "editor")), 403)).error).toBe("FORBIDDEN");
    for (const scope of ["mgmt", "full"] as const) {
      const body = await json(await create({ slug: `by-${scope}`, name: "K" }, bearer((await seedApiKey(h.ctx, scope)).secret)), 403);
      expect(body).toEqual({
        error: "FORBIDDEN",
        message: "This key scope does not have access to this endpoint",
        details: [{ path: "headers.authorization", message: `This key has scope ${scope}; this endpoint takes no API key, only an admin key or a login token of role admin (POST /v1/auth/login)` }],
      });
    }
    expect((await json(await create({ slug: "anon", name: "N" }, {}), 401)).error).toBe("UNAUTHORIZED");
  });

  test("get: unknown 404; another project's slug with an API key 403 before any 404", async () => {
    const body = await json(await h.request("GET", "/v1/projects/nope", { headers: admin }), 404);
    expect(body.error).toBe("NOT_FOUND");
    const key = bearer((await seedApiKey(h.ctx, "full")).secret);
    await json(await create({ slug: "other", name: "O" }), 201);
    expect((await json(await h.request("GET", "/v1/projects/other", { headers: key }), 403)).message).toBe(
      "This key does not have access to this project",
    );
    expect((await json(await h.request("GET", "/v1/projects/nope", { headers: key }), 403)).error).toBe("FORBIDDEN");
    expect((await json(await h.request("GET", "/v1/projects/default", { headers: key }), 200)).slug).toBe("default");
  });

  test("an eval key on GET /v1/projects: 403 with the scope message", async () => {
    const key = bearer((await seedApiKey(h.ctx, "eval")).secret);
    expect(await json(await h.request("GET", "/v1/projects", { headers: key }), 403)).toEqual({
      error: "FORBIDDEN",
      message: "This key scope does not have access to this endpoint",
      details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope mgmt or full" }],
    });
  });

  test("patch: renames, moves updatedAt, slug immutable, unknown fields 400, unknown project 404", async () => {
    const before = await json(await create({ slug: "ren", name: "Old" }), 201);
    h.clock.advance(5_000);
    const after = await json(await h.request("PATCH", "/v1/projects/ren", { body: { name: "New" }, headers: admin }), 200);
    expect(after).toEqual({ ...before, name: "New", updatedAt: "2026-11-22T10:00:05.000Z" });
    expect((await json(await h.request("GET", "/v1/projects/ren", { headers: admin }), 200)).name).toBe("New");

    const slug = await json(await h.request("PATCH", "/v1/projects/ren", { body: { slug: "other" }, headers: admin }), 400);
    expect(slug.details).toEqual([{ path: "body.slug", message: "Unknown field" }]);
    const bad = await json(await h.request("PATCH", "/v1/projects/ren", { body: { name: "" }, headers: admin }), 400);
    expect(bad.details[0].path).toBe("body.name");
    expect((await json(await h.request("GET", "/v1/projects/ren", { headers: admin }), 200)).name).toBe("New");

    const same = await json(await h.request("PATCH", "/v1/projects/ren", { body: {}, headers: admin }), 200);
    expect(same.updatedAt).toBe("2026-11-22T10:00:05.000Z");
    expect((await json(await h.request("PATCH", "/v1/projects/gone", { body: { name: "x" }, headers: admin }), 404)).error).toBe("NOT_FOUND");
  });

  test("patch by role: editor JWT 403, mgmt key of the project 200", async () => {
    expect((await h.request("PATCH", "/v1/projects/default", { body: { name: "E" }, headers: await userToken(h.ctx, "editor") })).status).toBe(403);
    const key = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    expect((await json(await h.request("PATCH", "/v1/projects/default", { body: { name: "M" }, headers: key }), 200)).name).toBe("M");
  });

  test("delete: 204, then 404; its keys become 401 at once; other projects untouched", async () => {
    await json(await create({ slug: "doomed", name: "D" }), 201);
    const key = await seedApiKey(h.ctx, "mgmt", "doomed", "production");
    const survivor = await seedApiKey(h.ctx, "mgmt", "default");
    expect((await h.request("GET", "/v1/projects", { headers: bearer(key.secret) })).status).toBe(200);

    const res = await h.request("DELETE", "/v1/projects/doomed", { headers: admin });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await json(await h.request("GET", "/v1/projects/doomed", { headers: admin }), 404)).error).toBe("NOT_FOUND");
    expect(await json(await h.request("GET", "/v1/projects", { headers: bearer(key.secret) }), 401)).toEqual({
      error: "UNAUTHORIZED",
      message: "Invalid or expired API key",
    });
    expect((await h.request("GET", "/v1/projects", { headers: bearer(survivor.secret) })).status).toBe(200);
    const rows = (await rawRows(h.ctx, "SELECT (SELECT count(*) FROM environments e JOIN projects p ON p.id = e.project_id WHERE p.slug = 'doomed') AS envs, (SELECT count(*) FROM api_keys WHERE id = ?) AS keys", [key.id]))[0] as any;
    expect({ envs: Number(rows.envs), keys: Number(rows.keys) }).toEqual({ envs: 0, keys: 0 }); // bigint on PostgreSQL: text
    expect((await h.request("DELETE", "/v1/projects/doomed", { headers: admin })).status).toBe(404);
  });

  test("delete takes no body: a field is 400 and deletes nothing; {} or nothing deletes", async () => {
    await json(await create({ slug: "kept", name: "K" }), 201);
    const refused = await json(await h.request("DELETE", "/v1/projects/kept", { headers: admin, body: { cascade: false, x: 1 } }), 400);
    expect(refused).toEqual({
      error: "VALIDATION_ERROR",
      message: "Invalid request",
      details: [{ path: "body.cascade", message: "Unknown field" }, { path: "body.x", message: "Unknown field" }],
    });
    expect((await h.request("GET", "/v1/projects/kept", { headers: admin })).status).toBe(200);
    expect((await h.request("DELETE", "/v1/projects/kept", { headers: admin, body: {} })).status).toBe(204);
    await json(await create({ slug: "kept", name: "K" }), 201);
    expect((await h.request("DELETE", "/v1/projects/kept", { headers: admin, body: "" })).status).toBe(204);
  });

  test("a mgmt key may delete its own project, not another one", async () => {
    await json(await create({ slug: "mine", name: "M" }), 201);
    const key = bearer((await seedApiKey(h.ctx, "mgmt", "mine")).secret);
    expect((await h.request("DELETE", "/v1/projects/default", { headers: key })).status).toBe(403);
    expect((await h.request("GET", "/v1/projects/default", { headers: admin })).status).toBe(200);
    expect((await h.request("DELETE", "/v1/projects/mine", { headers: key })).status).toBe(204);
    expect((await h.request("GET", "/v1/projects", { headers: key })).status).toBe(401);
  });
});

describe("environments", () => {
  test("list: 200 { environments } in the order added", async () => {
    const body = await json(await h.request("GET", "/v1/projects/default/environments", { headers: admin }), 200);
    expect(Object.keys(body)).toEqual(["environments"]);
    expect(body.environments.map((e: any) => e.slug)).toEqual(["development", "staging", "production"]);
    expect((await json(await h.request("GET", "/v1/projects/nope/environments", { headers: admin }), 404)).error).toBe("NOT_FOUND");
  });

  test("create: 201 environment; duplicate 409; validation 400; unknown project 404", async () => {
    const env = await json(await h.request("POST", "/v1/projects/default/environments", { body: { slug: "qa", name: "QA" }, headers: admin }), 201);
    expect(Object.keys(env).sort()).toEqual(["createdAt", "id", "name", "slug"]);
    expect(env).toMatchObject({ slug: "qa", name: "QA", createdAt: "2026-11-22T10:00:00.000Z" });
    expect(env.id).toMatch(/^env_/);
    const listed = await json(await h.request("GET", "/v1/projects/default/environments", { headers: admin }), 200);
    expect(listed.environments.at(-1)).toEqual(env);
    const project = await json(await h.request("GET", "/v1/projects/default", { headers: admin }), 200);
    expect(project.environments.map((e: any) => e.slug)).toEqual(["development", "staging", "production", "qa"]);

    const dup = await json(await h.request("POST", "/v1/projects/default/environments", { body: { slug: "qa", name: "Again" }, headers: admin }), 409);
    expect(dup.error).toBe("CONFLICT");
    const bad = await json(await h.request("POST", "/v1/projects/default/environments", { body: { slug: "Q A", name: "" }, headers: admin }), 400);
    expect(bad.details.map((d: any) => d.path).sort()).toEqual(["body.name", "body.slug"]);
    const extra = await json(await h.request("POST", "/v1/projects/default/environments", { body: { slug: "x", name: "X", id: "env_1" }, headers: admin }), 400);
    expect(extra.details).toEqual([{ path: "body.id", message: "Unknown field" }]);
    expect((await h.request("POST", "/v1/projects/nope/environments", { body: { slug: "x", name: "X" }, headers: admin })).status).toBe(404);
    // The same slug in another project is fine.
    await json(await create({ slug: "other", name: "O" }), 201);
    await json(await h.request("POST", "/v1/projects/other/environments", { body: { slug: "qa", name: "QA" }, headers: admin }), 201);
  });

  test("access: mgmt key on its own project yes, another project 403, eval key 403, viewer reads only", async () => {
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    await json(await h.request("POST", "/v1/projects/default/environments", { body: { slug: "qa", name: "QA" }, headers: mgmt }), 201);
    await json(await create({ slug: "other", name: "O" }), 201);
    expect((await h.request("GET", "/v1/projects/other/environments", { headers: mgmt })).status).toBe(403);
    expect((await h.request("GET", "/v1/projects/default/environments", { headers: bearer((await seedApiKey(h.ctx, "eval")).secret) })).status).toBe(403);
    const viewer = await userToken(h.ctx, "viewer");
    expect((await h.request("GET", "/v1/projects/default/environments", { headers: viewer })).status).toBe(200);
    expect((await h.request("POST", "/v1/projects/default/environments", { body: { slug: "v", name: "V" }, headers: viewer })).status).toBe(403);
  });

  test("delete: 204; keys bound to it 401 at once, others keep working; unknown 404", async () => {
    const bound = await seedApiKey(h.ctx, "mgmt", "default", "staging");
    const other = await seedApiKey(h.ctx, "mgmt", "default", "production");
    expect((await h.request("GET", "/v1/projects", { headers: bearer(bound.secret) })).status).toBe(200);
    const res = await h.request("DELETE", "/v1/projects/default/environments/staging", { headers: admin });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await h.request("GET", "/v1/projects", { headers: bearer(bound.secret) })).status).toBe(401);
    expect((await h.request("GET", "/v1/projects", { headers: bearer(other.secret) })).status).toBe(200);
    const envs = await json(await h.request("GET", "/v1/projects/default/environments", { headers: admin }), 200);
    expect(envs.environments.map((e: any) => e.slug)).toEqual(["development", "production"]);
    expect((await json(await h.request("DELETE", "/v1/projects/default/environments/staging", { headers: admin }), 404)).error).toBe("NOT_FOUND");
    expect((await h.request("DELETE", "/v1/projects/nope/environments/staging", { headers: admin })).status).toBe(404);
  });

  test("the last environment of a project cannot be deleted: 409", async () => {
    await json(await create({ slug: "solo", name: "S", environments: [{ slug: "only", name: "Only" }] }), 201);
    const body = await json(await h.request("DELETE", "/v1/projects/solo/environments/only", { headers: admin }), 409);
    expect(body.error).toBe("CONFLICT");
    const envs = await json(await h.request("GET", "/v1/projects/solo/environments", { headers: admin }), 200);
    expect(envs.environments.map((e: any) => e.slug)).toEqual(["only"]);
  });
});

describe("OpenAPI", () => {
  test("the project routes are documented with tags and response schemas", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
    const post = doc.paths["/v1/projects"].post;
    expect(post.tags).toEqual(["Projects"]);
    expect(post.description).toContain("development, staging and production");
    expect(post.responses["201"]).toBeDefined();
    expect(doc.paths["/v1/projects/{slug}/environments/{environment}"].delete.responses["204"]).toBeDefined();
  });
});
