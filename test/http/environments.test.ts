/**
 * GET and PATCH /v1/projects/{slug}/environments/{environment}: one environment, and its rename
 * (issue 20), through app.handle over a real database.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, rawRows } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
});
afterEach(() => h.close());

const ENV = "/v1/projects/default/environments";
const get = (path: string, headers = admin) => h.request("GET", path, { headers });
const patch = (path: string, body: unknown, headers = admin) => h.request("PATCH", path, { body, headers });
/** The stored projects and environments, to show that a refused or empty write changed nothing. */
const rows = async () => JSON.stringify([(await rawRows(h.ctx, "SELECT * FROM projects ORDER BY id")), (await rawRows(h.ctx, "SELECT * FROM environments ORDER BY id"))]);

describe("GET an environment", () => {
  test("200 with the environment as the list shows it", async () => {
    const list = (await json(await get(ENV), 200)).environments;
    for (const env of list) expect(await json(await get(`${ENV}/${env.slug}`), 200)).toEqual(env);
    expect(Object.keys(list[2])).toEqual(["id", "slug", "name", "createdAt"]);
  });

  test("unknown environment or project: 404; a malformed slug: 400", async () => {
    expect(await json(await get(`${ENV}/qa`), 404)).toEqual({ error: "NOT_FOUND", message: "Environment qa in project default not found" });
    expect(await json(await get("/v1/projects/nope/environments/production"), 404)).toEqual({ error: "NOT_FOUND", message: "Project nope not found" });
    expect((await json(await get(`${ENV}/Prod_EU`), 400)).details).toEqual([{ path: "params.environment", message: expect.any(String) }]);
  });
});

describe("PATCH an environment (rename)", () => {
  test("renames: the GET, the list and the project show the new name; slug, id, createdAt and the project's updatedAt stay", async () => {
    const project = await json(await get("/v1/projects/default"), 200);
    const before = project.environments[2];
    h.clock.advance(60_000);
    const after = await json(await patch(`${ENV}/production`, { name: "Production EU" }), 200);
    expect(after).toEqual({ ...before, name: "Production EU" });
    expect(await json(await get(`${ENV}/production`), 200)).toEqual(after);
    expect((await json(await get(ENV), 200)).environments[2]).toEqual(after);
    const reread = await json(await get("/v1/projects/default"), 200);
    expect(reread).toEqual({ ...project, environments: [project.environments[0], project.environments[1], after] });
    expect(reread.updatedAt).toBe(project.updatedAt);
  });

  test("another project's environment of the same slug keeps its name", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    await json(await patch(`${ENV}/production`, { name: "Live" }), 200);
    expect((await json(await get("/v1/projects/other/environments/production"), 200)).name).toBe("Production");
  });

  test("keys, evaluation and flag states go on by slug after a rename", async () => {
    const evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
    await json(await h.request("POST", "/v1/projects/default/flags", { body: { key: "checkout", name: "Checkout" }, headers: admin }), 201);
    await json(await h.request("PUT", "/v1/projects/default/flags/checkout/states/production", { body: { enabled: true }, headers: admin }), 200);
    const evaluate = async () => json(await h.request("POST", "/v1/evaluate", { body: { flagKey: "checkout", context: { userId: "u1" } }, headers: evalKey }), 200);
    const result = await evaluate();
    expect(result).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
    await json(await patch(`${ENV}/production`, { name: "Live" }), 200);
    expect(await evaluate()).toEqual({ ...result, evaluatedAt: expect.any(String) });
    expect((await json(await get("/v1/projects/default/flags/checkout/states/production"), 200)).enabled).toBe(true);
    const { apiKeys } = await json(await get("/v1/projects/default/api-keys"), 200);
    expect(apiKeys.map((k: { environment: string }) => k.environment)).toEqual(["production"]);
  });

  test("an empty body or the same name changes nothing and answers the environment", async () => {
    const env = await json(await get(`${ENV}/staging`), 200);
    const stored = await rows();
    h.clock.advance(60_000);
    expect(await json(await patch(`${ENV}/staging`, {}), 200)).toEqual(env);
    expect(await json(await patch(`${ENV}/staging`, { name: env.name }), 200)).toEqual(env);
    expect((await rows())).toBe(stored);
  });

  test("the slug, other fields and bad names are 400; nothing is stored", async () => {
    const stored = await rows();
    const cases: [unknown, { path: string; message: string }[]][] = [
      [{ slug: "prod" }, [{ path: "body.slug", message: "The slug of an environment cannot be changed" }]],
      [{ name: "Prod", slug: "prod" }, [{ path: "body.slug", message: "The slug of an environment cannot be changed" }]],
      [{ name: "Prod", id: "env_x" }, [{ path: "body.id", message: "Unknown field" }]],
      [{ name: "" }, [{ path: "body.name", message: "Must be a string of 1 to 200 characters" }]],
      [{ name: "x".repeat(201) }, [{ path: "body.name", message: "Must be a string of 1 to 200 characters" }]],
      [{ name: 5 }, [{ path: "body.name", message: "Must be a string of 1 to 200 characters" }]],
      [{ name: null }, [{ path: "body.name", message: "Must be a string of 1 to 200 characters" }]],
    ];
    for (const [body, details] of cases) {
      const answer = await json(await patch(`${ENV}/production`, body), 400);
      expect({ body, answer }).toEqual({ body, answer: { error: "VALIDATION_ERROR", message: expect.any(String), details } });
    }
    for (const raw of ["{not json", "[1]", '"Prod"']) expect((await json(await patch(`${ENV}/production`, raw), 400)).error).toBe("VALIDATION_ERROR");
    expect((await rows())).toBe(stored);
    // 200 characters is the limit, as on create.
    expect((await json(await patch(`${ENV}/production`, { name: "x".repeat(200) }), 200)).name).toHaveLength(200);
  });

  test("unknown environment or project: 404, nothing stored", async () => {
    const stored = await rows();
    expect(await json(await patch(`${ENV}/qa`, { name: "QA" }), 404)).toEqual({ error: "NOT_FOUND", message: "Environment qa in project default not found" });
    expect((await json(await patch("/v1/projects/nope/environments/production", { name: "P" }), 404)).error).toBe("NOT_FOUND");
    expect((await rows())).toBe(stored);
  });
});

