/** Flags and their states (decisions §6) through app.handle over a real database. */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp, json, ISO_TIMESTAMP, tableRows } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
});
afterEach(() => h.close());

const BASE = "/v1/projects/default/flags";

const create = (body: unknown, headers = admin) => h.request("POST", BASE, { body, headers });
const patch = (key: string, body: unknown) => h.request("PATCH", `${BASE}/${key}`, { body, headers: admin });
const putState = (key: string, env: string, body: unknown) => h.request("PUT", `${BASE}/${key}/states/${env}`, { body, headers: admin });
const get = (path: string, headers = admin) => h.request("GET", path, { headers });

/** Every table's rows, to show that a refused write changed nothing. */
async function dump(): Promise<string> {
  return JSON.stringify([await tableRows(h.ctx, "flags"), await tableRows(h.ctx, "flag_states")]);
}

const RULE = { name: "beta users", conditions: [{ attribute: "plan", operator: "equals", value: "beta" }] };

describe("create and read", () => {
  test("201 with the full flag; defaults filled; rule ids assigned", async () => {
    const flag = await json(await create({ key: "new-checkout", name: "New checkout", rules: [RULE] }), 201);
    expect(flag).toEqual({
      id: expect.stringMatching(/^flag_[A-Za-z0-9]{22}$/),
      key: "new-checkout",
      name: "New checkout",
      variants: [],
      rules: [{ id: expect.stringMatching(/^rule_[A-Za-z0-9]+$/), name: "beta users", conditions: RULE.conditions, enabled: true, variant: null }],
      createdAt: expect.stringMatching(ISO_TIMESTAMP),
      updatedAt: flag.createdAt,
      // Issue 32: staleness (docs/insights.md); a new flag is never stale.
      stale: null,
    });
    expect(await json(await get(`${BASE}/new-checkout`), 200)).toEqual(flag);
  });

  test("description null on create means none, as on a PATCH; too long says its limit", async () => {
    const created = await json(await create({ key: "f", name: "F", description: null }), 201);
    expect(created).not.toHaveProperty("description");
    expect(Object.keys(created)).toEqual(["id", "key", "name", "variants", "rules", "createdAt", "updatedAt", "stale"]);
    const long = await json(await create({ key: "g", name: "G", description: "x".repeat(2001) }), 400);
    expect(long.details).toEqual([{ path: "body.description", message: "Must be a string of at most 2000 characters, or null" }]);
  });

  test("variants with weights and a rule serving one", async () => {
    const variants = [
      { key: "control", name: "Control", weight: 50 },
      { key: "blue", description: "Blue button", weight: 33.333 },
      { key: "green", weight: 16.667 },
    ];
    const flag = await json(await create({ key: "button", name: "Button", variants, rules: [{ ...RULE, variant: "blue" }] }), 201);
    expect(flag.variants).toEqual(variants);
    expect(flag.rules[0].variant).toBe("blue");
  });

  test("duplicate key: 409 CONFLICT; another project may reuse it", async () => {
    await json(await create({ key: "dup", name: "One" }), 201);
    const res = await json(await create({ key: "dup", name: "Two" }), 409);
    expect(res).toEqual({ error: "CONFLICT", message: "Flag dup already exists in project default" });
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    await json(await h.request("POST", "/v1/projects/other/flags", { body: { key: "dup", name: "Three" }, headers: admin }), 201);
  });

  test("unknown project and unknown flag: 404", async () => {
    expect((await json(await h.request("POST", "/v1/projects/nope/flags", { body: { key: "a", name: "A" }, headers: admin }), 404)).error).toBe("NOT_FOUND");
    expect(await json(await get(`${BASE}/missing`), 404)).toEqual({ error: "NOT_FOUND", message: "Flag missing in project default not found" });
  });
});

