/**
 * The audit log API through HTTP (docs/audit.md): filters, cursor pages (nothing skipped or
 * repeated, also while entries are appended between reads), the NDJSON export, the 400s, who
 * may read, and real writes through the API showing up with their actor. Entries are put
 * straight into change_log only for the edge cases of paging and filtering; the end-to-end
 * tests write through the API.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import type { BackgroundThread } from "../../src/background/thread";
import { loadConfig } from "../../src/config";
import { iso } from "../../src/lib/clock";
import { createLogger } from "../../src/lib/log";
import { EXPORT_BATCH } from "../../src/modules/audit/service";
import { SCAN_WINDOW } from "../../src/modules/audit/store";
import { startServer } from "../../src/server";
import type { Action, ChangeDraft, ResourceType } from "../../src/changes/entry";
import { appendEntries, bearer, countRows, json, lastPosition, seedAdminKey, seedApiKey, seedUser, tempDir, testApp, TestClock, until, userToken, type TestApp, sqliteOnly, rawRows } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let defaultId: string;

beforeAll(async () => {
  h = await testApp({ SVC_RATE_LIMITS: "admin:100000,user:100000,mgmt:100000,full:100000" });
  admin = bearer(await seedAdminKey(h.ctx, "auditor"));
  defaultId = (await h.ctx.stores.projects.bySlug("default"))!.id;
});
afterAll(() => h.close());

const get = (path: string, headers: Record<string, string> = admin) => h.request("GET", path, { headers });
const page = async (path: string, headers?: Record<string, string>) => json(await get(path, headers), 200);
const positions = (entries: { position: number }[]) => entries.map((e) => e.position);
const count = (ctx = h.ctx) => countRows(ctx, "change_log");

interface Row {
  project?: { id: string; slug: string } | null;
  environment?: string | null;
  type?: string;
  key?: string | null;
  action?: string;
  actorId?: string;
  at?: string;
}

/** Appends `n` entries through the change log's commit, as a user wrote them (paging, filter and retention edge cases only); their positions. */
function append(n: number, row: Row = {}, on: Pick<TestApp, "ctx" | "clock"> = h): Promise<number[]> {
  const project = row.project === undefined ? { id: defaultId, slug: "default" } : row.project;
  const draft: ChangeDraft = {
    project,
    environment: row.environment ?? null,
    resource: { type: (row.type ?? "flag") as ResourceType, id: "res_x", key: row.key === undefined ? "some-flag" : row.key },
    action: (row.action ?? "updated") as Action,
    changes: { name: { before: "a", after: "b" } },
  };
  const author = { actor: { type: "user" as const, id: row.actorId ?? "usr_someone", label: "someone@example.com" }, requestId: null };
  return appendEntries(on, Array.from({ length: n }, () => draft), author, row.at);
}

/** Every page of `path` (with `limit`), following nextCursor; `between` runs before each next page. */
async function walk(path: string, limit: number, between?: () => void | Promise<void>) {
  const all: any[] = [];
  const sep = path.includes("?") ? "&" : "?";
  let body = await page(`${path}${sep}limit=${limit}`);
  for (;;) {
    expect(body.entries.length).toBeLessThanOrEqual(limit);
    all.push(...body.entries);
    if (body.nextCursor === null) return all;
    expect(body.entries).toHaveLength(limit);
    await between?.();
    body = await page(`${path}${sep}limit=${limit}&cursor=${body.nextCursor}`);
  }
}

