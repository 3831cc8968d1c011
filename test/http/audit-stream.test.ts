/**
 * The live audit log (docs/audit.md, "Live"): GET /v1/audit-log/stream and
 * /v1/projects/{slug}/audit-log/stream send each change-log entry their caller may read, as it
 * commits, in the list's shape; filters as the list; resume with Last-Event-ID or ?since= (no gap,
 * no repeat at the seam); access as the list; a client that does not read is dropped.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { SYSTEM } from "../../src/changes/entry";
import { MAX_QUEUED_CHUNKS } from "../../src/modules/streams/sse";
import { bearer, json, lastPosition, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, rawRows } from "../helpers";
import { SseReader, type SseEvent } from "../sse";

let h: TestApp;
afterEach(() => h?.close());

async function setup() {
  h = await testApp({ SVC_RATE_LIMITS: "admin:100000,user:100000,mgmt:100000,full:100000" });
  return bearer(await seedAdminKey(h.ctx, "ops"));
}

const INSTANCE = "/v1/audit-log/stream";
const PROJECT = "/v1/projects/default/audit-log/stream";

async function open(path: string, headers: Record<string, string>, lastEventId?: string): Promise<SseReader> {
  const res = await h.request("GET", path, { headers: { ...headers, ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const r = new SseReader(res);
  expect(await r.next()).toEqual({ retry: "1000" });
  return r;
}

const change = (e: SseEvent | "end") => {
  if (e === "end") throw new Error("the stream ended");
  expect(e.event).toBe("change");
  const data = JSON.parse(e.data!);
  expect(e.id).toBe(String(data.position));
  return data;
};

const createFlag = (key: string, project = "default") => h.services.flags.createFlag(SYSTEM, project, { key, name: key });
const rename = (key: string, name: string) => h.services.flags.updateFlag(SYSTEM, "default", key, { name });

describe("live entries", () => {
  test("each entry as it commits, exactly as the list's item; id is its position", async () => {
    const admin = await setup();
    const r = await open(INSTANCE, admin);
    expect(h.ctx.auditStreams.size()).toBe(1);
    const metrics = await (await h.request("GET", "/metrics", { headers: admin })).text();
    expect(metrics).toContain('flagsvc_streams_connected{kind="audit"} 1');
    await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "checkout", name: "Checkout" } }), 201);
    await json(await h.request("PUT", "/v1/projects/default/flags/checkout/states/production", { headers: admin, body: { enabled: true } }), 200);
    const listed = (await json(await h.request("GET", "/v1/audit-log?limit=2", { headers: admin }), 200)).entries;
    expect(change(await r.nextEvent())).toEqual(listed[1]);
    expect(change(await r.nextEvent())).toEqual(listed[0]);
    expect(listed[0].actor).toEqual({ type: "admin_key", id: expect.any(String), label: "ops" });
    // The heartbeat: a ping comment.
    h.ctx.auditStreams.heartbeat();
    expect(await r.next()).toEqual({ comment: "ping" });
    await r.cancel();
    expect(h.ctx.auditStreams.size()).toBe(0);
  });

  test("filters as the list: resourceType, resourceKey, actorId, action", async () => {
    const admin = await setup();
    const editor = await userToken(h.ctx, "editor");
    const me = await json(await h.request("GET", "/v1/auth/me", { headers: editor }), 200);
    const byKey = await open(`${PROJECT}?resourceKey=a`, admin);
    const states = await open(`${PROJECT}?resourceType=flag_state&action=enabled`, admin);
    const byEditor = await open(`${INSTANCE}?actorId=${me.id}`, admin);
    await createFlag("a");
    await createFlag("b");
    await h.services.flags.putState(SYSTEM, "default", "b", "production", { enabled: false, rolloutPercentage: 10 });
    await json(await h.request("PUT", "/v1/projects/default/flags/b/states/staging", { headers: editor, body: { enabled: true } }), 200);
    await rename("a", "A");
    const a1 = change(await byKey.nextEvent());
    expect([a1.resource.key, a1.action]).toEqual(["a", "created"]);
    const a2 = change(await byKey.nextEvent());
    expect([a2.resource.key, a2.action]).toEqual(["a", "updated"]);
    const s = change(await states.nextEvent());
    expect([s.resource.type, s.environment, s.action]).toEqual(["flag_state", "staging", "enabled"]);
    const e = change(await byEditor.nextEvent());
    expect([e.actor.label, e.environment]).toEqual([me.email, "staging"]);
    // Nothing else came: the next event on each is the next matching one.
    await rename("a", "A2");
    await h.services.flags.putState(SYSTEM, "default", "a", "production", { enabled: true });
    expect(change(await byKey.nextEvent()).changes.name.after).toBe("A2");
    expect(change(await states.nextEvent()).resource.key).toBe("a");
  });

  test("a project's stream sees only its project; the instance's sees every project and instance-level entries", async () => {
    const admin = await setup();
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const project = await open(PROJECT, admin);
    const other = await open("/v1/projects/other/audit-log/stream", admin);
    const all = await open(INSTANCE, admin);
    await createFlag("x", "other");
    await json(await h.request("POST", "/v1/users", { headers: admin, body: { email: "new@example.com", password: "a long enough password", role: "viewer" } }), 201);
    await createFlag("y");
    expect(change(await project.nextEvent()).resource.key).toBe("y");
    expect(change(await other.nextEvent()).resource.key).toBe("x");
    expect((await Promise.all([1, 2, 3].map(() => all.nextEvent()))).map((e) => change(e).resource.key)).toEqual(["x", "new@example.com", "y"]);
  });

  test("a project's stream ends after the project's deleted entry", async () => {
    const admin = await setup();
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const r = await open("/v1/projects/other/audit-log/stream", admin);
    expect((await h.request("DELETE", "/v1/projects/other", { headers: admin })).status).toBe(204);
    expect(change(await r.nextEvent()).action).toBe("deleted");
    expect(await r.nextEvent()).toBe("end");
  });
});

describe("access: as the audit list", () => {
  test("the project's stream: every role, mgmt and full keys of the project, admin keys; others 403, none 401", async () => {
    const admin = await setup();
    await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "O" }, headers: admin }), 201);
    const allowed = {
      viewer: await userToken(h.ctx, "viewer"),
      editor: await userToken(h.ctx, "editor"),
      admin: await userToken(h.ctx, "admin"),
      adminKey: admin,
      mgmt: bearer((await seedApiKey(h.ctx, "mgmt")).secret),
      full: bearer((await seedApiKey(h.ctx, "full", "default", "production")).secret),
    };
    const readers = await Promise.all(Object.values(allowed).map((headers) => open(PROJECT, headers)));
    await createFlag("seen");
    for (const r of readers) expect(change(await r.nextEvent()).resource.key).toBe("seen");
    for (const scope of ["eval", "test", "client"] as const) {
      const res = await h.request("GET", PROJECT, { headers: bearer((await seedApiKey(h.ctx, scope)).secret) });
      expect((await json(res, 403)).message).toBe("This key scope does not have access to this endpoint");
    }
    expect((await json(await h.request("GET", "/v1/projects/other/audit-log/stream", { headers: allowed.mgmt }), 403)).message).toBe("This key does not have access to this project");
    expect((await h.request("GET", PROJECT)).status).toBe(401);
    expect((await json(await h.request("GET", "/v1/projects/nope/audit-log/stream", { headers: admin }), 404)).error).toBe("NOT_FOUND");
  });

  test("the instance's stream: admin keys and admins only", async () => {
    const admin = await setup();
    await open(INSTANCE, admin);
    await open(INSTANCE, await userToken(h.ctx, "admin"));
    for (const role of ["viewer", "editor"] as const) expect((await h.request("GET", INSTANCE, { headers: await userToken(h.ctx, role) })).status).toBe(403);
    expect((await h.request("GET", INSTANCE, { headers: bearer((await seedApiKey(h.ctx, "full")).secret) })).status).toBe(403);
    expect((await h.request("GET", INSTANCE)).status).toBe(401);
  });

  test("a stream ends when its caller is no longer accepted: token revoked (logout), key deleted", async () => {
    const admin = await setup();
    const viewer = await userToken(h.ctx, "viewer");
    const key = await json(await h.request("POST", "/v1/projects/default/api-keys", { headers: admin, body: { name: "k", scope: "mgmt", environment: "production" } }), 201);
    const byUser = await open(PROJECT, viewer);
    const byKey = await open(PROJECT, bearer(key.key));
    expect((await h.request("POST", "/v1/auth/logout", { headers: viewer })).status).toBe(204);
    h.ctx.auditStreams.heartbeat();
    expect(await byUser.nextEvent()).toBe("end");
    expect((await h.request("DELETE", `/v1/api-keys/${key.id}`, { headers: admin })).status).toBe(204);
    // The key's own deleted entry may come first; then the stream ends (the credentials' reload).
    let next = await byKey.nextEvent();
    while (next !== "end") next = await byKey.nextEvent();
    expect(h.ctx.auditStreams.size()).toBe(0);
  });

  test("bad query: unknown parameters, a time as since, until: 400 and no stream", async () => {
    const admin = await setup();
    for (const q of ["since=2026-01-01T00:00:00Z", "until=2026-01-01T00:00:00Z", "cursor=abc", "limit=5", "resourceType=nope"]) {
      const body = await json(await h.request("GET", `${PROJECT}?${q}`, { headers: admin }), 400);
      expect(body.error).toBe("VALIDATION_ERROR");
    }
    expect(h.ctx.auditStreams.size()).toBe(0);
  });
});

describe("resume", () => {
  test("Last-Event-ID: the entries after it, then live ones; ?since= the same; Last-Event-ID wins", async () => {
    const admin = await setup();
    await createFlag("a");
    const from = await lastPosition(h.ctx);
    await rename("a", "1");
    await rename("a", "2");
    const r = await open(`${PROJECT}?since=1`, admin, String(from));
    expect(change(await r.nextEvent()).changes.name.after).toBe("1");
    expect(change(await r.nextEvent()).changes.name.after).toBe("2");
    await rename("a", "3");
    expect(change(await r.nextEvent()).changes.name.after).toBe("3");
    const bySince = await open(`${PROJECT}?since=${from}&resourceType=flag`, admin);
    expect(change(await bySince.nextEvent()).changes.name.after).toBe("1");
  });

  test("under concurrent writes: no gap and no repeat at the seam, with filters; a position ahead of the log counts as its end", async () => {
    const admin = await setup();
    for (let i = 0; i < 450; i++) await rename(i % 2 ? "x" : "a", `before ${i}`).catch(() => createFlag(i % 2 ? "x" : "a"));
    const from = (await lastPosition(h.ctx)) - 440;
    const r = await open(`${PROJECT}?resourceKey=a`, admin, String(from));
    const writes = (async () => {
      for (let i = 0; i < 60; i++) await rename(i % 3 ? "a" : "x", `during ${i}`);
    })();
    await writes;
    const expected = ((await rawRows(h.ctx, "SELECT position FROM change_log WHERE position > ? AND resource_key = 'a' ORDER BY position", [from])) as { position: number }[]).map((p) => Number(p.position));
    const got: number[] = [];
    while (got.length < expected.length) got.push(change(await r.nextEvent()).position);
    expect(got).toEqual(expected);
    await rename("a", "after");
    expect(change(await r.nextEvent()).changes.name.after).toBe("after");
    // Ahead of the log: from its end on.
    const ahead = await open(PROJECT, admin, String((await lastPosition(h.ctx)) + 1000));
    await rename("a", "next");
    expect(change(await ahead.nextEvent()).changes.name.after).toBe("next");
  });
});

test(`a client that does not read is dropped past ${MAX_QUEUED_CHUNKS} unread events; the others go on`, async () => {
  const admin = await setup();
  await createFlag("a");
  const slow = await open(PROJECT, admin);
  const reader = await open(PROJECT, admin);
  expect(h.ctx.auditStreams.size()).toBe(2);
  let read = 0;
  for (let i = 0; i <= MAX_QUEUED_CHUNKS + 2; i++) {
    await h.services.flags.putState(SYSTEM, "default", "a", "production", { enabled: i % 2 === 0 });
    change(await reader.nextEvent());
    read++;
  }
  expect(read).toBe(MAX_QUEUED_CHUNKS + 3);
  expect(h.ctx.auditStreams.size()).toBe(1);
  // What was queued is still delivered, then the end: the client resumes from its last id.
  let last = "";
  for (let e = await slow.nextEvent(); e !== "end"; e = await slow.nextEvent()) last = e.id!;
  const resumed = await open(PROJECT, admin, last);
  expect(Number(change(await resumed.nextEvent()).position)).toBe(Number(last) + 1);
});
