/**
 * GET /v1/projects/{slug}/flags?include=states: the list with each flag's state in every
 * environment (the console's list in one request), through app.handle over a real database.
 */
import { afterEach, beforeEach, describe, expect, spyOn, test } from "bun:test";
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
const createFlag = async (key: string) => json(await h.request("POST", BASE, { body: { key, name: key }, headers: admin }), 201);

describe("the flags list with include=states", () => {
  test("each item holds exactly what GET .../flags/{key}/states answers, lastEvaluatedAt included", async () => {
    for (const key of ["alpha", "beta", "gamma"]) await createFlag(key);
    h.clock.advance(60_000);
    await json(await putState("alpha", "production", { enabled: true, rolloutPercentage: 30 }), 200);
    await json(await putState("beta", "staging", { enabled: true }), 200);
    const evalKey = bearer(seedApiKey(h.ctx, "eval", "default", "production").secret);
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
    for (const headers of [await userToken(h.ctx, "viewer"), bearer(seedApiKey(h.ctx, "mgmt").secret)]) {
      expect((await json(await get(`${BASE}?include=states`, headers), 200)).flags[0].states).toHaveLength(3);
    }
    expect((await json(await get(`${BASE}?include=states`, bearer(seedApiKey(h.ctx, "eval").secret)), 403)).error).toBe("FORBIDDEN");
  });

  test("the API document describes the option and the items' states", async () => {
    const doc = await json(await get("/v1/openapi.json"), 200);
    const op = doc.paths["/v1/projects/{slug}/flags"].get;
    expect(op.description).toContain("include=states");
    expect(op.parameters.map((p: { name: string }) => p.name)).toContain("include");
  });
});