describe("validation: a refused write changes nothing", () => {
  const cases: [string, unknown, string, string?][] = [
    ["key not kebab-case", { key: "New_Checkout", name: "x" }, "body.key"],
    ["key too long", { key: "a".repeat(129), name: "x" }, "body.key"],
    ["name missing", { key: "a" }, "body.name"],
    ["unknown field", { key: "a", name: "x", enabled: true }, "body.enabled", "Unknown field"],
    ["variant key bad", { key: "a", name: "x", variants: [{ key: "has space" }] }, "body.variants[0].key"],
    ["duplicate variant keys", { key: "a", name: "x", variants: [{ key: "v" }, { key: "v" }] }, "body.variants[1].key"],
    ["some weights only", { key: "a", name: "x", variants: [{ key: "v", weight: 100 }, { key: "w" }] }, "body.variants"],
    ["weights not summing to 100", { key: "a", name: "x", variants: [{ key: "v", weight: 50 }, { key: "w", weight: 40 }] }, "body.variants", "Variant weights must sum to 100"],
    ["weight with 4 decimals", { key: "a", name: "x", variants: [{ key: "v", weight: 50.0001 }, { key: "w", weight: 49.9999 }] }, "body.variants[0].weight"],
    ["rule variant unknown", { key: "a", name: "x", variants: [{ key: "v" }], rules: [{ variant: "nope" }] }, "body.rules[0].variant"],
    ["rule variant on a boolean flag", { key: "a", name: "x", rules: [{ variant: "on" }] }, "body.rules[0].variant"],
    ["unknown operator", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "regex", value: "x" }] }] }, "body.rules[0].conditions[0].operator"],
    ["not_equals with a boolean", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "not_equals", value: true }] }] }, "body.rules[0].conditions[0].value"],
    ["greater_than with a string", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "greater_than", value: "5" }] }] }, "body.rules[0].conditions[0].value"],
    ["in with a string", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "in", value: "x" }] }] }, "body.rules[0].conditions[0].value"],
    ["contains with a number", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "contains", value: 5 }] }] }, "body.rules[0].conditions[0].value"],
    ["is_true with a string", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "is_true", value: "yes" }] }] }, "body.rules[0].conditions[0].value"],
    ["equals without a value", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "equals" }] }] }, "body.rules[0].conditions[0].value"],
    ["in with 1,001 values", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "in", value: Array.from({ length: 1001 }, (_, i) => i) }] }] }, "body.rules[0].conditions[0].value"],
    ["51 conditions", { key: "a", name: "x", rules: [{ conditions: Array.from({ length: 51 }, () => ({ attribute: "a", operator: "is_true" })) }] }, "body.rules[0].conditions"],
    ["201 rules", { key: "a", name: "x", rules: Array.from({ length: 201 }, () => ({})) }, "body.rules"],
    ["duplicate rule ids", { key: "a", name: "x", rules: [{ id: "rule_abc" }, { id: "rule_abc" }] }, "body.rules[1].id"],
    ["malformed rule id", { key: "a", name: "x", rules: [{ id: "abc" }] }, "body.rules[0].id"],
    ["condition value an object", { key: "a", name: "x", rules: [{ conditions: [{ attribute: "a", operator: "equals", value: { x: 1 } }] }] }, "body.rules[0].conditions[0].value"],
  ];
  for (const [name, body, path, message] of cases) {
    test(name, async () => {
      const before = await dump();
      const res = await json(await create(body), 400);
      expect(res.error).toBe("VALIDATION_ERROR");
      expect(res.details).toContainEqual(message ? { path, message } : { path, message: expect.any(String) });
      expect(await dump()).toBe(before);
    });
  }

  test("every problem of a write is listed", async () => {
    const res = await json(
      await create({ key: "a", name: "x", variants: [{ key: "v", weight: 10 }], rules: [{ variant: "w", conditions: [{ attribute: "n", operator: "less_than", value: "1" }] }] }),
      400,
    );
    expect(res.details.map((d: { path: string }) => d.path).sort()).toEqual(["body.rules[0].conditions[0].value", "body.rules[0].variant", "body.variants"]);
  });

  test("boundaries are accepted: 200 rules, 50 conditions, 1,000 list values, operators with their types", async () => {
    const conditions = [
      { attribute: "s", operator: "equals", value: "x" },
      { attribute: "n", operator: "equals", value: 5 },
      { attribute: "b", operator: "equals", value: false },
      { attribute: "s", operator: "not_equals", value: "x" },
      { attribute: "n", operator: "not_equals", value: 5 },
      { attribute: "l", operator: "in", value: Array.from({ length: 1000 }, (_, i) => (i % 2 ? i : `v${i}`)) },
      { attribute: "l", operator: "not_in", value: [true, "a", 1] },
      { attribute: "s", operator: "contains", value: "x" },
      { attribute: "s", operator: "starts_with", value: "x" },
      { attribute: "n", operator: "greater_than", value: 1.5 },
      { attribute: "n", operator: "less_than", value: -1 },
      { attribute: "b", operator: "is_true" },
      { attribute: "b", operator: "is_false", value: false },
    ];
    const rules = [{ conditions }, { conditions: Array.from({ length: 50 }, () => ({ attribute: "a", operator: "is_true" })) }, ...Array.from({ length: 198 }, () => ({}))];
    const flag = await json(await create({ key: "big", name: "Big", rules }), 201);
    expect(flag.rules).toHaveLength(200);
    expect(flag.rules[0].conditions).toEqual(conditions);
  });
});