describe("access (group environments: read for GET, write for PATCH)", () => {
  test("GET: mgmt and full keys of the project, admin keys, every role; eval/test keys and other projects 403; no credential 401", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    const path = `${ENV}/production`;
    const readers = [bearer((await seedApiKey(h.ctx, "mgmt")).secret), bearer((await seedApiKey(h.ctx, "full")).secret), await userToken(h.ctx, "admin"), await userToken(h.ctx, "editor"), await userToken(h.ctx, "viewer")];
    for (const headers of readers) expect((await json(await get(path, headers), 200)).slug).toBe("production");
    for (const scope of ["eval", "test"] as const) {
      expect(await json(await get(path, bearer((await seedApiKey(h.ctx, scope)).secret)), 403)).toEqual({
        error: "FORBIDDEN",
        message: "This key scope does not have access to this endpoint",
        details: [{ path: "headers.authorization", message: `This key has scope ${scope}; this endpoint takes a key of scope mgmt or full` }],
      });
    }
    expect(await json(await get(path, bearer((await seedApiKey(h.ctx, "mgmt", "other")).secret)), 403)).toEqual({ error: "FORBIDDEN", message: "This key does not have access to this project" });
    expect((await json(await get(path, {}), 401)).error).toBe("UNAUTHORIZED");
  });

  test("PATCH: mgmt and full keys of the project, admin keys, admin JWTs; editors, viewers, eval/test keys, other projects 403 and change nothing", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    const path = `${ENV}/production`;
    const writers = [bearer((await seedApiKey(h.ctx, "mgmt")).secret), bearer((await seedApiKey(h.ctx, "full")).secret), admin, await userToken(h.ctx, "admin")];
    for (const [i, headers] of writers.entries()) expect((await json(await patch(path, { name: `Name ${i}` }, headers), 200)).name).toBe(`Name ${i}`);
    const stored = await rows();
    for (const role of ["editor", "viewer"] as const) {
      expect(await json(await patch(path, { name: "Nope" }, await userToken(h.ctx, role)), 403)).toEqual({ error: "FORBIDDEN", message: `The role ${role} does not have access to this endpoint` });
    }
    for (const scope of ["eval", "test"] as const) expect((await json(await patch(path, { name: "Nope" }, bearer((await seedApiKey(h.ctx, scope)).secret)), 403)).error).toBe("FORBIDDEN");
    expect((await json(await patch(path, { name: "Nope" }, bearer((await seedApiKey(h.ctx, "full", "other")).secret)), 403)).message).toBe("This key does not have access to this project");
    expect((await json(await patch(path, { name: "Nope" }, {}), 401)).error).toBe("UNAUTHORIZED");
    expect((await rows())).toBe(stored);
  });
});

test("the API document has both operations with their schemas", async () => {
  const doc = await json(await get("/v1/openapi.json"), 200);
  const ops = doc.paths["/v1/projects/{slug}/environments/{environment}"];
  for (const method of ["get", "patch", "delete"]) expect({ method, access: ops[method]["x-flagsvc-access"], tags: ops[method].tags }).toEqual({ method, access: "environments", tags: ["Environments"] });
  expect(ops.patch.requestBody.content["application/json"].schema).toMatchObject({ additionalProperties: false });
  expect(ops.patch.description).toContain("`updatedAt` stays");
  expect(ops.get.responses["200"]).toBeDefined();
});

describe("environment order (no rowid: an explicit seq column)", () => {
  test("the order given at creation, then the order added, survives a delete, in every answer that lists environments", async () => {
    // One clock instant: createdAt ties for all of them, and the slugs are not in order.
    const given = ["zeta", "alpha", "mid"];
    await json(await h.request("POST", "/v1/projects", { body: { slug: "ord", name: "Ord", environments: given.map((slug) => ({ slug, name: slug })) }, headers: admin }), 201);
    const add = (slug: string) => h.request("POST", "/v1/projects/ord/environments", { body: { slug, name: slug }, headers: admin });
    await json(await add("beta"), 201);
    expect((await h.request("DELETE", "/v1/projects/ord/environments/alpha", { headers: admin })).status).toBe(204);
    await json(await add("aaa"), 201);
    const expected = ["zeta", "mid", "beta", "aaa"];
    const slugs = (envs: { slug: string }[]) => envs.map((e) => e.slug);
    expect(slugs((await json(await get("/v1/projects/ord"), 200)).environments)).toEqual(expected);
    expect(slugs((await json(await get("/v1/projects/ord/environments"), 200)).environments)).toEqual(expected);
    const listed = (await json(await get("/v1/projects"), 200)).projects.find((p: { slug: string }) => p.slug === "ord");
    expect(slugs(listed.environments)).toEqual(expected);
    await json(await h.request("POST", "/v1/projects/ord/flags", { body: { key: "f", name: "F" }, headers: admin }), 201);
    const states = (await json(await get("/v1/projects/ord/flags/f/states"), 200)).states;
    expect(states.map((s: { environment: string }) => s.environment)).toEqual(expected);
  });
});
