/**
 * The richer operators and `bucketBy` through the API (issue 31, docs/targeting.md): write-time
 * 400s for operands the engine cannot use, bucketBy on create and PATCH (absent from a flag that
 * buckets by userId), evaluation, the definitions payload and the change log.
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
const condition = (operator: string, value: unknown) => ({ key: "f", rules: [{ conditions: [{ attribute: "a", operator, value }] }] });
const evaluate = async (flagKey: string, context: Record<string, unknown>) =>
  json(await h.request("POST", "/v1/evaluate", { body: { flagKey, context }, headers: evalKey }), 200);
const PATH = "body.rules[0].conditions[0].value";

describe("write-time checks of the new operators' operands", () => {
  const cases: [string, unknown, string | RegExp][] = [
    ["greater_than_or_equal", "5", "greater_than_or_equal takes number, not string"],
    ["less_than_or_equal", true, "less_than_or_equal takes number, not boolean"],
    ["semver_equals", "1.2", 'semver_equals takes a semantic version such as 1.2.3 or 2.0.0-rc.1, not "1.2"'],
    ["semver_greater_than", "latest", /semantic version/],
    ["semver_less_than", 2, "semver_less_than takes string, not number"],
    ["matches", "(a", "Not a regular expression in RE2 syntax: error parsing regexp: missing closing ): `(a`"],
    ["matches", "(?<=a)b", /RE2 syntax: .*invalid named capture/],
    ["matches", "\\1", /RE2 syntax/],
    ["matches", 5, "matches takes string, not number"],
    ["before", "2026-01-01", 'before takes an ISO 8601 date-time with a zone, such as 2026-01-01T00:00:00Z, not "2026-01-01"'],
    ["before", "2026-01-01T00:00:00", /ISO 8601/],
    ["after", "2026-02-30T00:00:00Z", /ISO 8601/],
    ["after", 1767225600000, "after takes string, not number"],
  ];
  for (const [operator, value, message] of cases) {
    test(`${operator} ${JSON.stringify(value)}: 400 at the value, saying why; nothing stored`, async () => {
      const res = await json(await create(condition(operator, value)), 400);
      expect(res.error).toBe("VALIDATION_ERROR");
      expect(res.details).toContainEqual({ path: PATH, message: typeof message === "string" ? message : expect.stringMatching(message) });
      await json(await h.request("GET", `${BASE}/f`, { headers: admin }), 404);
    });
  }

  test("a PATCH is checked the same way", async () => {
    await json(await create({ key: "f" }), 201);
    const res = await json(await patch("f", { rules: [{ conditions: [{ attribute: "v", operator: "semver_less_than", value: "x.y" }] }] }), 400);
    expect(res.details).toEqual([{ path: PATH, message: 'semver_less_than takes a semantic version such as 1.2.3 or 2.0.0-rc.1, not "x.y"' }]);
  });

  test("valid operands are stored as sent and evaluate", async () => {
    const conditions = [
      { attribute: "age", operator: "greater_than_or_equal", value: 18 },
      { attribute: "age", operator: "less_than_or_equal", value: 65 },
      { attribute: "appVersion", operator: "semver_greater_than", value: "2.0.0-rc.1" },
      { attribute: "appVersion", operator: "semver_less_than", value: "3.0.0" },
      { attribute: "email", operator: "matches", value: "@example\\.com$" },
      { attribute: "signupAt", operator: "after", value: "2026-01-01T00:00:00+01:00" },
      { attribute: "signupAt", operator: "before", value: "2027-01-01T00:00:00Z" },
    ];
    const flag = await json(await create({ key: "f", rules: [{ conditions }, { conditions: [{ attribute: "v", operator: "semver_equals", value: "1.2.3" }] }] }), 201);
    expect(flag.rules[0].conditions).toEqual(conditions);
    await json(await h.request("PUT", `${BASE}/f/states/development`, { body: { enabled: true }, headers: admin }), 200);
    const ctx = { age: 18, appVersion: "2.0.0", email: "ann@example.com", signupAt: "2026-06-01T00:00:00Z" };
    expect(await evaluate("f", ctx)).toMatchObject({ reason: "TARGETING_RULE_MATCH", ruleId: flag.rules[0].id });
    expect(await evaluate("f", { ...ctx, signupAt: Date.parse("2025-12-31T23:00:00Z") })).toMatchObject({ reason: "FLAG_ENABLED" });
    expect(await evaluate("f", { ...ctx, appVersion: "3.0.0" })).toMatchObject({ reason: "FLAG_ENABLED" });
    expect(await evaluate("f", { v: "v1.2.3" })).toMatchObject({ reason: "TARGETING_RULE_MATCH", ruleId: flag.rules[1].id });
  });
});

describe("bucketBy", () => {
  test("absent by default, and when set to userId; shown when another attribute; PATCH null resets", async () => {
    const plain = await json(await create({ key: "plain" }), 201);
    expect(Object.keys(plain)).toEqual(["id", "key", "name", "variants", "rules", "createdAt", "updatedAt", "stale"]); // stale: issue 32
    const explicit = await json(await create({ key: "explicit", bucketBy: "userId" }), 201);
    expect("bucketBy" in explicit).toBe(false);
    const byAccount = await json(await create({ key: "by-account", bucketBy: "accountId" }), 201);
    expect(Object.keys(byAccount)).toEqual(["id", "key", "name", "variants", "rules", "bucketBy", "createdAt", "updatedAt", "stale"]); // stale: issue 32
    expect(byAccount.bucketBy).toBe("accountId");
    expect(await json(await h.request("GET", `${BASE}/by-account`, { headers: admin }), 200)).toEqual(byAccount);

    const reset = await json(await patch("by-account", { bucketBy: null }), 200);
    expect("bucketBy" in reset).toBe(false);
    const again = await json(await patch("by-account", { bucketBy: "orgId" }), 200);
    expect(again.bucketBy).toBe("orgId");
    expect("bucketBy" in (await json(await patch("by-account", { bucketBy: "userId" }), 200))).toBe(false);
    // A PATCH that does not name it keeps it.
    await json(await patch("by-account", { bucketBy: "orgId" }), 200);
    expect((await json(await patch("by-account", { name: "renamed" }), 200)).bucketBy).toBe("orgId");
  });

  test("an empty or non-string bucketBy: 400", async () => {
    for (const bucketBy of ["", 5, null]) {
      const res = await json(await create({ key: "f", bucketBy }), 400);
      expect(res.details).toEqual([{ path: "body.bucketBy", message: expect.any(String) }]);
    }
    await json(await create({ key: "f" }), 201);
    expect((await json(await patch("f", { bucketBy: "" }), 400)).details).toEqual([{ path: "body.bucketBy", message: expect.any(String) }]);
  });

  test("the change log records it; a flag without it records nothing new", async () => {
    await json(await create({ key: "f" }), 201);
    await json(await patch("f", { bucketBy: "accountId" }), 200);
    const body = await json(await h.request("GET", "/v1/audit-log?resourceType=flag", { headers: admin }), 200);
    const entries = (body.entries ?? body.items ?? body.data) as any[];
    const created = entries.find((e) => e.action === "created");
    const updated = entries.find((e) => e.action === "updated");
    expect("bucketBy" in created.changes).toBe(false);
    expect(updated.changes).toEqual({ bucketBy: { before: null, after: "accountId" } });
  });

  test("evaluation buckets by the attribute: two users of one account answer alike", async () => {
    await json(await create({ key: "by-account", bucketBy: "accountId", variants: [{ key: "a", weight: 50 }, { key: "b", weight: 50 }] }), 201);
    await json(await h.request("PUT", `${BASE}/by-account/states/development`, { body: { enabled: true, rolloutPercentage: 50 }, headers: admin }), 200);
    const kinds = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const one = await evaluate("by-account", { userId: `u${i}`, accountId: `acct-${i}` });
      const two = await evaluate("by-account", { userId: `v${i}`, accountId: `acct-${i}` });
      expect({ ...two, evaluatedAt: "" }).toEqual({ ...one, evaluatedAt: "" });
      kinds.add(`${one.reason}:${one.variant}`);
    }
    expect(kinds.size).toBe(3);
    // No account: as a missing userId (a rollout under 100 excludes).
    expect(await evaluate("by-account", { userId: "u1" })).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
  });

  test("the definitions payload carries it only when set", async () => {
    await json(await create({ key: "plain" }), 201);
    await json(await create({ key: "by-account", bucketBy: "accountId" }), 201);
    const server = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    const defs = await json(await h.request("GET", "/v1/definitions", { headers: server }), 200);
    const byKey = Object.fromEntries(defs.flags.map((f: any) => [f.key, f]));
    expect(Object.keys(byKey.plain)).toEqual(["key", "variants", "rules", "state"]);
    expect(Object.keys(byKey["by-account"])).toEqual(["key", "variants", "rules", "bucketBy", "state"]);
    expect(byKey["by-account"].bucketBy).toBe("accountId");
  });
});

test("the API document's flag routes list the new operators and bucketBy", async () => {
  const doc = await json(await h.request("GET", "/v1/openapi.json", { headers: admin }), 200);
  const NEW = ["greater_than_or_equal", "less_than_or_equal", "semver_equals", "semver_greater_than", "semver_less_than", "matches", "before", "after"];
  for (const [path, method] of [["/v1/projects/{slug}/flags", "post"], ["/v1/projects/{slug}/flags/{key}", "patch"]] as const) {
    const description: string = doc.paths[path][method].description;
    for (const op of NEW) expect([path, op, description.includes(op)]).toEqual([path, op, true]);
    expect(description).toContain("RE2");
    expect(description).toContain("bucketBy");
  }
});