describe("pages", () => {
  beforeEach(() => rawRows(h.ctx, "DELETE FROM change_log"));

  test("newest first, 50 by default; nextCursor walks every entry once, and is null on the last page", async () => {
    const made = await append(123);
    const first = await page("/v1/projects/default/audit-log");
    expect(positions(first.entries)).toEqual(made.slice(-50).reverse());
    expect(first.nextCursor).toEqual(expect.any(String));
    expect(positions(await walk("/v1/projects/default/audit-log", 50))).toEqual([...made].reverse());
    // An exact multiple: the last full page says there is no more (no empty page after it).
    expect(positions(await walk("/v1/projects/default/audit-log", 41))).toEqual([...made].reverse());
    expect(positions((await page("/v1/projects/default/audit-log?limit=200")).entries)).toEqual([...made].reverse());
    expect((await page("/v1/projects/default/audit-log?limit=200")).nextCursor).toBeNull();
  });

  test("entries appended between page reads never shift the pages: nothing skipped, nothing repeated", async () => {
    const made = await append(100);
    const appended: number[] = [];
    const seen = await walk("/v1/projects/default/audit-log", 7, async () => {
      appended.push(...(await append(3)));
    });
    expect(positions(seen)).toEqual([...made].reverse());
    // The appended ones are on a fresh first page.
    expect(positions((await page("/v1/projects/default/audit-log?limit=200")).entries).slice(0, appended.length)).toEqual([...appended].reverse());
  });

  test("a filter without an index stops at its scan window: a short (even empty) page with a cursor, until the match; the export finds it", async () => {
    const [rare] = await append(1, { actorId: "usr_rare" });
    const [other] = await append(1, { project: null, type: "user", key: "x@example.com" });
    await append(SCAN_WINDOW + 10);
    const first = await page("/v1/audit-log?actorId=usr_rare&limit=5");
    expect(first.entries).toEqual([]);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await page(`/v1/audit-log?actorId=usr_rare&limit=5&cursor=${first.nextCursor}`);
    expect({ positions: positions(second.entries), nextCursor: second.nextCursor }).toEqual({ positions: [rare!], nextCursor: null });
    // The window's end: everything below it is for the next page, of any filter.
    const low = Number(Buffer.from(first.nextCursor, "base64url").toString());
    expect(low).toBe((await lastPosition(h.ctx)) - SCAN_WINDOW + 1);
    expect(positions((await page(`/v1/projects/default/audit-log?limit=3&cursor=${first.nextCursor}`)).entries)).toEqual([low - 1, low - 2, low - 3]);
    const exported = await (await get("/v1/audit-log?actorId=usr_rare", { ...admin, accept: "application/x-ndjson" })).text();
    expect(exported.trimEnd().split("\n").map((l) => JSON.parse(l).position)).toEqual([rare!]);
    expect(other).toBe(rare! + 1);
  });

  test("an empty log: no entries, no cursor", async () => {
    expect(await page("/v1/audit-log")).toEqual({ entries: [], nextCursor: null });
  });
});

describe("filters", () => {
  let other: { id: string; slug: string };
  beforeAll(async () => {
    other = (await json(await h.request("POST", "/v1/projects", { headers: admin, body: { slug: "audit-other", name: "Other" } }), 201)) as { id: string; slug: string };
  });
  beforeEach(() => rawRows(h.ctx, "DELETE FROM change_log"));

  test("the project route reads only its project's entries; the instance route reads all, instance-level ones included", async () => {
    const mine = await append(2);
    const theirs = await append(2, { project: other });
    const instance = await append(1, { project: null, type: "user", key: "someone@example.com" });
    expect(positions((await page("/v1/projects/default/audit-log")).entries)).toEqual([...mine].reverse());
    expect(positions((await page("/v1/projects/audit-other/audit-log")).entries)).toEqual([...theirs].reverse());
    expect(positions((await page("/v1/audit-log")).entries)).toEqual([...mine, ...theirs, ...instance].reverse());
  });

  test("resourceKey: a flag's whole history, its states in every environment included, and no other flag's", async () => {
    const history = [
      ...(await append(1, { key: "checkout", action: "created" })),
      ...(await append(1, { key: "checkout", type: "flag_state", environment: "production", action: "enabled" })),
      ...(await append(1, { key: "checkout", type: "flag_state", environment: "staging", action: "enabled" })),
      ...(await append(1, { key: "checkout", action: "updated" })),
    ];
    await append(2, { key: "checkout-v2" });
    await append(1, { key: "checkout", project: other });
    const body = await page("/v1/projects/default/audit-log?resourceKey=checkout");
    expect(positions(body.entries)).toEqual([...history].reverse());
    expect(body.entries.map((e: any) => [e.resource.type, e.environment, e.action])).toEqual([
      ["flag", null, "updated"],
      ["flag_state", "staging", "enabled"],
      ["flag_state", "production", "enabled"],
      ["flag", null, "created"],
    ]);
    // The instance route: every project's resource of that key.
    expect((await page("/v1/audit-log?resourceKey=checkout")).entries).toHaveLength(5);
  });

  test("resourceType, actorId, action, and several at once (AND)", async () => {
    const states = await append(2, { type: "flag_state", environment: "production", action: "disabled" });
    const byBob = await append(2, { actorId: "usr_bob" });
    const bobDisables = await append(1, { actorId: "usr_bob", type: "flag_state", environment: "production", action: "disabled" });
    await append(1, { type: "webhook", key: null, action: "deleted" });
    expect(positions((await page("/v1/projects/default/audit-log?resourceType=flag_state")).entries)).toEqual([...states, ...bobDisables].reverse());
    expect(positions((await page("/v1/projects/default/audit-log?actorId=usr_bob")).entries)).toEqual([...byBob, ...bobDisables].reverse());
    expect(positions((await page("/v1/projects/default/audit-log?action=disabled")).entries)).toEqual([...states, ...bobDisables].reverse());
    expect(positions((await page("/v1/projects/default/audit-log?action=disabled&actorId=usr_bob&resourceType=flag_state")).entries)).toEqual(bobDisables);
    expect((await page("/v1/projects/default/audit-log?resourceType=webhook")).entries[0].resource).toEqual({ type: "webhook", id: "res_x", key: null });
  });

  test("since is inclusive, until exclusive; offsets are read as the instant they name", async () => {
    const [a] = await append(1, { at: "2026-11-20T10:00:00.000Z" });
    const [b] = await append(1, { at: "2026-11-21T10:00:00.000Z" });
    const [c] = await append(1, { at: "2026-11-22T10:00:00.000Z" });
    const q = async (query: string) => positions((await page(`/v1/projects/default/audit-log?${query}`)).entries);
    expect(await q("since=2026-11-21T10:00:00.000Z")).toEqual([c!, b!]);
    expect(await q("until=2026-11-21T10:00:00.000Z")).toEqual([a!]);
    expect(await q("since=2026-11-21T10:00:00Z&until=2026-11-22T10:00:00.000Z")).toEqual([b!]);
    // 12:00 at +02:00 is 10:00 UTC.
    expect(await q(`since=${encodeURIComponent("2026-11-21T12:00:00+02:00")}`)).toEqual([c!, b!]);
    expect(await q("since=2026-11-21T10:00:00.001Z")).toEqual([c!]);
  });
});

