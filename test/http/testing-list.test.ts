/**
 * GET /v1/testing/sessions?projectId=: the live test sessions of a project (issue 20), on both
 * editions, through app.handle over a real database: shape, order, expiry on the injected clock,
 * isolation between projects, access, bad queries and a restart.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createApp, createContext, dispatcher } from "../../src/server";
import { createLogger } from "../../src/lib/log";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp, rawRows, countRows } from "../helpers";

const SESSIONS = "/v1/testing/sessions";
const HOUR = 3_600_000;

for (const edition of ["ce", "pro"] as const) {
  const pro = edition === "pro";

  describe(`listing test sessions on ${edition.toUpperCase()}`, () => {
    let h: TestApp;
    let admin: Record<string, string>;
    let testKey: Record<string, string>;
    let projectId: string;
    beforeEach(async () => {
      h = await testApp({ SVC_EDITION: edition });
      admin = bearer(await seedAdminKey(h.ctx));
      testKey = bearer((await seedApiKey(h.ctx, "test")).secret);
      projectId = (await json(await h.request("GET", "/v1/projects/default", { headers: admin }), 200)).id;
    });
    afterEach(() => h.close());

    const list = (query = "?projectId=default", headers = testKey) => h.request("GET", `${SESSIONS}${query}`, { headers });
    const ids = async (query?: string, headers?: Record<string, string>) => (await json(await list(query, headers), 200)).sessions.map((s: { id: string }) => s.id);
    const open = async (body: Record<string, unknown> = {}, headers = testKey) => json(await h.request("POST", SESSIONS, { body: { projectId: "default", ...body }, headers }), 201);
    /** The stored sessions and overrides, to show that a refused request changed nothing. */
    const rows = async () => JSON.stringify([(await rawRows(h.ctx, "SELECT * FROM test_sessions ORDER BY id")), (await rawRows(h.ctx, "SELECT * FROM session_overrides ORDER BY session_id, flag_key"))]);

    test("each live session as GET on it answers, overrides and token included, oldest first; destroyed ones leave", async () => {
      expect(await json(await list(), 200)).toEqual({ sessions: [] });
      const first = await open({ label: "checkout suite" });
      await json(await h.request("PUT", `${SESSIONS}/${first.id}/overrides/theme`, { body: { value: "green" }, headers: testKey }), 200);
      await json(await h.request("PUT", `${SESSIONS}/${first.id}/overrides/checkout`, { body: { value: true }, headers: testKey }), 200);
      h.clock.advance(1_000);
      const doomed = await open();
      h.clock.advance(1_000);
      const last = await open();
      await json(await h.request("DELETE", `${SESSIONS}/${doomed.id}`, { headers: testKey }), 204);
      const { sessions } = await json(await list(), 200);
      expect(sessions.map((s: { id: string }) => s.id)).toEqual([first.id, last.id]);
      for (const s of sessions) expect(await json(await h.request("GET", `${SESSIONS}/${s.id}`, { headers: testKey }), 200)).toEqual(s);
      expect(sessions[0]).toEqual({ ...first, overrides: { checkout: true, theme: "green" } });
      expect(sessions[1]).not.toHaveProperty("label");
      // CE: the token is the id; Pro: the separate secret, as GET on one session answers it.
      for (const s of sessions) expect(s.token === s.id).toBe(!pro);
    });

    test("projectId by id, by slug or omitted (the key's project): the same list", async () => {
      await open();
      await open();
      const bySlug = await json(await list(), 200);
      expect(bySlug.sessions).toHaveLength(2);
      expect(await json(await list(`?projectId=${projectId}`), 200)).toEqual(bySlug);
      expect(await json(await list(""), 200)).toEqual(bySlug);
    });

    test("sessions created in the same millisecond are ordered by id, also after a restart", async () => {
      const made = [];
      for (let i = 0; i < 6; i++) made.push((await open()).id);
      const sorted = [...made].sort();
      expect(await ids()).toEqual(sorted);
      h.ctx.close();
      const reopened = await createContext(h.ctx.config, { log: createLogger({ level: "error", format: "json", write: () => {} }), clock: h.clock });
      try {
        const res = await dispatcher(createApp(reopened))(new Request(`http://localhost${SESSIONS}`, { headers: testKey }));
        expect((await json(res, 200)).sessions.map((s: { id: string }) => s.id)).toEqual(sorted);
      } finally {
        reopened.close();
        // h.close() closes the first context again (a no-op) and removes the directory.
      }
    });

    test("an expired session leaves the list at expiresAt exactly, before any sweep", async () => {
      const start = h.clock.now();
      /** Moves the clock to `ms` after the start of the test (forward only). */
      const at = (ms: number) => h.clock.advance(start + ms - h.clock.now());
      const old = await open();
      at(HOUR / 2);
      const young = await open();
      at(HOUR / 2 + 1);
      const short = pro ? await open({ ttl: 60 }) : undefined;
      expect(await ids()).toEqual(pro ? [old.id, young.id, short!.id] : [old.id, young.id]);
      if (pro) {
        at(HOUR / 2 + 1 + 60_000 - 1);
        expect(await ids()).toEqual([old.id, young.id, short!.id]);
        at(HOUR / 2 + 1 + 60_000);
        expect(await ids()).toEqual([old.id, young.id]);
      }
      at(HOUR - 1);
      expect(await ids()).toEqual([old.id, young.id]);
      at(HOUR);
      expect(new Date(h.clock.now()).toISOString()).toBe(old.expiresAt);
      expect(await ids()).toEqual([young.id]);
      expect({ n: await countRows(h.ctx, "test_sessions") }).toEqual({ n: pro ? 3 : 2 }); // not swept yet
      at(HOUR + HOUR / 2);
      expect(await json(await list(), 200)).toEqual({ sessions: [] });
    });

    test("another project's sessions are not listed, and its project is 403", async () => {
      await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
      const otherKey = bearer((await seedApiKey(h.ctx, "test", "other")).secret);
      const mine = await open();
      const theirs = await open({ projectId: "other" }, otherKey);
      expect(await ids()).toEqual([mine.id]);
      expect(await ids("?projectId=other", otherKey)).toEqual([theirs.id]);
      expect(await ids("", otherKey)).toEqual([theirs.id]);
      const otherId = (await json(await h.request("GET", "/v1/projects/other", { headers: admin }), 200)).id;
      for (const query of ["?projectId=other", `?projectId=${otherId}`, "?projectId=nope", "?projectId=proj_unknown"]) {
        expect(await json(await list(query), 403)).toEqual({ error: "FORBIDDEN", message: "This key does not have access to this project" });
      }
      // A deleted project's sessions go with it.
      await json(await h.request("DELETE", "/v1/projects/other", { headers: admin }), 204);
      expect(await ids()).toEqual([mine.id]);
    });

    test("a bad query is 400 and changes nothing", async () => {
      await open();
      const stored = await rows();
      expect((await json(await list("?projectId="), 400)).details).toEqual([{ path: "query.projectId", message: "Must be a non-empty string: the project's id or slug" }]);
      expect((await json(await list("?projectId=default&label=x"), 400)).details).toEqual([{ path: "query.label", message: "Unknown field" }]);
      expect((await rows())).toBe(stored);
    });

    test("access: test and full keys; eval and mgmt keys and admin keys 403; no credential 401", async () => {
      const mine = await open();
      for (const scope of ["test", "full"] as const) expect(await ids("", bearer((await seedApiKey(h.ctx, scope)).secret))).toEqual([mine.id]);
      for (const scope of ["eval", "mgmt"] as const) {
        expect(await json(await list("", bearer((await seedApiKey(h.ctx, scope)).secret)), 403)).toEqual({
          error: "FORBIDDEN",
          message: "This key scope does not have access to this endpoint",
          details: [{ path: "headers.authorization", message: `This key has scope ${scope}; this endpoint takes a key of scope test or full` }],
        });
      }
      expect((await json(await list("", admin), 403)).error).toBe("FORBIDDEN");
      expect((await json(await list("", {}), 401)).error).toBe("UNAUTHORIZED");
    });

    test("the API document has the operation, on both editions", async () => {
      const op = (await json(await h.request("GET", "/v1/openapi.json"), 200)).paths[SESSIONS].get;
      expect(op["x-flagsvc-access"]).toBe("testing");
      expect(op["x-flagsvc-edition"]).toBeUndefined();
      expect(op.parameters.map((p: { name: string; in: string }) => [p.in, p.name])).toEqual([["query", "projectId"]]);
      expect(op.description).toContain("oldest first");
    });
  });
}
