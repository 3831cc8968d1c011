/**
 * GET /v1/projects/{slug}/flags/{key}/states: a flag's state in every environment of its project
 * in one call (issue 20), through app.handle over a real database.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(() => {
  h = testApp();
  admin = bearer(seedAdminKey(h.ctx));
});
afterEach(() => h.close());

const BASE = "/v1/projects/default/flags";
const get = (path: string, headers = admin) => h.request("GET", path, { headers });
const putState = (key: string, env: string, body: unknown) => h.request("PUT", `${BASE}/${key}/states/${env}`, { body, headers: admin });
const createFlag = async (key: string, slug = "default") => json(await h.request("POST", `/v1/projects/${slug}/flags`, { body: { key, name: key }, headers: admin }), 201);
const MINUTE = 60_000;

describe("the states of a flag in every environment", () => {
  test("one state per environment, each exactly as the single GET answers it, never-set ones included", async () => {
    const flag = await createFlag("checkout");
    h.clock.advance(MINUTE);
    await json(await putState("checkout", "production", { enabled: true, rolloutPercentage: 25 }), 200);
    h.clock.advance(MINUTE);
    await json(await putState("checkout", "staging", { enabled: false }), 200);
    const all = await json(await get(`${BASE}/checkout/states`), 200);
    expect(all).toEqual({
      flagKey: "checkout",
      states: [
        // lastEvaluatedAt (issue 32, docs/insights.md): never evaluated anywhere yet.
        { flagKey: "checkout", environment: "development", enabled: false, rolloutPercentage: null, updatedAt: flag.createdAt, lastEvaluatedAt: null },
        { flagKey: "checkout", environment: "staging", enabled: false, rolloutPercentage: null, updatedAt: "2026-11-22T10:02:00.000Z", lastEvaluatedAt: null },
        { flagKey: "checkout", environment: "production", enabled: true, rolloutPercentage: 25, updatedAt: "2026-11-22T10:01:00.000Z", lastEvaluatedAt: null },
      ],
    });
    for (const state of all.states) expect(await json(await get(`${BASE}/checkout/states/${state.environment}`), 200)).toEqual(state);
    // The flag object stays as the contract shapes it: no states in it (issue 32 adds its staleness).
    expect(Object.keys(await json(await get(`${BASE}/checkout`), 200))).toEqual(["id", "key", "name", "variants", "rules", "createdAt", "updatedAt", "stale"]);
  });

  test("in the order the environments were added, not by slug; added and deleted environments follow", async () => {
    await json(await h.request("POST", "/v1/projects", { body: { slug: "shop", name: "Shop", environments: [{ slug: "zeta", name: "Z" }, { slug: "alpha", name: "A" }] }, headers: admin }), 201);
    await createFlag("banner", "shop");
    const envs = async () => (await json(await get("/v1/projects/shop/flags/banner/states"), 200)).states.map((s: { environment: string }) => s.environment);
    expect(await envs()).toEqual(["zeta", "alpha"]);
    await json(await h.request("POST", "/v1/projects/shop/environments", { body: { slug: "beta", name: "B" }, headers: admin }), 201);
    expect(await envs()).toEqual(["zeta", "alpha", "beta"]);
    await json(await h.request("DELETE", "/v1/projects/shop/environments/zeta", { headers: admin }), 204);
    expect(await envs()).toEqual(["alpha", "beta"]);
    // Each project answers with its own environments.
    await createFlag("banner");
    expect((await json(await get(`${BASE}/banner/states`), 200)).states.map((s: { environment: string }) => s.environment)).toEqual(["development", "staging", "production"]);
  });

  test("unknown project or flag: 404 as the single GET; a malformed key or slug: 400", async () => {
    await createFlag("checkout");
    expect(await json(await get("/v1/projects/nope/flags/checkout/states"), 404)).toEqual({ error: "NOT_FOUND", message: "Project nope not found" });
    expect(await json(await get(`${BASE}/gone/states`), 404)).toEqual(await json(await get(`${BASE}/gone/states/production`), 404));
    expect((await json(await get(`${BASE}/gone/states`), 404)).error).toBe("NOT_FOUND");
    expect((await json(await get(`${BASE}/Not_A_Key/states`), 400)).details).toEqual([{ path: "params.key", message: expect.any(String) }]);
    expect((await json(await get("/v1/projects/Bad!/flags/checkout/states"), 400)).details).toEqual([{ path: "params.slug", message: expect.any(String) }]);
  });

  test("a deleted flag is 404 at once", async () => {
    await createFlag("doomed");
    await json(await get(`${BASE}/doomed/states`), 200);
    await json(await h.request("DELETE", `${BASE}/doomed`, { headers: admin }), 204);
    expect((await json(await get(`${BASE}/doomed/states`), 404)).error).toBe("NOT_FOUND");
  });

  test("access as the single GET: mgmt and full keys of the project, admin keys, every role; not eval/test keys, other projects or no credential", async () => {
    await createFlag("checkout");
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    const path = `${BASE}/checkout/states`;
    const allowed = [bearer(seedApiKey(h.ctx, "mgmt").secret), bearer(seedApiKey(h.ctx, "full").secret), await userToken(h.ctx, "viewer"), await userToken(h.ctx, "editor")];
    for (const headers of allowed) expect((await json(await get(path, headers), 200)).states).toHaveLength(3);
    for (const scope of ["eval", "test"] as const) {
      expect(await json(await get(path, bearer(seedApiKey(h.ctx, scope).secret)), 403)).toEqual({
        error: "FORBIDDEN",
        message: "This key scope does not have access to this endpoint",
        details: [{ path: "headers.authorization", message: `This key has scope ${scope}; this endpoint takes a key of scope mgmt or full` }],
      });
    }
    expect(await json(await get(path, bearer(seedApiKey(h.ctx, "mgmt", "other").secret)), 403)).toEqual({ error: "FORBIDDEN", message: "This key does not have access to this project" });
    expect((await json(await get(path, {}), 401)).error).toBe("UNAUTHORIZED");
  });

  test("the API document has the operation with its response schema", async () => {
    const doc = await json(await get("/v1/openapi.json"), 200);
    const op = doc.paths["/v1/projects/{slug}/flags/{key}/states"].get;
    expect(op["x-flagsvc-access"]).toBe("flags");
    expect(op.tags).toEqual(["Flags"]);
    expect(op.description).toContain("in the order the environments were added");
    const schema = op.responses["200"].content["application/json"].schema;
    const resolved = schema.$ref ? doc.components.schemas[schema.$ref.split("/").pop()] : schema;
    expect(Object.keys(resolved.properties)).toEqual(["flagKey", "states"]);
  });
});