describe("the entry", () => {
  test("has exactly the documented fields", async () => {
    await rawRows(h.ctx, "DELETE FROM change_log");
    const [position] = await append(1, { type: "flag_state", environment: "production", key: "shape", action: "enabled" });
    const [entry] = (await page("/v1/projects/default/audit-log")).entries;
    expect(entry).toEqual({
      id: expect.stringMatching(/^aud_[A-Za-z0-9]{30}$/),
      position,
      at: iso(h.clock.now()),
      actor: { type: "user", id: "usr_someone", label: "someone@example.com" },
      requestId: null,
      project: "default",
      environment: "production",
      resource: { type: "flag_state", id: "res_x", key: "shape" },
      action: "enabled",
      changes: { name: { before: "a", after: "b" } },
    });
  });
});

describe("NDJSON export", () => {
  const ndjson = { ...({} as Record<string, string>), accept: "application/x-ndjson" };
  beforeEach(() => rawRows(h.ctx, "DELETE FROM change_log"));

  test("the whole filtered log, one entry a line, newest first, across several reads; limit does not apply", async () => {
    const made = await append(EXPORT_BATCH * 2 + 34, { key: "exported" });
    await append(10, { key: "not-exported" });
    const res = await get("/v1/projects/default/audit-log?resourceKey=exported&limit=5", { ...admin, ...ndjson });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    expect(res.headers.get("x-request-id")).toEqual(expect.any(String));
    const text = await res.text();
    expect(text.endsWith("\n")).toBe(true);
    const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(positions(lines)).toEqual([...made].reverse());
    // Each line is the entry as a page shows it.
    expect(lines.slice(0, 3)).toEqual((await page("/v1/projects/default/audit-log?resourceKey=exported&limit=3")).entries);
  });

  test("from a cursor on; an Accept that names NDJSON among others gets it, one with q=0 does not", async () => {
    const made = await append(30);
    const { nextCursor } = await page("/v1/projects/default/audit-log?limit=10");
    const rest = await (await get(`/v1/projects/default/audit-log?cursor=${nextCursor}`, { ...admin, accept: "application/json;q=0.5, application/x-ndjson" })).text();
    expect(positions(rest.trimEnd().split("\n").map((l) => JSON.parse(l)))).toEqual(made.slice(0, 20).reverse());
    const refused = await get("/v1/projects/default/audit-log", { ...admin, accept: "application/x-ndjson;q=0, application/json" });
    expect(refused.headers.get("content-type")).toStartWith("application/json");
    expect((await refused.json()).entries).toHaveLength(30);
  });

  test("an empty export is an empty body; an unknown project is a JSON 404, before any line", async () => {
    const empty = await get("/v1/projects/default/audit-log", { ...admin, ...ndjson });
    expect({ status: empty.status, text: await empty.text() }).toEqual({ status: 200, text: "" });
    const missing = await get("/v1/projects/nope/audit-log", { ...admin, ...ndjson });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "NOT_FOUND", message: "Project nope not found" });
  });
});