describe("PATCH", () => {
  test("updates fields, replaces rules, keeps rule ids sent back, assigns new ones", async () => {
    const flag = await json(await create({ key: "f", name: "F", rules: [RULE, { name: "second" }] }), 201);
    h.clock.advance(1000);
    const [first] = flag.rules;
    const updated = await json(await patch("f", { name: "F2", description: "About F", rules: [{ name: "new one" }, first] }), 200);
    expect(updated.name).toBe("F2");
    expect(updated.description).toBe("About F");
    expect(updated.rules.map((r: { name: string }) => r.name)).toEqual(["new one", "beta users"]);
    expect(updated.rules[1].id).toBe(first.id);
    expect(updated.rules[0].id).not.toBe(flag.rules[1].id);
    expect(updated.updatedAt).not.toBe(flag.updatedAt);
    expect(updated.createdAt).toBe(flag.createdAt);
    expect(await json(await get(`${BASE}/f`), 200)).toEqual(updated);
    const cleared = await json(await patch("f", { description: null }), 200);
    expect(cleared).not.toHaveProperty("description");
    expect(await json(await get(`${BASE}/f`), 200)).toEqual(cleared);
  });

  test("an empty PATCH changes nothing, updatedAt included", async () => {
    const flag = await json(await create({ key: "f", name: "F" }), 201);
    h.clock.advance(1000);
    expect(await json(await patch("f", {}), 200)).toEqual(flag);
  });

  test("key in the body: 400; new variants are checked against the stored rules", async () => {
    await json(await create({ key: "f", name: "F", variants: [{ key: "a" }, { key: "b" }], rules: [{ variant: "b" }] }), 201);
    const before = await dump();
    const keyRes = await json(await patch("f", { key: "g" }), 400);
    expect(keyRes.details).toEqual([{ path: "body.key", message: "The key of a flag cannot be changed" }]);
    const variantRes = await json(await patch("f", { variants: [{ key: "a" }] }), 400);
    const ruleId = (await json(await h.request("GET", `${BASE}/f`, { headers: admin }), 200)).rules[0].id;
    expect(variantRes.details).toEqual([
      { path: "body.variants", message: `Variant b is served by the flag's rule rules[0] (${ruleId}): change that rule in the same request` },
    ]);
    expect(await dump()).toBe(before);
  });

  test("unknown flag: 404", async () => {
    expect((await json(await patch("nope", { name: "x" }), 404)).error).toBe("NOT_FOUND");
  });
});

