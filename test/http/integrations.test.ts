/**
 * The Integrations API (Pro; decisions §4, §9, §12): on CE every endpoint answers 403
 * PRO_EDITION_REQUIRED after the access decision; on Pro the records, their validation against
 * each type's schema, masking, PATCH merging and the change log. Through app.handle on a real
 * database. (Sending is not built yet.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SECRET } from "../../src/changes/entry";
import { bearer, entriesAfter, json, lastPosition, seedAdminKey, seedApiKey, testApp, type TestApp, userToken, rawRows } from "../helpers";

const ENDPOINTS: [string, string, unknown?][] = [
  ["GET", "/v1/integrations/types"],
  ["GET", "/v1/projects/default/integrations"],
  ["POST", "/v1/projects/default/integrations", { type: "mixpanel", config: { projectToken: "t" } }],
  ["PATCH", "/v1/projects/default/integrations/int_x", { enabled: false }],
  ["DELETE", "/v1/projects/default/integrations/int_x"],
];

describe("CE", () => {
  let h: TestApp;
  beforeAll(async () => {
    h = await testApp();
  });
  afterAll(() => h.close());

  test("an admin key or an admin login: 403 PRO_EDITION_REQUIRED on every endpoint, whatever the body", async () => {
    const callers = [bearer(await seedAdminKey(h.ctx)), await userToken(h.ctx, "admin")];
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
      [bearer((await seedApiKey(h.ctx, "full")).secret), 403, "This key scope does not have access to this endpoint"],
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
  let admin: Record<string, string>;
  const base = "/v1/projects/default/integrations";
  beforeAll(async () => {
    h = await testApp({ SVC_EDITION: "pro" });
    admin = bearer(await seedAdminKey(h.ctx));
  });
  afterAll(() => h.close());

  test("GET /v1/integrations/types: each type with its category, description and config schema, secrets marked", async () => {
    const { types } = await json(await h.request("GET", "/v1/integrations/types", { headers: admin }), 200);
    const braze = types.find((t: { type: string }) => t.type === "braze");
    expect(braze).toMatchObject({ category: "crm", name: expect.any(String), description: expect.any(String) });
    expect(braze.configSchema.properties.apiKey.secret).toBe(true);
    expect(types.map((t: { type: string; category: string }) => `${t.type} ${t.category}`)).toEqual([
      "mixpanel analytics", "amplitude analytics", "segment cdp", "braze crm", "datadog monitoring", "slack notifications",
    ]);
    for (const t of types) expect(t.configSchema.properties.apiHost).toBeDefined();
    for (const t of types.filter((t: { category: string }) => t.category === "analytics")) {
      expect(Object.keys(t.configSchema.properties)).toEqual(expect.arrayContaining(["trackEvaluations", "trackChanges"]));
    }
  });

  test("create, read, merge, mask, delete; every write in the change log with the secret masked", async () => {
    const before = await lastPosition(h.ctx);
    const created = await json(await h.request("POST", base, { headers: admin, body: { type: "braze", config: { apiKey: "braze-secret-key-1", attributePrefix: "ff_" } } }), 201);
    expect(created).toMatchObject({ type: "braze", enabled: true, config: { apiKey: SECRET, attributePrefix: "ff_" }, stats: { sent: 0, failed: 0, lastError: null, lastSentAt: null } });
    expect(created.id).toMatch(/^int_/);
    const path = `${base}/${created.id}`;
    expect(await json(await h.request("GET", path, { headers: admin }), 200)).toEqual(created);
    expect((await json(await h.request("GET", base, { headers: admin }), 200)).integrations).toEqual([created]);
    // "********" keeps the secret; null removes an optional key; a new key merges in.
    const kept = await json(await h.request("PATCH", path, { headers: admin, body: { config: { apiKey: SECRET, attributePrefix: null, environment: "staging" } } }), 200);
    expect(kept.config).toEqual({ apiKey: SECRET, environment: "staging" });
    // JSON text on SQLite, parsed already on PostgreSQL.
    const stored = (await rawRows(h.ctx, "SELECT config FROM integrations WHERE id = ?", [created.id]))[0] as { config: unknown };
    expect(typeof stored.config === "string" ? JSON.parse(stored.config) : stored.config).toEqual({ apiKey: "braze-secret-key-1", environment: "staging" });
    const same = await json(await h.request("PATCH", path, { headers: admin, body: { enabled: true } }), 200);
    expect(same.updatedAt).toBe(kept.updatedAt);
    await json(await h.request("PATCH", path, { headers: admin, body: { config: { apiKey: "braze-secret-key-2" }, enabled: false } }), 200);
    expect((await h.request("DELETE", path, { headers: admin })).status).toBe(204);
    await json(await h.request("GET", path, { headers: admin }), 404);
    const entries = await entriesAfter(h.ctx, before);
    expect(entries.map((e) => `${e.resource_type} ${e.action}`)).toEqual(["integration created", "integration updated", "integration updated", "integration deleted"]);
    expect(JSON.parse(entries[2]!.changes)).toMatchObject({ enabled: { before: true, after: false }, config: { changed: true } });
    expect(JSON.stringify(entries)).not.toContain("braze-secret-key");
  });

  test("bad input: unknown type 400 at body.type, config against the type's schema 400 with details, unknown fields 400; nothing stored", async () => {
    const unknown = await json(await h.request("POST", base, { headers: admin, body: { type: "mixpanel2", config: {} } }), 400);
    expect(unknown.details[0].path).toBe("body.type");
    const bad = await json(await h.request("POST", base, { headers: admin, body: { type: "braze", config: { attributePrefix: 5 } } }), 400);
    expect(bad.details.map((d: { path: string }) => d.path)).toEqual(expect.arrayContaining(["body.config.apiKey", "body.config.attributePrefix"]));
    await json(await h.request("POST", base, { headers: admin, body: { type: "braze", config: { apiKey: "k" }, color: 1 } }), 400);
    expect((await json(await h.request("GET", base, { headers: admin }), 200)).integrations).toEqual([]);
    await json(await h.request("GET", "/v1/projects/nope/integrations", { headers: admin }), 404);
  });

  test("config errors say what to send: Required, the known fields for an unknown one, the values of a choice (Datadog's site, a region)", async () => {
    const datadog = await json(await h.request("POST", base, { headers: admin, body: { type: "datadog", config: { site: "datadoghq.de", host: "x" } } }), 400);
    expect(datadog).toEqual({
      error: "VALIDATION_ERROR",
      message: "Invalid configuration for datadog",
      details: [
        { path: "body.config.apiKey", message: "Required" },
        { path: "body.config.host", message: "Unknown field; known: apiKey, applicationKey, site, apiHost, service, tags, trackEvaluations, trackChanges" },
        { path: "body.config.site", message: "Must be one of datadoghq.com, us3.datadoghq.com, us5.datadoghq.com, datadoghq.eu, ap1.datadoghq.com, ap2.datadoghq.com, uk1.datadoghq.com, ddog-gov.com, us2.ddog-gov.com" },
      ],
    });
    const mixpanel = await json(await h.request("POST", base, { headers: admin, body: { type: "mixpanel", config: { projectToken: "t", region: "de" } } }), 400);
    expect(mixpanel.details).toEqual([{ path: "body.config.region", message: "Must be one of us, eu, in" }]);
    expect((await json(await h.request("GET", base, { headers: admin }), 200)).integrations).toEqual([]);
  });

  test("a URL of a config is checked against SVC_OUTBOUND_ALLOWED_HOSTS as webhook URLs are; an admin login writes as itself", async () => {
    const refused = await json(await h.request("POST", base, { headers: admin, body: { type: "datadog", config: { apiKey: "k", apiHost: "http://127.0.0.1:9000" } } }), 400);
    expect(refused.details).toEqual([{ path: "body.config.apiHost", message: expect.stringContaining("127.0.0.1") }]);
    const slack = await json(await h.request("POST", base, { headers: admin, body: { type: "slack", config: { webhookUrl: "http://169.254.169.254/services/T/B/X" } } }), 400);
    expect(slack.details[0].path).toBe("body.config.webhookUrl");
    // Slack's rule beyond single properties: a webhook URL, or a bot token with a channel.
    const none = await json(await h.request("POST", base, { headers: admin, body: { type: "slack", config: {} } }), 400);
    expect(none.details).toEqual([{ path: "body.config.webhookUrl", message: "Required: a webhook URL, or botToken with channel" }]);
    const half = await json(await h.request("POST", base, { headers: admin, body: { type: "slack", config: { botToken: "xoxb-1-abc" } } }), 400);
    expect(half.details).toEqual([{ path: "body.config.channel", message: "Required with botToken" }]);
    expect((await json(await h.request("GET", base, { headers: admin }), 200)).integrations).toEqual([]);
    const before = await lastPosition(h.ctx);
    const jwt = await userToken(h.ctx, "admin");
    const created = await json(await h.request("POST", base, { headers: jwt, body: { type: "datadog", config: { apiKey: "dd-secret-1", apiHost: "https://dd-proxy.example.com" }, enabled: false } }), 201);
    const [entry] = await entriesAfter(h.ctx, before);
    expect(entry).toMatchObject({ actor_type: "user", resource_type: "integration", resource_id: created.id, resource_key: "datadog", action: "created" });
    expect(entry!.request_id).toEqual(expect.any(String));
    expect(JSON.stringify(entry)).not.toContain("dd-secret-1");
    expect((await h.request("DELETE", `${base}/${created.id}`, { headers: jwt })).status).toBe(204);
  });
});
