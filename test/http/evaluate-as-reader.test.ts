/**
 * Evaluating as a reader of the flags (POST /v1/projects/{slug}/environments/{env}/evaluate and
 * .../evaluate/batch; docs/decisions.md, Evaluate as a reader): the answer equals /v1/evaluate's
 * for a key of that environment (single, batch, unknown flag, test-session override); who may
 * call it; 404s; and it is not counted (insights, lastEvaluatedAt).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp } from "../helpers";

const FLAGS = "/v1/projects/default/flags";
const PROD = "/v1/projects/default/environments/production";

let h: TestApp;
let admin: Record<string, string>;
let evalKey: Record<string, string>;

beforeEach(async () => {
  h = await testApp();
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "production")).secret);
  await call("POST", "/v1/projects", { slug: "other", name: "Other" }, 201);
  // theme: plan=beta gets b by a rule, others a; dark: a boolean flag at a 50 % rollout.
  await call("POST", FLAGS, { key: "theme", name: "Theme", variants: [{ key: "a" }, { key: "b" }], rules: [{ conditions: [{ attribute: "plan", operator: "equals", value: "beta" }], variant: "b" }] }, 201);
  await call("PUT", `${FLAGS}/theme/states/production`, { enabled: true });
  await call("POST", FLAGS, { key: "dark", name: "Dark" }, 201);
  await call("PUT", `${FLAGS}/dark/states/production`, { enabled: true, rolloutPercentage: 50 });
});
afterEach(() => h.close());

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin) => json(await h.request(method, path, { body, headers }), status);

describe("answers what /v1/evaluate answers for that environment", () => {
  test("single: rule match, default variant, rollout in and out, unknown flag (FLAG_NOT_FOUND)", async () => {
    const viewer = await userToken(h.ctx, "viewer");
    const cases = [
      { flagKey: "theme", context: { userId: "u1", plan: "beta" } },
      { flagKey: "theme", context: { userId: "u1" } },
      ...Array.from({ length: 6 }, (_, i) => ({ flagKey: "dark", context: { userId: `user-${i}` } })),
      { flagKey: "dark" },
      { flagKey: "no-such-flag", context: { userId: "u1" } },
    ];
    const reasons = new Set<string>();
    for (const body of cases) {
      const asReader = await call("POST", `${PROD}/evaluate`, body, 200, viewer);
      expect(asReader).toEqual(await call("POST", "/v1/evaluate", body, 200, evalKey));
      reasons.add(asReader.reason);
    }
    expect([...reasons].sort()).toEqual(["FLAG_ENABLED", "FLAG_NOT_FOUND", "PERCENTAGE_ROLLOUT", "PERCENTAGE_ROLLOUT_EXCLUDED", "TARGETING_RULE_MATCH"]);
  });

  test("batch: one result per distinct key, as /v1/evaluate/batch", async () => {
    const body = { flags: ["theme", "dark", "theme", "no-such-flag"], context: { userId: "u1", plan: "beta" } };
    const asReader = await call("POST", `${PROD}/evaluate/batch`, body, 200, await userToken(h.ctx, "viewer"));
    expect(asReader).toEqual(await call("POST", "/v1/evaluate/batch", body, 200, evalKey));
    expect(Object.keys(asReader.results).sort()).toEqual(["dark", "no-such-flag", "theme"]);
    expect(asReader.results.theme).toMatchObject({ variant: "b", reason: "TARGETING_RULE_MATCH" });
  });

  test("another environment of the path answers its own state (staging: disabled)", async () => {
    const r = await call("POST", "/v1/projects/default/environments/staging/evaluate", { flagKey: "theme", context: { userId: "u1" } });
    expect(r).toMatchObject({ flagKey: "theme", enabled: false, variant: null, reason: "FLAG_DISABLED" });
  });

  test("a test session of the project applies its overrides (X-Service-Session), as on /v1/evaluate", async () => {
    const testKey = bearer((await seedApiKey(h.ctx, "test", "default", "production")).secret);
    const session = await call("POST", "/v1/testing/sessions", { projectId: "default" }, 201, testKey);
    await call("PUT", `/v1/testing/sessions/${session.id}/overrides/theme`, { value: "b" }, 200, testKey);
    const headers = { ...admin, "x-service-session": session.token };
    const r = await call("POST", `${PROD}/evaluate`, { flagKey: "theme", context: { userId: "u1" } }, 200, headers);
    expect(r).toMatchObject({ enabled: true, variant: "b", reason: "TEST_OVERRIDE" });
    expect(r).toEqual(await call("POST", "/v1/evaluate", { flagKey: "theme", context: { userId: "u1" } }, 200, { ...evalKey, "x-service-session": session.token }));
  });
});

describe("access and errors", () => {
  test("viewer, editor, mgmt key: 200; anonymous: 401; another project's key: 403; eval key: 403", async () => {
    const body = { flagKey: "theme" };
    for (const headers of [await userToken(h.ctx, "viewer"), await userToken(h.ctx, "editor"), bearer((await seedApiKey(h.ctx, "mgmt", "default", "production")).secret)]) {
      expect((await call("POST", `${PROD}/evaluate`, body, 200, headers)).reason).toBe("FLAG_ENABLED");
    }
    const anonymous = await call("POST", `${PROD}/evaluate`, body, 401, {});
    expect(anonymous.error).toBe("UNAUTHORIZED");
    const other = await call("POST", `${PROD}/evaluate/batch`, { flags: ["theme"] }, 403, bearer((await seedApiKey(h.ctx, "full", "other", "production")).secret));
    expect(other.message).toBe("This key does not have access to this project");
    const evalScope = await call("POST", `${PROD}/evaluate`, body, 403, evalKey);
    expect(evalScope.message).toBe("This key scope does not have access to this endpoint");
  });

  test("unknown environment or project: 404; `environment` in the body: 400 saying the path chooses it", async () => {
    const env = await call("POST", "/v1/projects/default/environments/nowhere/evaluate", { flagKey: "theme" }, 404);
    expect(env.message).toContain("Environment nowhere");
    const batch = await call("POST", "/v1/projects/default/environments/nowhere/evaluate/batch", { flags: ["theme"] }, 404);
    expect(batch.error).toBe("NOT_FOUND");
    expect((await call("POST", "/v1/projects/nope/environments/production/evaluate", { flagKey: "theme" }, 404)).message).toContain("Project nope");
    const bad = await call("POST", `${PROD}/evaluate`, { flagKey: "theme", environment: "staging" }, 400);
    expect(bad.details).toEqual([{ path: "body.environment", message: "Unknown field: the path chooses the environment" }]);
    const tooMany = await call("POST", `${PROD}/evaluate/batch`, { flags: Array.from({ length: 51 }, (_, i) => `f${i}`) }, 400);
    expect(tooMany.details[0].path).toBe("body.flags");
  });
});

test("not counted: insights and lastEvaluatedAt do not change; /v1/evaluate's do", async () => {
  const insights = async () => (await call("GET", `${FLAGS}/theme/insights?environment=production`)).points.at(-1).total;
  const lastEvaluated = async () => (await call("GET", `${FLAGS}/theme/states/production`)).lastEvaluatedAt ?? null;
  for (let i = 0; i < 3; i++) await call("POST", `${PROD}/evaluate`, { flagKey: "theme", context: { userId: `u${i}` } });
  await call("POST", `${PROD}/evaluate/batch`, { flags: ["theme"], context: { userId: "u9" } });
  expect(await insights()).toBe(0);
  expect(await lastEvaluated()).toBeNull();
  await call("POST", "/v1/evaluate", { flagKey: "theme", context: { userId: "u1" } }, 200, evalKey);
  expect(await insights()).toBe(1);
  expect(await lastEvaluated()).not.toBeNull();
});