describe("bad queries: 400 VALIDATION_ERROR with details at query.<name>", () => {
  const cases: [string, string, string][] = [
    ["foo=1", "query.foo", "Unknown field"],
    ["resourcekey=x", "query.resourcekey", "Unknown field"],
    ["resourceType=flags", "query.resourceType", "Must be one of project, environment, flag, flag_state, api_key, admin_key, user, webhook, plugin, integration, schedule, segment"],
    ["action=toggled", "query.action", "Must be one of created, updated, deleted, enabled, disabled, rotated"],
    ["resourceKey=", "query.resourceKey", "Must be a string of 1 to 256 characters"],
    ["since=yesterday", "query.since", "Must be an ISO 8601 date and time with a zone, e.g. 2026-11-22T10:00:00.000Z"],
    ["until=2026-11-22", "query.until", "Must be an ISO 8601 date and time with a zone, e.g. 2026-11-22T10:00:00.000Z"],
    ["since=2026-11-22T10:00:00", "query.since", "Must be an ISO 8601 date and time with a zone, e.g. 2026-11-22T10:00:00.000Z"],
    ["since=2026-02-30T10:00:00Z", "query.since", "Not a valid date and time"],
    ["until=2026-11-22T24:30:00Z", "query.until", "Not a valid date and time"],
    ["limit=0", "query.limit", "Must be an integer from 1 to 200"],
    ["limit=201", "query.limit", "Must be an integer from 1 to 200"],
    ["limit=1e2", "query.limit", "Must be an integer from 1 to 200"],
    ["limit=abc", "query.limit", "Must be an integer from 1 to 200"],
    ["cursor=not%20a%20cursor", "query.cursor", "Must be a nextCursor of this API"],
    // Well-formed base64url, but not what nextCursor writes: "abc", "00", "-1", "1.5".
    ["cursor=YWJj", "query.cursor", "Must be a nextCursor of this API"],
    ["cursor=MDA", "query.cursor", "Must be a nextCursor of this API"],
    ["cursor=LTE", "query.cursor", "Must be a nextCursor of this API"],
    ["cursor=MS41", "query.cursor", "Must be a nextCursor of this API"],
  ];
  for (const [query, path, message] of cases) {
    test(`${query}: ${path}`, async () => {
      for (const route of ["/v1/audit-log", "/v1/projects/default/audit-log"]) {
        for (const accept of ["application/json", "application/x-ndjson"]) {
          const res = await get(`${route}?${query}`, { ...admin, accept });
          expect(res.status).toBe(400);
          expect(res.headers.get("content-type")).toStartWith("application/json");
          expect(await res.json()).toEqual({ error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path, message }] });
        }
      }
    });
  }
});

describe("who may read", () => {
  test("the project's mgmt and full keys and every role read the project's log; another project's key is 403; an unknown slug 404", async () => {
    for (const scope of ["mgmt", "full"] as const) expect((await get("/v1/projects/default/audit-log", bearer((await seedApiKey(h.ctx, scope)).secret))).status).toBe(200);
    for (const role of ["admin", "editor", "viewer"] as const) expect((await get("/v1/projects/default/audit-log", await userToken(h.ctx, role))).status).toBe(200);
    const foreign = await get("/v1/projects/default/audit-log", bearer((await seedApiKey(h.ctx, "full", "audit-other")).secret));
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toEqual({ error: "FORBIDDEN", message: "This key does not have access to this project" });
    const missing = await get("/v1/projects/nope/audit-log");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "NOT_FOUND", message: "Project nope not found" });
  });

  test("the instance's log: admin keys and admin logins; editors, viewers and project keys get 403", async () => {
    expect((await get("/v1/audit-log", await userToken(h.ctx, "admin"))).status).toBe(200);
    for (const headers of [await userToken(h.ctx, "editor"), await userToken(h.ctx, "viewer"), bearer((await seedApiKey(h.ctx, "full")).secret)]) {
      const res = await get("/v1/audit-log", headers);
      expect(res.status).toBe(403);
      expect((await res.json()).error).toBe("FORBIDDEN");
    }
  });

  test("no write route: POST is 405", async () => {
    const res = await h.request("POST", "/v1/audit-log", { headers: admin, body: {} });
    expect(res.status).toBe(405);
  });
});

