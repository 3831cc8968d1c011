/**
 * Segments through the API (issue 31 part 1, docs/targeting.md Segments): every endpoint and its
 * errors, the 10,000-id lists, in_segment/not_in_segment in flag rules (write-time checks, the
 * 409 of a used segment naming its flags), change-log entries, and a segment change reaching
 * evaluation at once.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { projects } from "../../src/db/schema";
import { evaluate as engineEvaluate } from "../../src/evaluation/engine";
import { loadSnapshot } from "../../src/modules/flags/snapshot";
import { bearer, entriesAfter, ISO_TIMESTAMP, json, lastPosition, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, tableRows, sqliteOnly } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
});
afterEach(() => h.close());

const BASE = "/v1/projects/default/segments";
const FLAGS = "/v1/projects/default/flags";
const create = (body: Record<string, unknown>, headers = admin) => h.request("POST", BASE, { body: { name: String(body.key), conditions: [], ...body }, headers });
const patch = (key: string, body: unknown, headers = admin) => h.request("PATCH", `${BASE}/${key}`, { body, headers });
const del = (key: string, headers = admin) => h.request("DELETE", `${BASE}/${key}`, { headers });
const get = (path: string, headers = admin) => h.request("GET", path, { headers });
const createFlag = (body: Record<string, unknown>) => h.request("POST", FLAGS, { body: { name: String(body.key), ...body }, headers: admin });
const inSegment = (key: string, operator = "in_segment") => ({ conditions: [{ attribute: "userId", operator, value: key }] });
const evaluate = async (flagKey: string, context: Record<string, unknown>) =>
  json(await h.request("POST", "/v1/evaluate", { body: { flagKey, context }, headers: evalKey }), 200);
const enable = async (key: string) => json(await h.request("PUT", `${FLAGS}/${key}/states/development`, { body: { enabled: true }, headers: admin }), 200);

const PRO = { attribute: "plan", operator: "equals", value: "pro" };

async function dump(): Promise<string> {
  return JSON.stringify([await tableRows(h.ctx, "segments"), await tableRows(h.ctx, "flags")]);
}

describe("create, read, list", () => {
  test("201 with the whole segment; GET answers the same; lists default to empty; duplicates dropped", async () => {
    const seg = await json(await create({ key: "beta-users", name: "Beta users", description: "Early", conditions: [PRO], included: ["u1", "u2", "u1"], excluded: ["u3"] }), 201);
    expect(seg).toEqual({
      id: expect.stringMatching(/^seg_[A-Za-z0-9]{22}$/),
      key: "beta-users",
      name: "Beta users",
      description: "Early",
      conditions: [PRO],
      included: ["u1", "u2"],
      excluded: ["u3"],
      createdAt: expect.stringMatching(ISO_TIMESTAMP),
      updatedAt: seg.createdAt,
    });
    expect(Object.keys(seg)).toEqual(["id", "key", "name", "description", "conditions", "included", "excluded", "createdAt", "updatedAt"]);
    expect(await json(await get(`${BASE}/beta-users`), 200)).toEqual(seg);
    const bare = await json(await create({ key: "bare" }), 201);
    expect(bare).not.toHaveProperty("description");
    expect(bare).toMatchObject({ conditions: [], included: [], excluded: [] });
  });

  test("a taken key is 409; unknown project or segment 404; bad keys and fields 400", async () => {
    await json(await create({ key: "s" }), 201);
    expect((await json(await create({ key: "s" }), 409)).error).toBe("CONFLICT");
    expect((await json(await get(`${BASE}/nope`), 404)).error).toBe("NOT_FOUND");
    expect((await json(await get("/v1/projects/nope/segments"), 404)).error).toBe("NOT_FOUND");
    expect((await json(await h.request("POST", "/v1/projects/nope/segments", { body: { key: "s", name: "S", conditions: [] }, headers: admin }), 404)).error).toBe("NOT_FOUND");
    const bad = await json(await create({ key: "Not Kebab", name: "" }), 400);
    expect(bad.details.map((d: { path: string }) => d.path).sort()).toEqual(["body.key", "body.name"]);
    expect((await json(await h.request("POST", BASE, { body: { key: "x", name: "X" }, headers: admin }), 400)).details[0].path).toBe("body.conditions");
    expect((await json(await create({ key: "x", color: "red" }), 400)).details[0].path).toBe("body.color");
    expect((await json(await create({ key: "x", included: [""] }), 400)).details[0].path).toMatch(/^body\.included/);
  });

  test("conditions are validated as a flag rule's; a segment cannot name a segment", async () => {
    const before = await dump();
    const res = await json(
      await create({
        key: "x",
        conditions: [
          { attribute: "age", operator: "greater_than", value: "18" },
          { attribute: "v", operator: "semver_equals", value: "1.2" },
          { attribute: "userId", operator: "in_segment", value: "x" },
          { attribute: "plan", operator: "equals" },
        ],
      }),
      400,
    );
    expect(res.details).toEqual([
      { path: "body.conditions[0].value", message: "greater_than takes number, not string" },
      { path: "body.conditions[1].value", message: expect.stringContaining("semantic version") },
      { path: "body.conditions[2].operator", message: "in_segment is not allowed in a segment's conditions: a segment cannot name another segment" },
      { path: "body.conditions[3].value", message: "Required for equals" },
    ]);
    expect((await json(await create({ key: "x", conditions: [{ attribute: "userId", operator: "nope", value: 1 }] }), 400)).details[0].path).toBe("body.conditions[0].operator");
    expect(await dump()).toBe(before);
  });

  test("10,000 user ids in each list are taken; 10,001 are a 400", async () => {
    const ids = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}`);
    const seg = await json(await create({ key: "big", included: ids(10_000, "in-"), excluded: ids(10_000, "ex-") }), 201);
    expect(seg.included).toHaveLength(10_000);
    expect(seg.excluded).toHaveLength(10_000);
    expect((await json(await get(`${BASE}/big`), 200)).included).toHaveLength(10_000);
    for (const field of ["included", "excluded"]) {
      const res = await json(await create({ key: "too-big", [field]: ids(10_001, "x") }), 400);
      expect(res.details).toEqual([{ path: `body.${field}`, message: "Must be an array of at most 10000 user ids of 1 to 256 characters" }]);
      expect((await json(await patch("big", { [field]: ids(10_001, "x") }), 400)).details[0].path).toBe(`body.${field}`);
    }
    expect((await get(`${BASE}/too-big`)).status).toBe(404);
  });

  test("the list: ordered by key, items as flags' are, q, pages", async () => {
    for (const key of ["c-seg", "a-seg", "b-seg"]) await json(await create({ key, name: key.toUpperCase() }), 201);
    const all = await json(await get(BASE), 200);
    expect(all).toMatchObject({ total: 3, page: 1, perPage: 20 });
    expect(all.segments.map((s: { key: string }) => s.key)).toEqual(["a-seg", "b-seg", "c-seg"]);
    expect(Object.keys(all.segments[0])).toEqual(["id", "key", "name", "createdAt", "updatedAt"]);
    expect((await json(await get(`${BASE}?q=B-S`), 200)).segments.map((s: { key: string }) => s.key)).toEqual(["b-seg"]);
    const page2 = await json(await get(`${BASE}?perPage=2&page=2`), 200);
    expect(page2).toMatchObject({ total: 3, page: 2, perPage: 2 });
    expect(page2.segments.map((s: { key: string }) => s.key)).toEqual(["c-seg"]);
    expect((await json(await get(`${BASE}?perPage=101`), 400)).details[0].path).toBe("query.perPage");
    expect((await json(await get(`${BASE}?page=0`), 400)).details[0].path).toBe("query.page");
  });
});

describe("update and delete", () => {
  test("PATCH replaces what it sends; key is immutable; a no-op leaves updatedAt", async () => {
    const seg = await json(await create({ key: "s", description: "d", conditions: [PRO], included: ["a"] }), 201);
    h.clock.advance(1000);
    const next = await json(await patch("s", { name: "New", description: null, included: ["b", "c"] }), 200);
    expect(next).toEqual({ ...seg, name: "New", description: undefined, included: ["b", "c"], updatedAt: expect.not.stringMatching(seg.updatedAt) });
    expect(next).not.toHaveProperty("description");
    h.clock.advance(1000);
    expect((await json(await patch("s", { name: "New" }), 200)).updatedAt).toBe(next.updatedAt);
    expect((await json(await patch("s", { key: "other" }), 400)).details).toEqual([{ path: "body.key", message: "The key of a segment cannot be changed" }]);
    expect((await json(await patch("nope", { name: "x" }), 404)).error).toBe("NOT_FOUND");
    expect((await json(await patch("s", { conditions: [{ attribute: "userId", operator: "not_in_segment", value: "s" }] }), 400)).details[0].path).toBe("body.conditions[0].operator");
  });

  test("DELETE: 204, then 404; a segment a rule uses (enabled or not) is 409 naming the flags", async () => {
    await json(await create({ key: "gone" }), 201);
    expect((await del("gone")).status).toBe(204);
    expect((await get(`${BASE}/gone`)).status).toBe(404);
    expect((await json(await del("gone"), 404)).error).toBe("NOT_FOUND");

    await json(await create({ key: "used" }), 201);
    const a = await json(await createFlag({ key: "flag-a", rules: [{ ...inSegment("used") }, { enabled: false, ...inSegment("used", "not_in_segment") }] }), 201);
    await json(await createFlag({ key: "flag-b", rules: [{ enabled: false, ...inSegment("used") }] }), 201);
    await json(await createFlag({ key: "flag-c", rules: [{ conditions: [PRO] }] }), 201);
    const before = await dump();
    const refused = await json(await del("used"), 409);
    expect(refused).toEqual({
      error: "CONFLICT",
      message: "Segment used is used by flags flag-a, flag-b: remove it from their rules first",
      details: [
        { path: "flags.flag-a", message: `Flag flag-a names segment used in rules ${a.rules[0].id}, ${a.rules[1].id}` },
        { path: "flags.flag-b", message: expect.stringMatching(/^Flag flag-b names segment used in rule rule_/) },
      ],
    });
    expect(await dump()).toBe(before);
    // Once no rule names it, it goes.
    await json(await h.request("PATCH", `${FLAGS}/flag-a`, { body: { rules: [] }, headers: admin }), 200);
    expect((await h.request("DELETE", `${FLAGS}/flag-b`, { headers: admin })).status).toBe(204);
    expect((await del("used")).status).toBe(204);
  });

  test("access: as flags (viewers read, editors write, an eval key is refused)", async () => {
    await json(await create({ key: "s" }), 201);
    const viewer = await userToken(h.ctx, "viewer");
    const editor = await userToken(h.ctx, "editor");
    expect((await get(`${BASE}/s`, viewer)).status).toBe(200);
    expect((await get(BASE, viewer)).status).toBe(200);
    expect((await patch("s", { name: "x" }, viewer)).status).toBe(403);
    expect((await del("s", viewer)).status).toBe(403);
    expect((await create({ key: "t" }, editor)).status).toBe(201);
    expect((await get(BASE, evalKey)).status).toBe(403);
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    expect((await create({ key: "u" }, mgmt)).status).toBe(201);
  });

  test("change-log entries of resource type segment: created, updated, deleted", async () => {
    const from = await lastPosition(h.ctx);
    const seg = await json(await create({ key: "s", included: ["a"] }), 201);
    await json(await patch("s", { included: ["b"] }), 200);
    expect((await del("s")).status).toBe(204);
    const rows = await entriesAfter(h.ctx, from);
    expect(rows.map((r) => [r.resource_type, r.resource_id, r.resource_key, r.action, r.project_slug])).toEqual([
      ["segment", seg.id, "s", "created", "default"],
      ["segment", seg.id, "s", "updated", "default"],
      ["segment", seg.id, "s", "deleted", "default"],
    ]);
    expect(JSON.parse(rows[1]!.changes)).toEqual({ included: { before: ["a"], after: ["b"] } });
    const audit = await json(await get("/v1/projects/default/audit-log?resourceType=segment"), 200);
    expect(audit.entries.map((e: { action: string }) => e.action)).toEqual(["deleted", "updated", "created"]);
  });
});

describe("in_segment and not_in_segment in flag rules", () => {
  test("write-time checks: an unknown segment key, an attribute other than userId, a non-string value: 400, nothing stored", async () => {
    await json(await create({ key: "known" }), 201);
    const before = await dump();
    const res = await json(
      await createFlag({
        key: "f",
        rules: [
          {
            conditions: [
              { attribute: "userId", operator: "in_segment", value: "unknown" },
              { attribute: "email", operator: "not_in_segment", value: "known" },
              { attribute: "userId", operator: "in_segment", value: ["known"] },
            ],
          },
        ],
      }),
      400,
    );
    expect(res.details).toEqual([
      { path: "body.rules[0].conditions[0].value", message: 'Unknown segment "unknown" in this project' },
      { path: "body.rules[0].conditions[1].attribute", message: "not_in_segment reads the user id: attribute must be userId" },
      { path: "body.rules[0].conditions[2].value", message: "in_segment takes string, not array" },
    ]);
    expect(await dump()).toBe(before);
    await json(await createFlag({ key: "f", rules: [inSegment("known")] }), 201);
    expect((await json(await h.request("PATCH", `${FLAGS}/f`, { body: { rules: [inSegment("other")] }, headers: admin }), 400)).details[0].path).toBe("body.rules[0].conditions[0].value");
    // Another project's segment is unknown here.
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    await json(await h.request("POST", "/v1/projects/other/segments", { body: { key: "theirs", name: "T", conditions: [] }, headers: admin }), 201);
    expect((await json(await createFlag({ key: "g", rules: [inSegment("theirs")] }), 400)).details[0].message).toBe('Unknown segment "theirs" in this project');
  });

  test("evaluation: members match in_segment; not_in_segment the others; a number userId in decimal form", async () => {
    await json(await create({ key: "beta", conditions: [PRO], included: ["vip", "42"], excluded: ["banned"] }), 201);
    await json(await createFlag({ key: "in", rules: [inSegment("beta")] }), 201);
    await json(await createFlag({ key: "out", rules: [inSegment("beta", "not_in_segment")] }), 201);
    await enable("in");
    await enable("out");
    const cases: [Record<string, unknown>, boolean][] = [
      [{ userId: "vip" }, true],
      [{ userId: 42 }, true],
      [{ userId: "banned", plan: "pro" }, false],
      [{ userId: "someone", plan: "pro" }, true],
      [{ userId: "someone", plan: "free" }, false],
      [{}, false],
    ];
    for (const [context, member] of cases) {
      expect([context, (await evaluate("in", context)).reason]).toEqual([context, member ? "TARGETING_RULE_MATCH" : "FLAG_ENABLED"]);
      expect([context, (await evaluate("out", context)).reason]).toEqual([context, member ? "FLAG_ENABLED" : "TARGETING_RULE_MATCH"]);
    }
  });

  sqliteOnly("a segment change reaches evaluation at once: the next request sees it (every flag that uses it)", async () => {
    await json(await create({ key: "beta" }), 201);
    await json(await createFlag({ key: "one", rules: [inSegment("beta")] }), 201);
    await json(await createFlag({ key: "two", variants: [{ key: "a" }, { key: "b" }], rules: [{ variant: "b", ...inSegment("beta") }] }), 201);
    await enable("one");
    await enable("two");
    expect(await evaluate("one", { userId: "u1" })).toMatchObject({ reason: "FLAG_ENABLED" });
    expect(await evaluate("two", { userId: "u1" })).toMatchObject({ variant: "a" });
    await json(await patch("beta", { included: ["u1"] }), 200);
    expect(await evaluate("one", { userId: "u1" })).toMatchObject({ reason: "TARGETING_RULE_MATCH" });
    expect(await evaluate("two", { userId: "u1" })).toMatchObject({ reason: "TARGETING_RULE_MATCH", variant: "b" });
    await json(await patch("beta", { excluded: ["u2"], conditions: [PRO] }), 200);
    expect(await evaluate("one", { userId: "u2", plan: "pro" })).toMatchObject({ reason: "FLAG_ENABLED" });
    expect(await evaluate("one", { userId: "u3", plan: "pro" })).toMatchObject({ reason: "TARGETING_RULE_MATCH" });
    // A flag changed after the segment compiles against it too.
    await json(await h.request("PATCH", `${FLAGS}/one`, { body: { rules: [inSegment("beta", "not_in_segment")] }, headers: admin }), 200);
    expect(await evaluate("one", { userId: "u1" })).toMatchObject({ reason: "FLAG_ENABLED" });
    expect(await evaluate("one", { userId: "u9" })).toMatchObject({ reason: "TARGETING_RULE_MATCH" });
    // A restart reads the snapshot whole: the segments with it.
    const fresh = await loadSnapshot(h.ctx.stores.flags);
    const envId = h.ctx.snapshot.environmentId(h.db.select().from(projects).all().find((p) => p.slug === "default")!.id, "development")!;
    for (const userId of ["u1", "u2", "u3", "u9"]) {
      for (const key of ["one", "two"]) {
        const entry = fresh.environment(envId)!.get(key)!;
        const live = h.ctx.snapshot.environment(envId)!.get(key)!;
        const context = { userId, plan: "pro" };
        expect(engineEvaluate(entry.flag, key, entry.state, context, "t")).toEqual(engineEvaluate(live.flag, key, live.state, context, "t"));
      }
    }
  });
});
