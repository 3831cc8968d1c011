/**
 * The Testing API with a login token (the console's credential; docs/decisions.md: "The console's test sessions and flag-list
 * sparklines"): viewers read, editors and admins write, any project named by id or slug, and the
 * session serves its override to an evaluation of that project.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, rawRows } from "../helpers";

const SESSIONS = "/v1/testing/sessions";

describe("test sessions with a login token", () => {
  let h: TestApp;
  let admin: Record<string, string>;
  let editor: Record<string, string>;
  let viewer: Record<string, string>;
  let projectId: string;
  beforeEach(async () => {
    h = await testApp();
    admin = bearer(await seedAdminKey(h.ctx));
    editor = await userToken(h.ctx, "editor");
    viewer = await userToken(h.ctx, "viewer");
    projectId = (await json(await h.request("GET", "/v1/projects/default", { headers: admin }), 200)).id;
  });
  afterEach(() => h.close());

  const rows = async () => JSON.stringify([(await rawRows(h.ctx, "SELECT * FROM test_sessions ORDER BY id")), (await rawRows(h.ctx, "SELECT * FROM session_overrides ORDER BY session_id"))]);

  test("an editor creates, overrides, lists, removes and destroys; the override reaches evaluation with the token", async () => {
    await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "checkout", name: "Checkout" } }), 201);
    const s = await json(await h.request("POST", SESSIONS, { headers: editor, body: { projectId: "default", label: "console" } }), 201);
    expect(s.projectId).toBe(projectId);
    expect(await json(await h.request("PUT", `${SESSIONS}/${s.id}/overrides/checkout`, { headers: editor, body: { value: true } }), 200)).toEqual({ id: s.id, overrides: { checkout: true } });
    // By id or slug: the same list.
    const bySlug = await json(await h.request("GET", `${SESSIONS}?projectId=default`, { headers: editor }), 200);
    expect(bySlug.sessions.map((x: { id: string }) => x.id)).toEqual([s.id]);
    expect(await json(await h.request("GET", `${SESSIONS}?projectId=${projectId}`, { headers: viewer }), 200)).toEqual(bySlug);

    const evalKey = bearer((await seedApiKey(h.ctx, "eval")).secret);
    const evaluate = (extra: Record<string, string>) => h.request("POST", "/v1/evaluate", { headers: { ...evalKey, ...extra }, body: { flagKey: "checkout", context: { targetingKey: "u1" } } });
    expect((await json(await evaluate({ "X-Service-Session": s.token }), 200)).reason).toBe("TEST_OVERRIDE");
    await json(await h.request("DELETE", `${SESSIONS}/${s.id}/overrides/checkout`, { headers: editor }), 204);
    expect((await json(await evaluate({ "X-Service-Session": s.token }), 200)).reason).not.toBe("TEST_OVERRIDE");
    await json(await h.request("DELETE", `${SESSIONS}/${s.id}`, { headers: await userToken(h.ctx, "admin") }), 204);
    expect(await json(await h.request("GET", `${SESSIONS}?projectId=default`, { headers: viewer }), 200)).toEqual({ sessions: [] });
  });

  test("a viewer reads but writes nothing (403 naming the role); bad project names and a missing projectId change nothing", async () => {
    const s = await json(await h.request("POST", SESSIONS, { headers: editor, body: { projectId: "default" } }), 201);
    expect(await json(await h.request("GET", `${SESSIONS}/${s.id}`, { headers: viewer }), 200)).toEqual(s);
    const stored = await rows();
    const refused = { error: "FORBIDDEN", message: "The role viewer does not have access to this endpoint" };
    expect(await json(await h.request("POST", SESSIONS, { headers: viewer, body: { projectId: "default" } }), 403)).toEqual(refused);
    expect(await json(await h.request("PUT", `${SESSIONS}/${s.id}/overrides/a`, { headers: viewer, body: { value: true } }), 403)).toEqual(refused);
    expect(await json(await h.request("DELETE", `${SESSIONS}/${s.id}`, { headers: viewer }), 403)).toEqual(refused);
    expect((await json(await h.request("POST", SESSIONS, { headers: editor, body: { projectId: "nope" } }), 404)).error).toBe("NOT_FOUND");
    expect(await json(await h.request("GET", SESSIONS, { headers: viewer }), 400)).toEqual({
      error: "VALIDATION_ERROR",
      message: "Invalid request",
      details: [{ path: "query.projectId", message: "Required with a login token: the project's id or slug" }],
    });
    expect((await rows())).toBe(stored);
  });
});