describe("retention on the server's background thread", () => {
  // SQLite-only: the background thread (src/background/) prunes a SQLite data dir; on PostgreSQL
  // retention runs in the scheduler on one node (server.ts).
  sqliteOnly("entries older than SVC_AUDIT_RETENTION_DAYS go, in batches, newer ones stay; the worker's log line says how many", async () => {
    const dir = tempDir();
    const lines: string[] = [];
    const config = loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1", SVC_AUDIT_RETENTION_DAYS: "30", SVC_LOG_LEVEL: "info" });
    // No injected clock: the server prunes on its background thread.
    // The entries' times come from a test clock; the background thread keeps the system clock.
    const clock = new TestClock(Date.now());
    const server = await startServer(config, { log: createLogger({ level: "info", format: "json", write: (chunk) => lines.push(chunk) }), clock, background: true });
    try {
      const on = { ctx: server.ctx, clock };
      const project = { id: (await server.ctx.stores.projects.bySlug("default"))!.id, slug: "default" };
      const kept = await count(server.ctx);
      await append(2500, { project, at: iso(Date.now() - 31 * 86_400_000) }, on);
      await append(3, { project, at: iso(Date.now() - 29 * 86_400_000) }, on);
      (server.ctx.deliveries as BackgroundThread).pruneAuditLog();
      const logged = () => lines.join("").split("\n").find((l) => l.includes("old audit-log entries removed"));
      for (const started = Date.now(); !logged(); await Bun.sleep(20)) if (Date.now() - started > 5_000) throw new Error("timed out");
      expect(JSON.parse(logged()!)).toMatchObject({ level: "info", entries: 2500, retentionDays: 30 });
      expect(await count(server.ctx)).toBe(kept + 3);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("real writes through the API", () => {
  const history = async () => (await page("/v1/projects/default/audit-log?resourceKey=e2e-flag")).entries;
  const adminKeyId = async () => (await rawRows(h.ctx, "SELECT id FROM admin_keys WHERE name = 'auditor'"))[0]!.id;

  test("each write appears once, with its actor, request id, resource and changes; a flag's states are in its history", async () => {
    const created = await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "e2e-flag", name: "E2E" } });
    expect(created.status).toBe(201);
    const flagId = (await created.json()).id;
    const editorId = { id: await seedUser(h.ctx, "editor", "audit-editor@example.com"), email: "audit-editor@example.com" };
    const editor = bearer((await h.ctx.credentials.issueToken(editorId.id, "editor")).token);
    const renamed = await h.request("PATCH", "/v1/projects/default/flags/e2e-flag", { headers: editor, body: { name: "E2E renamed" } });
    expect(renamed.status).toBe(200);
    const mgmt = await seedApiKey(h.ctx, "mgmt", "default", "production");
    const enabled = await h.request("PUT", "/v1/projects/default/flags/e2e-flag/states/production", { headers: bearer(mgmt.secret), body: { enabled: true } });
    expect(enabled.status).toBe(200);

    const [state, patch, create] = await history();
    expect(create).toMatchObject({
      actor: { type: "admin_key", id: await adminKeyId(), label: "auditor" },
      requestId: created.headers.get("x-request-id"),
      project: "default",
      environment: null,
      resource: { type: "flag", id: flagId, key: "e2e-flag" },
      action: "created",
    });
    expect(create.changes.name).toEqual({ before: null, after: "E2E" });
    expect(patch).toMatchObject({
      actor: { type: "user", id: editorId.id, label: editorId.email },
      requestId: renamed.headers.get("x-request-id"),
      resource: { type: "flag", id: flagId, key: "e2e-flag" },
      action: "updated",
      changes: { name: { before: "E2E", after: "E2E renamed" } },
    });
    expect(state).toMatchObject({
      actor: { type: "api_key", id: mgmt.id, label: "mgmt key" },
      requestId: enabled.headers.get("x-request-id"),
      environment: "production",
      resource: { type: "flag_state", id: flagId, key: "e2e-flag" },
      action: "enabled",
    });
    // The same entries in the instance's log, filtered by actor.
    expect((await page(`/v1/audit-log?actorId=${mgmt.id}`)).entries).toEqual([state]);
  });

  test("actorId takes a user's e-mail address, in any case, on both routes; a user deleted since is found too", async () => {
    const made = await json(await h.request("POST", "/v1/users", { headers: admin, body: { email: "Ann.Auditor@Example.com", password: "a long password", role: "editor" } }), 201);
    const ann = bearer((await h.ctx.credentials.issueToken(made.id, "editor")).token);
    await json(await h.request("POST", "/v1/projects/default/flags", { headers: ann, body: { key: "anns-flag", name: "Ann's" } }), 201);
    await json(await h.request("PATCH", "/v1/projects/default/flags/anns-flag", { headers: ann, body: { name: "Ann's flag" } }), 200);
    const byId = (await page(`/v1/audit-log?actorId=${made.id}`)).entries;
    expect(byId.map((e: { action: string }) => e.action)).toEqual(["updated", "created"]);
    for (const email of ["ann.auditor@example.com", "ANN.AUDITOR@EXAMPLE.COM", "Ann.Auditor@Example.com"]) {
      const q = `actorId=${encodeURIComponent(email)}`;
      expect((await page(`/v1/audit-log?${q}`)).entries).toEqual(byId);
      expect((await page(`/v1/projects/default/audit-log?${q}`)).entries).toEqual(byId);
    }
    // The user's own entry (created by the admin key) is not by the user.
    expect(byId.every((e: { actor: { id: string } }) => e.actor.id === made.id)).toBe(true);
    // Deleted, the user's entries still answer to the address.
    expect((await h.request("DELETE", `/v1/users/${made.id}`, { headers: admin })).status).toBe(204);
    expect((await page("/v1/audit-log?actorId=ann.auditor%40example.com")).entries).toEqual(byId);
    expect((await page("/v1/audit-log?actorId=nobody%40example.com")).entries).toEqual([]);
  });

  test("a write that changes nothing, and a refused one, append nothing", async () => {
    const before = await count();
    expect((await h.request("PATCH", "/v1/projects/default/flags/e2e-flag", { headers: admin, body: { name: "E2E renamed" } })).status).toBe(200);
    expect((await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "e2e-flag", name: "again" } })).status).toBe(409);
    expect((await h.request("PUT", "/v1/projects/default/flags/e2e-flag/states/nowhere", { headers: admin, body: { enabled: true } })).status).toBe(404);
    expect(await count()).toBe(before);
  });

  test("pages walked while 8 writers write: every entry up to the first page once, newest first", async () => {
    for (let w = 0; w < 8; w++) await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: `writer-${w}`, name: `Writer ${w}` } }), 201);
    // Each writer yields a turn between writes (in one process, a writer that never waits on a
    // timer or I/O would hold the turn); the walk reads its next page once one more entry is in (on
    // PostgreSQL a page reads faster than a write commits).
    let writing = true;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; writing; i++) {
        const res = await h.request("PUT", `/v1/projects/default/flags/writer-${w}/states/staging`, { headers: admin, body: { enabled: i % 2 === 0 } });
        expect(res.status).toBe(200);
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    while (await count() < 200) await Bun.sleep(5);
    const walked = await walk("/v1/audit-log", 5, async () => {
      const seen = await lastPosition(h.ctx);
      await until("a write between pages", async () => (await lastPosition(h.ctx)) > seen);
    });
    const afterWalk = await count();
    writing = false;
    await Promise.all(writers);
    const top = walked[0].position;
    const all = await rawRows(h.ctx, "SELECT position FROM change_log WHERE position <= ? ORDER BY position DESC", [top]);
    expect(positions(walked)).toEqual(all.map((r) => Number(r.position)));
    // The writers did write while the pages were read: entries newer than the first page, one at least between each two pages.
    expect(afterWalk).toBeGreaterThanOrEqual(all.length + 40);
  });
});
