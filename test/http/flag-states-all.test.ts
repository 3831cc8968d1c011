/**
 * GET /v1/projects/{slug}/flags/{key}/states: a flag's state in every environment of its project
 * in one call (issue 20), and the flags list with every listed flag's states
 * (`?include=states`, issue 33: the console's list in one request), through app.handle over a real database.
 */
import { afterEach, beforeEach, describe, expect, spyOn, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
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
    const allowed = [bearer((await seedApiKey(h.ctx, "mgmt")).secret), bearer((await seedApiKey(h.ctx, "full")).secret), await userToken(h.ctx, "viewer"), await userToken(h.ctx, "editor")];
    for (const headers of allowed) expect((await json(await get(path, headers), 200)).states).toHaveLength(3);
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

describe("the flags list with include=states", () => {
  test("each item holds exactly what GET .../flags/{key}/states answers, lastEvaluatedAt included", async () => {
    for (const key of ["alpha", "beta", "gamma"]) await createFlag(key);
    h.clock.advance(60_000);
    await json(await putState("alpha", "production", { enabled: true, rolloutPercentage: 30 }), 200);
    await json(await putState("beta", "staging", { enabled: true }), 200);
    const evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
    await json(await h.request("POST", "/v1/evaluate", { body: { flagKey: "alpha", context: { userId: "u1" } }, headers: evalKey }), 200);
    const list = await json(await get(`${BASE}?include=states`), 200);
    expect(list.flags.map((f: { key: string }) => f.key)).toEqual(["alpha", "beta", "gamma"]);
    for (const item of list.flags) {
      const { states, ...rest } = item;
      const single = (await json(await get(`${BASE}/${item.key}/states`), 200)).states;
      expect(states.map(({ etag: _, ...s }: { etag: string }) => s)).toEqual(single);
      // Each with its ETag, as the single GET answers it in the header.
      for (const s of states) expect(s.etag).toBe((await get(`${BASE}/${item.key}/states/${s.environment}`)).headers.get("etag"));
      expect(Object.keys(rest)).toEqual(["id", "key", "name", "createdAt", "updatedAt", "stale"]);
    }
    expect(list.flags[0].states[2]).toMatchObject({ environment: "production", enabled: true, rolloutPercentage: 30, lastEvaluatedAt: "2026-11-22T10:01:00.000Z" });
    // Flushed evaluations are read back the same way.
    h.ctx.insightsFlusher.flush();
    expect((await json(await get(`${BASE}?include=states`), 200)).flags[0].states[2].lastEvaluatedAt).toBe("2026-11-22T10:01:00.000Z");
  });

  test("read for the whole page at once: no per-flag state read, whatever the page size", async () => {
    for (let i = 0; i < 12; i++) await createFlag(`f-${String(i).padStart(2, "0")}`);
    await json(await putState("f-03", "production", { enabled: true }), 200);
    const perFlag = spyOn(h.ctx.stores.flags, "state");
    const perPage = spyOn(h.ctx.stores.flags, "statesOf");
    const list = await json(await get(`${BASE}?include=states&perPage=10&page=1`), 200);
    expect(list.flags).toHaveLength(10);
    expect(list.flags[3].states[2]).toMatchObject({ flagKey: "f-03", environment: "production", enabled: true });
    expect(perFlag).toHaveBeenCalledTimes(0);
    expect(perPage).toHaveBeenCalledTimes(1);
    expect(perPage.mock.calls[0]![0]).toHaveLength(10);
    // With the other filters and paging: only the page's flags.
    const second = await json(await get(`${BASE}?include=states&perPage=10&page=2&q=f-1`), 200);
    expect(second).toMatchObject({ total: 2, page: 2, flags: [] });
    const filtered = await json(await get(`${BASE}?include=states&environment=production&enabled=true`), 200);
    expect(filtered.flags.map((f: { key: string; states: unknown[] }) => [f.key, f.states.length])).toEqual([["f-03", 3]]);
  });

  test("a state's etag is what a PUT sends as If-Match: 412 once someone else changed it", async () => {
    await createFlag("alpha");
    const loaded = (await json(await get(`${BASE}?include=states`), 200)).flags[0].states[2];
    await json(await putState("alpha", "production", { enabled: true }), 200);
    const res = await h.request("PUT", `${BASE}/alpha/states/production`, { body: { enabled: false }, headers: { ...admin, "if-match": loaded.etag } });
    expect((await json(res, 412)).error).toBe("PRECONDITION_FAILED");
    const fresh = (await json(await get(`${BASE}?include=states`), 200)).flags[0].states[2];
    await json(await h.request("PUT", `${BASE}/alpha/states/production`, { body: { enabled: false }, headers: { ...admin, "if-match": fresh.etag } }), 200);
  });

  test("without it the answer is byte for byte as before; another value is a 400", async () => {
    await createFlag("alpha");
    await json(await putState("alpha", "production", { enabled: true }), 200);
    const text = await (await get(BASE)).text();
    expect(JSON.parse(text).flags[0]).not.toHaveProperty("states");
    expect(text).toBe(JSON.stringify(JSON.parse(text)));
    const withStates = JSON.parse(await (await get(`${BASE}?include=states`)).text());
    for (const f of withStates.flags) delete f.states;
    expect(JSON.stringify(withStates)).toBe(text);
    expect((await json(await get(`${BASE}?include=everything`), 400)).details).toEqual([{ path: "query.include", message: "Must be states" }]);
  });

  test("same access as the list: every role, mgmt and full keys", async () => {
    await createFlag("alpha");
    for (const headers of [await userToken(h.ctx, "viewer"), bearer((await seedApiKey(h.ctx, "mgmt")).secret)]) {
      expect((await json(await get(`${BASE}?include=states`, headers), 200)).flags[0].states).toHaveLength(3);
    }
    expect((await json(await get(`${BASE}?include=states`, bearer((await seedApiKey(h.ctx, "eval")).secret)), 403)).error).toBe("FORBIDDEN");
  });

  test("the API document describes the option and the items' states", async () => {
    const doc = await json(await get("/v1/openapi.json"), 200);
    const op = doc.paths["/v1/projects/{slug}/flags"].get;
    expect(op.description).toContain("include=states");
    expect(op.parameters.map((p: { name: string }) => p.name)).toContain("include");
  });
});
