/**
 * The access table of decisions §4 walked through HTTP: every endpoint that exists, with every
 * kind of credential, expecting its success status or the exact 401/403 of the spec.
 * Each credential column works in a project of its own (API keys are bound to it), so the
 * destructive cells (delete key, delete project, logout) come last and touch nothing else.
 * Evaluation's rows are checked against the table itself in test/unit/access.test.ts. The app
 * runs the Pro edition, so that Pro-only endpoints show their access rows (the CE refusal,
 * 403 PRO_EDITION_REQUIRED, is tested with each module).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MESSAGES, type AccessGroup, type Role, type Scope } from "../../src/http/access";
import { SYSTEM } from "../../src/changes/entry";
import { seedUser, rawRows, bearer, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

type Column = { name: string; kind: "key"; scope: Scope } | { name: string; kind: "admin" } | { name: string; kind: "user"; role: Role };
const COLUMNS: Column[] = [
  { name: "eval", kind: "key", scope: "eval" },
  { name: "test", kind: "key", scope: "test" },
  { name: "mgmt", kind: "key", scope: "mgmt" },
  { name: "full", kind: "key", scope: "full" },
  { name: "admin key", kind: "admin" },
  { name: "JWT admin", kind: "user", role: "admin" },
  { name: "JWT editor", kind: "user", role: "editor" },
  { name: "JWT viewer", kind: "user", role: "viewer" },
  { name: "client", kind: "key", scope: "client" },
];

/** Which columns may call a group: reads and writes (from decisions §4). */
const ALLOWED: Record<Exclude<AccessGroup, "evaluate">, { read: string[]; write: string[] }> = {
  testing: { read: ["test", "full", "JWT admin", "JWT editor", "JWT viewer"], write: ["test", "full", "JWT admin", "JWT editor"] },
  definitions: { read: ["eval", "test", "mgmt", "full"], write: [] },
  projects: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"], write: ["mgmt", "full", "admin key", "JWT admin"] },
  projectCreate: { read: [], write: ["admin key", "JWT admin"] },
  environments: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"], write: ["mgmt", "full", "admin key", "JWT admin"] },
  flags: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"], write: ["mgmt", "full", "admin key", "JWT admin", "JWT editor"] },
  apiKeys: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"], write: ["mgmt", "full", "admin key", "JWT admin", "JWT editor"] },
  webhooks: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor"], write: ["mgmt", "full", "admin key", "JWT admin", "JWT editor"] },
  // Its routes are POSTs that write nothing: every reader of the flags.
  evaluateAs: { read: [], write: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"] },
  admin: { read: ["admin key", "JWT admin"], write: ["admin key", "JWT admin"] },
  audit: { read: ["mgmt", "full", "admin key", "JWT admin", "JWT editor", "JWT viewer"], write: [] },
  auditInstance: { read: ["admin key", "JWT admin"], write: [] },
  session: { read: ["JWT admin", "JWT editor", "JWT viewer"], write: ["JWT admin", "JWT editor", "JWT viewer"] },
};

/** The 403 for a kind of credential a group never takes (admin keys, login tokens): what it takes. */
const TAKES: Partial<Record<AccessGroup, string>> = {
  testing: "The Testing API takes a project API key of scope test or full",
  definitions: "The definitions API takes a project API key of scope eval, test, mgmt or full",
  session: "This endpoint takes a login token (POST /v1/auth/login)",
};

/**
 * What a key of the wrong scope is told in `details` (decisions §4, in words): the groups that
 * take API keys name their scopes; the others name the credentials they take instead.
 */
const KEY_TAKES: Record<Exclude<AccessGroup, "evaluate">, string> = {
  testing: "this endpoint takes a key of scope test or full",
  definitions: "this endpoint takes a key of scope eval, test, mgmt or full",
  projects: "this endpoint takes a key of scope mgmt or full",
  projectCreate: "this endpoint takes no API key, only an admin key or a login token of role admin (POST /v1/auth/login)",
  environments: "this endpoint takes a key of scope mgmt or full",
  flags: "this endpoint takes a key of scope mgmt or full",
  apiKeys: "this endpoint takes a key of scope mgmt or full",
  webhooks: "this endpoint takes a key of scope mgmt or full",
  evaluateAs: "this endpoint takes a key of scope mgmt or full",
  admin: "this endpoint takes no API key, only an admin key or a login token of role admin (POST /v1/auth/login)",
  audit: "this endpoint takes a key of scope mgmt or full",
  auditInstance: "this endpoint takes no API key, only an admin key or a login token of role admin (POST /v1/auth/login)",
  session: "this endpoint takes no API key, only a login token (POST /v1/auth/login)",
};

interface Fixture {
  slug: string;
  headers: Record<string, string>;
  rotateKeyId: string;
  deleteKeyId: string;
  userId: string;
  adminKeyId: string;
  /** A test session of the column's project. */
  sessionId: string;
  /** A webhook of the column's project, one to delete, a failed delivery (redeliverable) and a pending one (attempt-now). */
  webhookId: string;
  doomedWebhookId: string;
  deliveryId: string;
  pendingDeliveryId: string;
  /** A disabled integration (Pro) of the column's project. */
  integrationId: string;
}

interface Endpoint {
  group: keyof typeof ALLOWED;
  method: string;
  path: (f: Fixture) => string;
  body?: (f: Fixture) => unknown;
  ok: number;
}

let serial = 0;
const WEBHOOK_SECRET = "access-matrix-webhook-secret";
const ENDPOINTS: Endpoint[] = [
  { group: "projects", method: "GET", path: () => "/v1/projects", ok: 200 },
  { group: "projectCreate", method: "POST", path: () => "/v1/projects", body: () => ({ slug: `made-${++serial}`, name: "Made" }), ok: 201 },
  { group: "projects", method: "GET", path: (f) => `/v1/projects/${f.slug}`, ok: 200 },
  { group: "projects", method: "PATCH", path: (f) => `/v1/projects/${f.slug}`, body: () => ({ name: "Renamed" }), ok: 200 },
  { group: "environments", method: "GET", path: (f) => `/v1/projects/${f.slug}/environments`, ok: 200 },
  { group: "environments", method: "POST", path: (f) => `/v1/projects/${f.slug}/environments`, body: () => ({ slug: "qa", name: "QA" }), ok: 201 },
  { group: "environments", method: "GET", path: (f) => `/v1/projects/${f.slug}/environments/production`, ok: 200 },
  { group: "environments", method: "PATCH", path: (f) => `/v1/projects/${f.slug}/environments/production`, body: () => ({ name: `Renamed ${++serial}` }), ok: 200 },
  { group: "environments", method: "DELETE", path: (f) => `/v1/projects/${f.slug}/environments/qa`, ok: 204 },
  { group: "apiKeys", method: "GET", path: (f) => `/v1/projects/${f.slug}/api-keys`, ok: 200 },
  { group: "apiKeys", method: "POST", path: (f) => `/v1/projects/${f.slug}/api-keys`, body: () => ({ name: "made", scope: "eval", environment: "development" }), ok: 201 },
  { group: "apiKeys", method: "POST", path: (f) => `/v1/api-keys/${f.rotateKeyId}/rotate`, ok: 200 },
  { group: "apiKeys", method: "DELETE", path: (f) => `/v1/api-keys/${f.deleteKeyId}`, ok: 204 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/flags`, ok: 200 },
  { group: "flags", method: "POST", path: (f) => `/v1/projects/${f.slug}/flags`, body: () => ({ key: `made-${++serial}`, name: "Made" }), ok: 201 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/flags/kept`, ok: 200 },
  { group: "flags", method: "PATCH", path: (f) => `/v1/projects/${f.slug}/flags/kept`, body: () => ({ name: `Renamed ${++serial}` }), ok: 200 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/flags/kept/states`, ok: 200 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/flags/kept/states/production`, ok: 200 },
  { group: "flags", method: "PUT", path: (f) => `/v1/projects/${f.slug}/flags/kept/states/production`, body: () => ({ enabled: serial++ % 2 === 0 }), ok: 200 },
  { group: "flags", method: "DELETE", path: (f) => `/v1/projects/${f.slug}/flags/doomed`, ok: 204 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/segments`, ok: 200 },
  { group: "flags", method: "POST", path: (f) => `/v1/projects/${f.slug}/segments`, body: () => ({ key: `made-${++serial}`, name: "Made", conditions: [] }), ok: 201 },
  { group: "flags", method: "GET", path: (f) => `/v1/projects/${f.slug}/segments/kept`, ok: 200 },
  { group: "flags", method: "PATCH", path: (f) => `/v1/projects/${f.slug}/segments/kept`, body: () => ({ name: `Renamed ${++serial}` }), ok: 200 },
  { group: "flags", method: "DELETE", path: (f) => `/v1/projects/${f.slug}/segments/doomed`, ok: 204 },
  { group: "evaluateAs", method: "POST", path: (f) => `/v1/projects/${f.slug}/environments/production/evaluate`, body: () => ({ flagKey: "kept" }), ok: 200 },
  { group: "evaluateAs", method: "POST", path: (f) => `/v1/projects/${f.slug}/environments/production/evaluate/batch`, body: () => ({ flags: ["kept", "nope"] }), ok: 200 },
  { group: "webhooks", method: "GET", path: (f) => `/v1/projects/${f.slug}/webhooks`, ok: 200 },
  { group: "webhooks", method: "POST", path: (f) => `/v1/projects/${f.slug}/webhooks`, body: () => ({ url: "https://hooks.example.com/x", events: ["flag.created"], secret: WEBHOOK_SECRET, enabled: false }), ok: 201 },
  { group: "webhooks", method: "GET", path: (f) => `/v1/webhooks/${f.webhookId}`, ok: 200 },
  { group: "webhooks", method: "PATCH", path: (f) => `/v1/webhooks/${f.webhookId}`, body: () => ({ description: `Renamed ${++serial}` }), ok: 200 },
  { group: "webhooks", method: "GET", path: (f) => `/v1/webhooks/${f.webhookId}/deliveries`, ok: 200 },
  { group: "webhooks", method: "POST", path: (f) => `/v1/webhook-deliveries/${f.deliveryId}/redeliver`, ok: 202 },
  { group: "webhooks", method: "POST", path: (f) => `/v1/webhook-deliveries/${f.pendingDeliveryId}/attempt-now`, ok: 202 },
  { group: "webhooks", method: "DELETE", path: (f) => `/v1/webhooks/${f.doomedWebhookId}`, ok: 204 },
  { group: "admin", method: "GET", path: () => "/v1/users", ok: 200 },
  { group: "admin", method: "POST", path: () => "/v1/users", body: () => ({ email: `made-${++serial}@example.com`, password: "a long password", role: "viewer" }), ok: 201 },
  { group: "admin", method: "PATCH", path: (f) => `/v1/users/${f.userId}`, body: () => ({ role: "editor" }), ok: 200 },
  { group: "admin", method: "DELETE", path: (f) => `/v1/users/${f.userId}`, ok: 204 },
  { group: "admin", method: "GET", path: () => "/v1/admin-keys", ok: 200 },
  { group: "admin", method: "POST", path: () => "/v1/admin-keys", body: () => ({ name: "made" }), ok: 201 },
  { group: "admin", method: "DELETE", path: (f) => `/v1/admin-keys/${f.adminKeyId}`, ok: 204 },
  { group: "admin", method: "GET", path: () => "/v1/integrations/types", ok: 200 },
  { group: "admin", method: "GET", path: (f) => `/v1/projects/${f.slug}/integrations`, ok: 200 },
  { group: "admin", method: "POST", path: (f) => `/v1/projects/${f.slug}/integrations`, body: () => ({ type: "braze", config: { apiKey: "k" }, enabled: false }), ok: 201 },
  { group: "admin", method: "GET", path: (f) => `/v1/projects/${f.slug}/integrations/${f.integrationId}`, ok: 200 },
  { group: "admin", method: "PATCH", path: (f) => `/v1/projects/${f.slug}/integrations/${f.integrationId}`, body: () => ({ config: { attributePrefix: `p${++serial}_` } }), ok: 200 },
  { group: "admin", method: "DELETE", path: (f) => `/v1/projects/${f.slug}/integrations/${f.integrationId}`, ok: 204 },
  { group: "audit", method: "GET", path: (f) => `/v1/projects/${f.slug}/audit-log`, ok: 200 },
  { group: "auditInstance", method: "GET", path: () => "/v1/audit-log", ok: 200 },
  // Its stream (/v1/definitions/stream) never ends: its access is tested in test/http/streams.test.ts.
  { group: "definitions", method: "GET", path: () => "/v1/definitions", ok: 200 },
  { group: "session", method: "GET", path: () => "/v1/auth/me", ok: 200 },
  { group: "testing", method: "POST", path: () => "/v1/testing/sessions", body: (f) => ({ projectId: f.slug }), ok: 201 },
  { group: "testing", method: "GET", path: (f) => `/v1/testing/sessions?projectId=${f.slug}`, ok: 200 },
  { group: "testing", method: "GET", path: (f) => `/v1/testing/sessions/${f.sessionId}`, ok: 200 },
  { group: "testing", method: "PUT", path: (f) => `/v1/testing/sessions/${f.sessionId}/overrides/kept`, body: () => ({ value: serial++ % 2 === 0 }), ok: 200 },
  { group: "testing", method: "PUT", path: (f) => `/v1/testing/sessions/${f.sessionId}/overrides/batch`, body: () => ({ overrides: { kept: "on", other: true } }), ok: 200 },
  { group: "testing", method: "DELETE", path: (f) => `/v1/testing/sessions/${f.sessionId}/overrides/kept`, ok: 204 },
  { group: "testing", method: "DELETE", path: (f) => `/v1/testing/sessions/${f.sessionId}`, ok: 204 },
  { group: "projects", method: "DELETE", path: (f) => `/v1/projects/${f.slug}`, ok: 204 },
  { group: "session", method: "POST", path: () => "/v1/auth/logout", ok: 204 },
];

let h: TestApp;


async function fixture(column: Column, i: number): Promise<Fixture> {
  const slug = `column-${i}`;
  const project = await h.services.projects.create(SYSTEM, { slug, name: `Column ${i}` });
  for (const key of ["kept", "doomed"]) await h.services.flags.createFlag(SYSTEM, slug, { key, name: key });
  for (const key of ["kept", "doomed"]) await h.services.segments.createSegment(SYSTEM, slug, { key, name: key, conditions: [] });
  const rotateKeyId = (await seedApiKey(h.ctx, "eval", slug)).id;
  const deleteKeyId = (await seedApiKey(h.ctx, "eval", slug)).id;
  const userId = await seedUser(h.ctx, "viewer", `target-${i}@example.com`, "not-a-hash");
  let secret: string;
  if (column.kind === "key") secret = (await seedApiKey(h.ctx, column.scope, slug)).secret;
  else if (column.kind === "admin") secret = await seedAdminKey(h.ctx, `column ${i}`);
  else {
    const id = await seedUser(h.ctx, column.role, `column-${i}@example.com`, "not-a-hash");
    secret = (await h.ctx.credentials.issueToken(id, column.role)).token;
  }
  // A spare admin key for the DELETE /v1/admin-keys cell, never the caller's own.
  await seedAdminKey(h.ctx, `spare ${i}`);
  const spare = (await h.ctx.stores.adminKeys.list()).find((k) => k.name === `spare ${i}`)!.id;
  const tester = { kind: "apiKey", id: "key_fixture", name: "fixture", scope: "test", projectId: project.id, projectSlug: slug, environmentId: "", environmentSlug: "", secretTag: "" } as const;
  const sessionId = (await h.services.testing.create(tester, { projectId: project.id })).id;
  // Webhooks to a name that the default outbound setting refuses at send time: attempts fail at once, locally.
  const hook = { url: "http://localhost:9/hook", events: ["flag.created" as const], secret: WEBHOOK_SECRET };
  const webhookId = (await h.services.webhooks.create(SYSTEM, slug, hook)).id;
  const doomedWebhookId = (await h.services.webhooks.create(SYSTEM, slug, { ...hook, enabled: false })).id;
  const recordEvent = (environment: string) =>
    h.ctx.changeLog.commit(SYSTEM, async (tx) => {
      const rows = h.ctx.stores.webhooks.outboxRows(tx);
      const change = { event: "flag.created" as const, environment, flagKey: "kept", previous: false, current: false };
      await rows.recordEvents(project, [change], new Date(h.clock.now()).toISOString(), await rows.takers(project.id));
      return { result: undefined, changes: [] };
    });
  await recordEvent("production");
  await rawRows(h.ctx, "UPDATE webhook_deliveries SET status = 'failed', attempts = 5, next_attempt_at = NULL WHERE webhook_id = ?", [webhookId]);
  const deliveryId = (await rawRows(h.ctx, "SELECT id FROM webhook_deliveries WHERE webhook_id = ?", [webhookId]))[0]!.id as string;
  await recordEvent("staging");
  await rawRows(h.ctx, "UPDATE webhook_deliveries SET attempts = 1, next_attempt_at = '2100-01-01T00:00:00.000Z' WHERE webhook_id = ? AND status = 'pending'", [webhookId]);
  const pendingDeliveryId = (await rawRows(h.ctx, "SELECT id FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending'", [webhookId]))[0]!.id as string;
  const integrationId = (await h.services.integrations.create(SYSTEM, slug, { type: "braze", config: { apiKey: "braze-key" }, enabled: false })).id;
  return { slug, headers: bearer(secret), rotateKeyId, deleteKeyId, userId, adminKeyId: spare, sessionId, webhookId, doomedWebhookId, deliveryId, pendingDeliveryId, integrationId };
}

beforeAll(async () => {
  h = await testApp({ SVC_EDITION: "pro", SVC_RATE_LIMITS: "eval:100000,test:100000,mgmt:100000,full:100000,admin:100000,user:100000,anonymous:100000" });
  await seedUser(h.ctx, "admin", "keeper@example.com", "not-a-hash"); // so that no user delete or demotion hits "the last admin"
});
afterAll(() => h.close());

COLUMNS.forEach((column, i) => {
  describe(column.name, () => {
    let f: Fixture;
    beforeAll(async () => {
      f = await fixture(column, i);
    });
    // Last come logout (which ends a JWT) and deleting the column's project (which revokes its
    // keys): a key column logs out first, a JWT column deletes first.
    const [deleteProject, logout] = ENDPOINTS.slice(-2) as [Endpoint, Endpoint];
    const ordered = [...ENDPOINTS.slice(0, -2), ...(column.kind === "user" ? [deleteProject, logout] : [logout, deleteProject])];
    for (const e of ordered) {
      const write = e.method !== "GET";
      const allowed = ALLOWED[e.group][write ? "write" : "read"].includes(column.name);
      test(`${e.method} ${e.path({ slug: "{slug}", rotateKeyId: "{keyId}", deleteKeyId: "{keyId}", userId: "{userId}", adminKeyId: "{keyId}", sessionId: "{id}", webhookId: "{webhookId}", doomedWebhookId: "{webhookId}", deliveryId: "{deliveryId}", pendingDeliveryId: "{deliveryId}", integrationId: "{integrationId}", headers: {} })}: ${allowed ? e.ok : 403}`, async () => {
        const res = await h.request(e.method, e.path(f), { headers: f.headers, body: e.body?.(f) });
        const text = await res.text();
        if (allowed) {
          expect({ status: res.status, text }).toEqual({ status: e.ok, text: expect.any(String) });
        } else {
          // The access decision comes before any judgment of the body, one that is not JSON too.
          const unreadable = write ? await h.request(e.method, e.path(f), { headers: { ...f.headers, "content-type": "text/plain" }, body: "{not json" }) : res;
          for (const answer of [res, unreadable]) {
            expect(answer.status).toBe(403);
            const body = answer === res ? JSON.parse(text) : await answer.json();
            expect(body.error).toBe("FORBIDDEN");
            // Keys get the spec's message, and in `details` their scope and the scopes the group
            // takes; a credential the group never takes is told what it takes.
            if (column.kind === "key") {
              expect(body.message).toBe(MESSAGES.scope);
              expect(body.details).toEqual([{ path: "headers.authorization", message: `This key has scope ${column.scope}; ${KEY_TAKES[e.group]}` }]);
            }
            if (column.kind === "admin") expect(body.message).toBe(TAKES[e.group]!);
            // The Testing API takes login tokens by role (the console), but admin keys not at all.
            if (column.kind === "user") expect(body.message).toBe(e.group === "testing" ? MESSAGES.role(column.role) : (TAKES[e.group] ?? MESSAGES.role(column.role)));
          }
        }
      });
    }
  });
});

describe("without a valid credential", () => {
  const f: Fixture = { slug: "default", headers: {}, rotateKeyId: "key_x", deleteKeyId: "key_x", userId: "usr_x", adminKeyId: "key_x", sessionId: "sess_x", webhookId: "wh_x", doomedWebhookId: "wh_x", deliveryId: "del_x", pendingDeliveryId: "del_x", integrationId: "int_x" };
  const invalidKey = { error: "UNAUTHORIZED", message: "Invalid or expired API key" };
  const NO_BEARER = { path: "headers.authorization", message: 'Expected "Authorization: Bearer <key>"; the header holds a key without the Bearer prefix' };
  const cases: [string, Record<string, string>, Record<string, unknown>][] = [
    // The spec's body, and a pointer at what is missing.
    ["no Authorization header", {}, { ...invalidKey, details: [{ path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" }] }],
    ["an unknown key", bearer("svc_sk_mgmt_0123456789abcdefghijklmnopqrstuv"), invalidKey],
    ["a malformed value", { authorization: "Token abc" }, invalidKey],
    ["an empty value", { authorization: "" }, invalidKey],
    ["a bad JWT", bearer("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"), { error: "UNAUTHORIZED", message: "Invalid or expired token" }],
    // One of our keys or a login token without `Bearer `: the spec's body, and what was expected.
    ["a key without Bearer", { authorization: "svc_sk_mgmt_0123456789abcdefghijklmnopqrstuv" }, { ...invalidKey, details: [NO_BEARER] }],
    ["a JWT without Bearer", { authorization: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln" }, { ...invalidKey, details: [NO_BEARER] }],
  ];
  for (const [what, headers, expected] of cases) {
    test(`${what}: 401 UNAUTHORIZED on every protected endpoint`, async () => {
      for (const e of ENDPOINTS) {
        // A well-formed body, then bodies the parser cannot take: the credential is judged first.
        const bodies = e.method === "GET" ? [e.body?.(f)] : [e.body?.(f), "{not json", "[1]", { unknown: 1 }];
        for (const body of bodies) {
          const res = await h.request(e.method, e.path(f), { headers, body });
          const endpoint = `${e.method} ${e.path(f)} ${JSON.stringify(body)}`;
          expect({ endpoint, status: res.status }).toEqual({ endpoint, status: 401 });
          expect(await res.json()).toEqual(expected);
        }
      }
    });
  }
});

describe("a valid credential without Bearer", () => {
  test("401 with the spec's message, and details saying what was expected; with Bearer the same value works", async () => {
    const key = (await seedApiKey(h.ctx, "mgmt", "default")).secret;
    const admin = await seedAdminKey(h.ctx, "bare");
    const token = (await h.ctx.credentials.issueToken(await seedUser(h.ctx, "viewer", "bare@example.com", "not-a-hash"), "viewer")).token;
    const expected = {
      error: "UNAUTHORIZED",
      message: "Invalid or expired API key",
      details: [{ path: "headers.authorization", message: 'Expected "Authorization: Bearer <key>"; the header holds a key without the Bearer prefix' }],
    };
    for (const value of [key, admin, token]) {
      const res = await h.request("GET", "/v1/projects/default", { headers: { authorization: value } });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(expected);
      expect((await h.request("GET", "/v1/projects/default", { headers: { authorization: `Bearer ${value}` } })).status).toBe(200);
    }
  });
});

describe("keys of another project", () => {
  test("403 FORBIDDEN on every project path, and on keys of another project", async () => {
    for (const scope of ["mgmt", "full"] as const) {
      const headers = bearer((await seedApiKey(h.ctx, scope, "default")).secret);
      for (const path of ["/v1/projects/column-1", "/v1/projects/column-1/environments", "/v1/projects/column-1/environments/production", "/v1/projects/column-1/api-keys", "/v1/projects/column-1/flags", "/v1/projects/column-1/flags/kept", "/v1/projects/column-1/flags/kept/states", "/v1/projects/column-1/webhooks", "/v1/projects/column-1/audit-log"]) {
        const res = await h.request("GET", path, { headers });
        expect(res.status).toBe(403);
        expect(await res.json()).toEqual({ error: "FORBIDDEN", message: MESSAGES.otherProject });
      }
      const foreign = (await seedApiKey(h.ctx, "eval", "column-1")).id;
      for (const [method, path] of [["POST", `/v1/api-keys/${foreign}/rotate`], ["DELETE", `/v1/api-keys/${foreign}`]]) {
        const res = await h.request(method!, path!, { headers });
        expect(res.status).toBe(403);
        expect((await res.json()).error).toBe("FORBIDDEN");
      }
    }
  });
});
