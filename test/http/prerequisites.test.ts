/**
 * Prerequisites through the API (issue 31 part 2, docs/targeting.md: Prerequisites): create and
 * PATCH validation (unknown flag, missing variant, cycle named, depth), a flag without them
 * answering as before, 409 on deleting a prerequisite, evaluation on /v1/evaluate, batch, OFREP,
 * test-session overrides, and the definitions payload.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
});
afterEach(() => h.close());

const BASE = "/v1/projects/default/flags";
const create = (body: Record<string, unknown>) => h.request("POST", BASE, { body: { name: String(body.key), ...body }, headers: admin });
const patch = (key: string, body: unknown) => h.request("PATCH", `${BASE}/${key}`, { body, headers: admin });
const enable = async (key: string, enabled = true, rolloutPercentage: number | null = null) =>
  json(await h.request("PUT", `${BASE}/${key}/states/development`, { body: { enabled, rolloutPercentage }, headers: admin }), 200);
const evaluate = async (flagKey: string, context: Record<string, unknown> = { userId: "u1" }, headers = evalKey) =>
  json(await h.request("POST", "/v1/evaluate", { body: { flagKey, context }, headers }), 200);

describe("writes", () => {
  test("stored as sent and answered; absent from a flag without them, byte for byte", async () => {
    const plain = await json(await create({ key: "plain" }), 201);
    expect(Object.keys(plain)).toEqual(["id", "key", "name", "variants", "rules", "createdAt", "updatedAt", "stale"]); // stale: issue 32
    const empty = await json(await create({ key: "empty", prerequisites: [] }), 201);
    expect("prerequisites" in empty).toBe(false);
    await json(await create({ key: "plan", variants: [{ key: "free" }, { key: "pro" }] }), 201);
    const dep = await json(await create({ key: "dep", prerequisites: [{ flagKey: "plain" }, { flagKey: "plan", variant: "pro" }] }), 201);
    expect(dep.prerequisites).toEqual([{ flagKey: "plain" }, { flagKey: "plan", variant: "pro" }]);
    expect(Object.keys(dep)).toEqual(["id", "key", "name", "variants", "rules", "prerequisites", "createdAt", "updatedAt", "stale"]); // stale: issue 32
    expect((await json(await h.request("GET", `${BASE}/dep`, { headers: admin }), 200)).prerequisites).toEqual(dep.prerequisites);
    // PATCH replaces; null and [] remove; a PATCH without them keeps them.
    expect((await json(await patch("dep", { name: "Dep" }), 200)).prerequisites).toEqual(dep.prerequisites);
    expect((await json(await patch("dep", { prerequisites: [{ flagKey: "plain" }] }), 200)).prerequisites).toEqual([{ flagKey: "plain" }]);
    expect("prerequisites" in (await json(await patch("dep", { prerequisites: null }), 200))).toBe(false);
    await json(await patch("dep", { prerequisites: [{ flagKey: "plain" }] }), 200);
    expect("prerequisites" in (await json(await patch("dep", { prerequisites: [] }), 200))).toBe(false);
  });

  test("refused: an unknown flag, the flag itself, a variant the flag does not have, duplicates; nothing stored", async () => {
    await json(await create({ key: "base" }), 201);
    await json(await create({ key: "plan", variants: [{ key: "free" }, { key: "pro" }] }), 201);
    const res = await json(
      await create({ key: "dep", prerequisites: [{ flagKey: "nope" }, { flagKey: "plan", variant: "gold" }, { flagKey: "base", variant: "on" }, { flagKey: "base" }] }),
      400,
    );
    expect(res.error).toBe("VALIDATION_ERROR");
    expect(res.details).toEqual([
      { path: "body.prerequisites[0].flagKey", message: "Unknown flag nope" },
      { path: "body.prerequisites[1].variant", message: "Flag plan has no variant gold; its variants are free, pro" },
      { path: "body.prerequisites[2].variant", message: "Flag base has no variants: omit variant" },
      { path: "body.prerequisites[3].flagKey", message: "Duplicate prerequisite base" },
    ]);
    await json(await h.request("GET", `${BASE}/dep`, { headers: admin }), 404);
    const self = await json(await create({ key: "me", prerequisites: [{ flagKey: "me" }] }), 400);
    expect(self.details).toEqual([{ path: "body.prerequisites[0].flagKey", message: "A flag cannot be its own prerequisite: me -> me" }]);
    await json(await create({ key: "me" }), 201);
    const selfPatch = await json(await patch("me", { prerequisites: [{ flagKey: "me" }] }), 400);
    expect(selfPatch.details).toEqual([{ path: "body.prerequisites[0].flagKey", message: "A flag cannot be its own prerequisite: me -> me" }]);
    const shape = await json(await create({ key: "bad", prerequisites: [{ flagKey: "Not A Key" }] }), 400);
    expect(shape.error).toBe("VALIDATION_ERROR");
  });

  test("a cycle is refused, the message names it", async () => {
    await json(await create({ key: "a" }), 201);
    await json(await create({ key: "b", prerequisites: [{ flagKey: "a" }] }), 201);
    const two = await json(await patch("a", { prerequisites: [{ flagKey: "b" }] }), 400);
    expect(two.details).toEqual([{ path: "body.prerequisites", message: "Prerequisites would form a cycle: a -> b -> a" }]);
    await json(await create({ key: "c", prerequisites: [{ flagKey: "b" }] }), 201);
    const three = await json(await patch("a", { prerequisites: [{ flagKey: "c" }] }), 400);
    expect(three.details).toEqual([{ path: "body.prerequisites", message: "Prerequisites would form a cycle: a -> c -> b -> a" }]);
    expect("prerequisites" in (await json(await h.request("GET", `${BASE}/a`, { headers: admin }), 200))).toBe(false);
  });

  test("depth over 10 is refused, counting the flags that depend on this one", async () => {
    // f10 <- f9 <- ... <- f0: a chain of 10 edges, accepted.
    await json(await create({ key: "f10" }), 201);
    for (let i = 9; i >= 0; i--) await json(await create({ key: `f${i}`, prerequisites: [{ flagKey: `f${i + 1}` }] }), 201);
    await json(await create({ key: "g" }), 201);
    // Below the end: f10 -> g makes f0's chain 11 deep.
    const below = await json(await patch("f10", { prerequisites: [{ flagKey: "g" }] }), 400);
    expect(below.details).toEqual([
      { path: "body.prerequisites", message: "Prerequisite chains are at most 10 deep; this one would be 11: f0 -> f1 -> f2 -> f3 -> f4 -> f5 -> f6 -> f7 -> f8 -> f9 -> f10 -> g" },
    ]);
    // Above the start.
    const above = await json(await create({ key: "top", prerequisites: [{ flagKey: "f0" }] }), 400);
    expect(above.details[0].message).toMatch(/^Prerequisite chains are at most 10 deep; this one would be 11: top -> f0 -> .* -> f10$/);
  });

  test("removing a variant another flag requires is refused at body.variants", async () => {
    await json(await create({ key: "plan", variants: [{ key: "free" }, { key: "pro" }] }), 201);
    await json(await create({ key: "dep", prerequisites: [{ flagKey: "plan", variant: "pro" }] }), 201);
    const res = await json(await patch("plan", { variants: [{ key: "free" }] }), 400);
    expect(res.details).toEqual([{ path: "body.variants", message: "Variant pro is required by flag dep's prerequisites: change that flag first" }]);
    await json(await patch("plan", { variants: [{ key: "free" }, { key: "pro", name: "Pro" }] }), 200);
  });

  test("deleting a prerequisite: 409 CONFLICT naming the dependants; after they drop it, deleted", async () => {
    await json(await create({ key: "base" }), 201);
    await json(await create({ key: "x", prerequisites: [{ flagKey: "base" }] }), 201);
    await json(await create({ key: "y", prerequisites: [{ flagKey: "base" }] }), 201);
    const res = await json(await h.request("DELETE", `${BASE}/base`, { headers: admin }), 409);
    expect(res).toEqual({
      error: "CONFLICT",
      message: "Flag base is a prerequisite of x, y: remove it from their prerequisites first",
      details: [
        { path: "flags.x.prerequisites", message: "Flag x has base as a prerequisite" },
        { path: "flags.y.prerequisites", message: "Flag y has base as a prerequisite" },
      ],
    });
    await json(await h.request("GET", `${BASE}/base`, { headers: admin }), 200);
    await json(await patch("x", { prerequisites: null }), 200);
    await h.request("DELETE", `${BASE}/y`, { headers: admin });
    expect((await h.request("DELETE", `${BASE}/base`, { headers: admin })).status).toBe(204);
  });
});

describe("evaluation", () => {
  beforeEach(async () => {
    await json(await create({ key: "base" }), 201);
    await json(await create({ key: "plan", variants: [{ key: "free" }, { key: "pro" }], rules: [{ conditions: [{ attribute: "tier", operator: "equals", value: "gold" }], variant: "pro" }] }), 201);
    await json(await create({ key: "dep", prerequisites: [{ flagKey: "base" }, { flagKey: "plan", variant: "pro" }] }), 201);
  });

  test("/v1/evaluate: FLAG_DISABLED first, then PREREQUISITE_FAILED until every prerequisite is met", async () => {
    expect(await evaluate("dep")).toMatchObject({ enabled: false, reason: "FLAG_DISABLED" });
    await enable("dep");
    expect(await evaluate("dep", { userId: "u1", tier: "gold" })).toEqual({
      flagKey: "dep",
      enabled: false,
      variant: null,
      reason: "PREREQUISITE_FAILED",
      ruleId: null,
      evaluatedAt: expect.any(String),
    });
    await enable("base");
    await enable("plan");
    expect(await evaluate("dep", { userId: "u1" })).toMatchObject({ enabled: false, reason: "PREREQUISITE_FAILED" });
    expect(await evaluate("dep", { userId: "u1", tier: "gold" })).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
    // A change of the prerequisite changes what the dependant evaluates to.
    await enable("base", false);
    expect(await evaluate("dep", { userId: "u1", tier: "gold" })).toMatchObject({ enabled: false, reason: "PREREQUISITE_FAILED" });
  });

  test("batch and OFREP (single and bulk) evaluate each flag on its own, with the same answer", async () => {
    await enable("dep");
    await enable("plan");
    const batch = await json(await h.request("POST", "/v1/evaluate/batch", { body: { flags: ["dep", "base", "plan"], context: { userId: "u1", tier: "gold" } }, headers: evalKey }), 200);
    expect(batch.results.dep).toMatchObject({ enabled: false, reason: "PREREQUISITE_FAILED" });
    expect(batch.results.base).toMatchObject({ enabled: false, reason: "FLAG_DISABLED" });
    expect(batch.results.plan).toMatchObject({ enabled: true, variant: "pro" });
    const single = await json(await h.request("POST", "/ofrep/v1/evaluate/flags/dep", { body: { context: { targetingKey: "u1", tier: "gold" } }, headers: evalKey }), 200);
    expect(single).toMatchObject({ key: "dep", value: false, reason: "TARGETING_MATCH", metadata: { reason: "PREREQUISITE_FAILED" } });
    await enable("base");
    const bulk = await json(await h.request("POST", "/ofrep/v1/evaluate/flags", { body: { context: { targetingKey: "u1", tier: "gold" } }, headers: evalKey }), 200);
    expect(bulk.flags.find((f: any) => f.key === "dep")).toMatchObject({ value: true, reason: "STATIC" });
  });

  test("without a user id: a prerequisite's rollout leaves it off, so PREREQUISITE_FAILED (OFREP: TARGETING_MATCH, no TARGETING_KEY_MISSING)", async () => {
    await enable("dep");
    await enable("plan");
    await enable("base", true, 50);
    expect(await evaluate("base", { tier: "gold" })).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
    expect(await evaluate("dep", { tier: "gold" })).toMatchObject({ enabled: false, variant: null, reason: "PREREQUISITE_FAILED" });
    const ofrep = await json(await h.request("POST", "/ofrep/v1/evaluate/flags/dep", { body: { context: { tier: "gold" } }, headers: evalKey }), 200);
    expect(ofrep).toMatchObject({ key: "dep", value: false, reason: "TARGETING_MATCH", metadata: { reason: "PREREQUISITE_FAILED" } });
    expect(ofrep.errorCode).toBeUndefined();
    // The flag's own rollout without a targeting key is the error, as before.
    const own = await h.request("POST", "/ofrep/v1/evaluate/flags/base", { body: { context: { tier: "gold" } }, headers: evalKey });
    expect((await json(own, 400)).errorCode).toBe("TARGETING_KEY_MISSING");
  });

  test("test-session overrides: on the dependant it wins; on a prerequisite it applies to that flag", async () => {
    const testKey = bearer((await seedApiKey(h.ctx, "test")).secret);
    const projectId = (await json(await h.request("GET", "/v1/projects/default", { headers: admin }), 200)).id;
    await enable("dep");
    const session = await json(await h.request("POST", "/v1/testing/sessions", { body: { projectId }, headers: testKey }), 201);
    const withSession = { ...evalKey, "x-service-session": session.token };
    await json(await h.request("PUT", `/v1/testing/sessions/${session.id}/overrides/base`, { body: { value: true }, headers: testKey }), 200);
    await json(await h.request("PUT", `/v1/testing/sessions/${session.id}/overrides/plan`, { body: { value: "pro" }, headers: testKey }), 200);
    expect(await evaluate("dep", { userId: "u1" }, withSession)).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
    expect(await evaluate("dep", { userId: "u1" })).toMatchObject({ enabled: false, reason: "PREREQUISITE_FAILED" });
    await json(await h.request("PUT", `/v1/testing/sessions/${session.id}/overrides/dep`, { body: { value: false }, headers: testKey }), 200);
    expect(await evaluate("dep", { userId: "u1" }, withSession)).toMatchObject({ enabled: false, reason: "TEST_OVERRIDE" });
  });

  test("the definitions payload carries prerequisites only on flags that have them", async () => {
    const server = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    const defs = await json(await h.request("GET", "/v1/definitions", { headers: server }), 200);
    const byKey = Object.fromEntries(defs.flags.map((f: any) => [f.key, f]));
    expect(Object.keys(byKey.base)).toEqual(["key", "variants", "rules", "state"]);
    expect(Object.keys(byKey.dep)).toEqual(["key", "variants", "rules", "prerequisites", "state"]);
    expect(byKey.dep.prerequisites).toEqual([{ flagKey: "base" }, { flagKey: "plan", variant: "pro" }]);
  });
});