describe("DELETE", () => {
  test("204, then 404; its states are gone; the key can be created again", async () => {
    await json(await create({ key: "f", name: "F" }), 201);
    await json(await putState("f", "production", { enabled: true }), 200);
    expect((await h.request("DELETE", `${BASE}/f`, { headers: admin })).status).toBe(204);
    expect((await get(`${BASE}/f`)).status).toBe(404);
    expect((await h.request("DELETE", `${BASE}/f`, { headers: admin })).status).toBe(404);
    expect(JSON.parse((await dump()))[1]).toEqual([]);
    await json(await create({ key: "f", name: "F again" }), 201);
    expect((await json(await get(`${BASE}/f/states/production`), 200)).enabled).toBe(false);
  });
});

describe("states", () => {
  test("a flag without a state row is disabled; PUT sets it; omitted rollout keeps, null clears", async () => {
    const flag = await json(await create({ key: "f", name: "F" }), 201);
    expect(await json(await get(`${BASE}/f/states/staging`), 200)).toEqual({
      flagKey: "f",
      environment: "staging",
      enabled: false,
      rolloutPercentage: null,
      updatedAt: flag.createdAt,
      // Issue 32: never evaluated there (docs/insights.md).
      lastEvaluatedAt: null,
    });
    h.clock.advance(1000);
    const set = await json(await putState("f", "staging", { enabled: true, rolloutPercentage: 33.125 }), 200);
    expect(set).toEqual({ flagKey: "f", environment: "staging", enabled: true, rolloutPercentage: 33.125, updatedAt: expect.stringMatching(ISO_TIMESTAMP), lastEvaluatedAt: null });
    expect(set.updatedAt).not.toBe(flag.createdAt);
    expect(await json(await get(`${BASE}/f/states/staging`), 200)).toEqual(set);
    const kept = await json(await putState("f", "staging", { enabled: false }), 200);
    expect(kept.rolloutPercentage).toBe(33.125);
    const cleared = await json(await putState("f", "staging", { enabled: false, rolloutPercentage: null }), 200);
    expect(cleared.rolloutPercentage).toBeNull();
    // Other environments are untouched.
    expect((await json(await get(`${BASE}/f/states/production`), 200)).enabled).toBe(false);
  });

  test("a PUT that changes nothing writes nothing", async () => {
    await json(await create({ key: "f", name: "F" }), 201);
    const first = await json(await putState("f", "staging", { enabled: true }), 200);
    h.clock.advance(5000);
    expect(await json(await putState("f", "staging", { enabled: true }), 200)).toEqual(first);
  });

  const bad: [string, unknown, string][] = [
    ["enabled missing", { rolloutPercentage: 5 }, "body.enabled"],
    ["enabled a string", { enabled: "true" }, "body.enabled"],
    ["rollout over 100", { enabled: true, rolloutPercentage: 100.5 }, "body.rolloutPercentage"],
    ["rollout negative", { enabled: true, rolloutPercentage: -1 }, "body.rolloutPercentage"],
    ["rollout with 4 decimals", { enabled: true, rolloutPercentage: 12.3456 }, "body.rolloutPercentage"],
    ["rollout a string", { enabled: true, rolloutPercentage: "50" }, "body.rolloutPercentage"],
    ["unknown field", { enabled: true, environment: "staging" }, "body.environment"],
  ];
  for (const [name, body, path] of bad) {
    test(`400: ${name}; nothing stored`, async () => {
      await json(await create({ key: "f", name: "F" }), 201);
      const before = await dump();
      const res = await json(await putState("f", "staging", body), 400);
      expect(res.details).toContainEqual({ path, message: expect.any(String) });
      expect(await dump()).toBe(before);
    });
  }

  test("unknown environment, flag or project: 404", async () => {
    await json(await create({ key: "f", name: "F" }), 201);
    expect((await json(await putState("f", "qa", { enabled: true }), 404)).message).toBe("Environment qa in project default not found");
    expect((await json(await get(`${BASE}/f/states/qa`), 404)).error).toBe("NOT_FOUND");
    expect((await json(await putState("g", "staging", { enabled: true }), 404)).message).toBe("Flag g in project default not found");
    expect((await h.request("PUT", "/v1/projects/nope/flags/f/states/staging", { body: { enabled: true }, headers: admin })).status).toBe(404);
  });

  test("deleting an environment removes its states", async () => {
    await json(await create({ key: "f", name: "F" }), 201);
    await json(await putState("f", "staging", { enabled: true }), 200);
    expect((await h.request("DELETE", "/v1/projects/default/environments/staging", { headers: admin })).status).toBe(204);
    expect(JSON.parse((await dump()))[1]).toEqual([]);
  });
});

