/**
 * The Pro-only API not built yet (Integrations): on CE every endpoint answers 403
 * PRO_EDITION_REQUIRED after the access decision (decisions §4, §9); on Pro it is not routed
 * yet. Through app.handle on a real database. (The Marketplace: test/http/marketplace.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { bearer, seedAdminKey, seedApiKey, testApp, type TestApp, userToken } from "../helpers";

const ENDPOINTS: [string, string, unknown?][] = [
  ["GET", "/v1/integrations/types"],
  ["GET", "/v1/projects/default/integrations"],
  ["POST", "/v1/projects/default/integrations", { type: "mixpanel", config: { projectToken: "t" } }],
  ["PATCH", "/v1/projects/default/integrations/int_x", { enabled: false }],
  ["DELETE", "/v1/projects/default/integrations/int_x"],
];

describe("CE", () => {
  let h: TestApp;
  beforeAll(() => (h = testApp()));
  afterAll(() => h.close());

  test("an admin key or an admin login: 403 PRO_EDITION_REQUIRED on every endpoint, whatever the body", async () => {
    const callers = [bearer(seedAdminKey(h.ctx)), await userToken(h.ctx, "admin")];
    for (const headers of callers) {
      for (const [method, path, body] of ENDPOINTS) {
        const res = await h.request(method, path, { headers, body });
        expect({ method, path, status: res.status, body: await res.json() }).toEqual({
          method,
          path,
          status: 403,
          body: { error: "PRO_EDITION_REQUIRED", message: "This endpoint requires the Pro edition" },
        });
        expect(res.headers.get("x-ratelimit-remaining")).not.toBeNull();
      }
    }
  });

  test("access comes first: a project key or an editor gets 403 FORBIDDEN, no credential 401", async () => {
    const cases: [Record<string, string>, number, string][] = [
      [bearer(seedApiKey(h.ctx, "full").secret), 403, "This key scope does not have access to this endpoint"],
      [await userToken(h.ctx, "editor"), 403, "The role editor does not have access to this endpoint"],
      [{}, 401, "Invalid or expired API key"],
    ];
    for (const [headers, status, message] of cases) {
      for (const [method, path, body] of ENDPOINTS) {
        const res = await h.request(method, path, { headers, body });
        expect({ method, path, status: res.status, message: ((await res.json()) as { message: string }).message }).toEqual({ method, path, status, message });
      }
    }
  });

  test("the API document lists each endpoint with its 403 PRO_EDITION_REQUIRED", async () => {
    const doc = (await (await h.request("GET", "/v1/openapi.json")).json()) as {
      paths: Record<string, Record<string, { description?: string; "x-flagsvc-edition"?: string }>>;
    };
    for (const [method, path] of ENDPOINTS) {
      const template = path.split("?")[0]!.replace("/default/", "/{slug}/").replace("int_x", "{integrationId}");
      const operation = doc.paths[template]?.[method.toLowerCase()];
      expect({ template, edition: operation?.["x-flagsvc-edition"], says: operation?.description?.includes("403 PRO_EDITION_REQUIRED") }).toEqual({
        template,
        edition: "pro",
        says: true,
      });
    }
  });
});

describe("Pro", () => {
  let h: TestApp;
  beforeAll(() => (h = testApp({ SVC_EDITION: "pro" })));
  afterAll(() => h.close());

  test("not routed yet: 404", async () => {
    const headers = bearer(seedAdminKey(h.ctx));
    for (const [method, path] of ENDPOINTS) {
      const res = await h.request(method, path, { headers });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
    }
  });
});