describe("list", () => {
  async function seed() {
    for (const [key, name] of [
      ["checkout", "New Checkout"],
      ["banner", "Holiday BANNER"],
      ["search-v2", "Search"],
      ["dark-mode", "Dark mode"],
      ["a-b-test", "Ärger test"],
    ]) {
      await json(await create({ key, name }), 201);
    }
    await json(await putState("checkout", "production", { enabled: true }), 200);
    await json(await putState("banner", "production", { enabled: false }), 200);
    await json(await putState("search-v2", "staging", { enabled: true }), 200);
  }
  const keys = (body: Record<string, any>) => body.flags.map((f: { key: string }) => f.key);

  test("ordered by key, list items only, defaults page 1 and perPage 20", async () => {
    await seed();
    const body = await json(await get(BASE), 200);
    expect(keys(body)).toEqual(["a-b-test", "banner", "checkout", "dark-mode", "search-v2"]);
    expect(body.total).toBe(5);
    expect(body.page).toBe(1);
    expect(body.perPage).toBe(20);
    expect(Object.keys(body.flags[0]).sort()).toEqual(["createdAt", "id", "key", "name", "stale", "updatedAt"]);
  });

  test("q: case-insensitive substring of key or name", async () => {
    await seed();
    expect(keys(await json(await get(`${BASE}?q=banner`), 200))).toEqual(["banner"]);
    expect(keys(await json(await get(`${BASE}?q=CHECK`), 200))).toEqual(["checkout"]);
    expect(keys(await json(await get(`${BASE}?q=e`), 200))).toEqual(["a-b-test", "banner", "checkout", "dark-mode", "search-v2"]);
    expect(keys(await json(await get(`${BASE}?q=%C3%A4rger`), 200))).toEqual(["a-b-test"]);
    expect((await json(await get(`${BASE}?q=zzz`), 200)).total).toBe(0);
  });

  test("q folds the variants of a letter together, with no rule that depends on the next letter", async () => {
    const names: [string, string][] = [["greek", "ΟΔΟΣ"], ["micro", "5 µs"], ["long-s", "ſtop"], ["street", "Straße"]];
    for (const [key, name] of names) await json(await create({ key, name }), 201);
    const found = async (q: string) => keys(await json(await get(`${BASE}?q=${encodeURIComponent(q)}`), 200));
    for (const q of ["Σ", "σ", "ς", "οδοσ", "ΟΔΟΣ"]) expect({ q, found: await found(q) }).toEqual({ q, found: ["greek"] });
    for (const q of ["μ", "Μ", "µ"]) expect({ q, found: await found(q) }).toEqual({ q, found: ["micro"] });
    expect(await found("ſ")).toEqual(await found("s"));
    expect(await found("ſto")).toEqual(["long-s"]);
    for (const q of ["STRASSE", "straße", "ẞ"]) expect({ q, found: await found(q) }).toEqual({ q, found: ["street"] });
  });

  test("environment keeps flags with a state there; enabled filters by it", async () => {
    await seed();
    expect(keys(await json(await get(`${BASE}?environment=production`), 200))).toEqual(["banner", "checkout"]);
    expect(keys(await json(await get(`${BASE}?environment=production&enabled=true`), 200))).toEqual(["checkout"]);
    expect(keys(await json(await get(`${BASE}?environment=production&enabled=false`), 200))).toEqual(["banner"]);
    expect(keys(await json(await get(`${BASE}?environment=development`), 200))).toEqual([]);
    expect((await json(await get(`${BASE}?environment=qa`), 404)).error).toBe("NOT_FOUND");
    // A malformed one is a bad query value (decisions §3): 400, as a malformed path slug is.
    for (const environment of ["Bad_Env", "", "staging%20"]) {
      expect({ environment, details: (await json(await get(`${BASE}?environment=${environment}`), 400)).details.map((d: { path: string }) => d.path) }).toEqual({
        environment,
        details: ["query.environment"],
      });
    }
    expect((await json(await get(`${BASE}?enabled=true`), 400)).details).toEqual([{ path: "query.enabled", message: "Filtering by enabled needs an environment" }]);
  });

  test("pagination and its bounds", async () => {
    await seed();
    const page2 = await json(await get(`${BASE}?page=2&perPage=2`), 200);
    expect(keys(page2)).toEqual(["checkout", "dark-mode"]);
    expect(page2).toMatchObject({ total: 5, page: 2, perPage: 2 });
    expect(keys(await json(await get(`${BASE}?page=4&perPage=2`), 200))).toEqual([]);
    await json(await get(`${BASE}?perPage=100`), 200);
    const loose = ["page=0x10", "page=1e2", "page=%2B1", "page=%201", "perPage=5%20", "page=-0", "page=01", "page=1.0", "page=1e21"];
    for (const q of ["perPage=0", "perPage=101", "page=0", "page=-1", "page=abc", "perPage=1.5", "enabled=maybe&environment=production", ...loose]) {
      const res = await json(await get(`${BASE}?${q}`), 400);
      expect(res.error).toBe("VALIDATION_ERROR");
      expect(res.details[0].path).toBe(`query.${q.split("=")[0]}`);
    }
    expect((await json(await get(`${BASE}?environment=production&enabled=1`), 400)).details).toEqual([{ path: "query.enabled", message: "Must be true or false" }]);
  });
});

describe("path values", () => {
  test("a malformed slug, flag key or environment is 400 at its parameter; a well-formed unknown one 404; no credential 401 first", async () => {
    await json(await create({ key: "f", name: "F" }), 201);
    const cases: [string, string, string | undefined][] = [
      ["GET", "/v1/projects/Bad_Slug/flags", "params.slug"],
      ["GET", "/v1/projects/%ZZ/flags", "params.slug"],
      ["GET", `${BASE}/Bad%20Key`, "params.key"],
      ["PUT", `${BASE}/f/states/Bad%20Env`, "params.environment"],
      ["GET", "/v1/projects/Sh%20op", "params.slug"],
      ["DELETE", "/v1/projects/default/environments/QA", "params.environment"],
    ];
    for (const [method, path, where] of cases) {
      const res = await h.request(method, path, { headers: admin, body: method === "PUT" ? { enabled: true } : undefined });
      const body = await json(res, 400);
      expect({ path, error: body.error, where: body.details[0].path }).toEqual({ path, error: "VALIDATION_ERROR", where });
      expect((await h.request(method, path, { body: method === "PUT" ? { enabled: true } : undefined })).status).toBe(401);
    }
    for (const path of ["/v1/projects/nope/flags", `${BASE}/nope`, `${BASE}/f/states/nope`]) {
      expect((await json(await get(path), 404)).error).toBe("NOT_FOUND");
    }
  });
});

describe("access", () => {
  test("mgmt and full keys of the project; eval key 403; another project's key 403", async () => {
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt")).secret);
    const full = bearer((await seedApiKey(h.ctx, "full")).secret);
    const evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
    await json(await create({ key: "f", name: "F" }, mgmt), 201);
    await json(await get(`${BASE}/f`, full), 200);
    expect(await json(await get(`${BASE}/f`, evalKey), 403)).toEqual({ error: "FORBIDDEN", message: "This key scope does not have access to this endpoint", details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope mgmt or full" }] });
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
    const otherKey = bearer((await seedApiKey(h.ctx, "mgmt", "other")).secret);
    expect((await json(await get(`${BASE}/f`, otherKey), 403)).error).toBe("FORBIDDEN");
    expect((await json(await get(BASE, {}), 401)).message).toBe("Invalid or expired API key");
  });
});
