/**
 * The Testing API (api-spec: Test session, Testing API; decisions §7, §8, §9) over HTTP and a
 * real database, on both editions: every endpoint, rule and error, evaluation with the
 * `X-Service-Session` header (single, batch, both dispatch paths), isolation between sessions,
 * expiry with the injected clock, the sweep, restarts and project deletion.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { loadConfig } from "../../src/config";
import { MESSAGES } from "../../src/http/access";
import { PRO_REQUIRED_MESSAGE } from "../../src/http/edition";
import { createLogger } from "../../src/lib/log";
import { MAX_OVERRIDES } from "../../src/modules/testing/model";
import { createApp, createContext, dispatcher, startServer, type App } from "../../src/server";
import { bearer, json, seedAdminKey, seedApiKey, tempDir, testApp, TestClock, tick, type TestApp, ISO_TIMESTAMP, sqliteOf, onPostgres, rawRows, sqliteOnly } from "../helpers";

const SESSIONS = "/v1/testing/sessions";
const RAISED_LIMITS = "test:1000000,eval:1000000,full:1000000,mgmt:1000000,admin:1000000,user:1000000";
const HOUR = 3_600_000;

const plus = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString();

for (const edition of ["ce", "pro"] as const) {
  const pro = edition === "pro";

  describe(`Testing API on ${edition.toUpperCase()}`, () => {
    // One app per edition; each test works in a project of its own (cheap), so tests share
    // nothing but the clock, which only moves forward.
    let h: TestApp;
    /** The Elysia app behind the dispatch (its evaluation twins). */
    let base: App;
    let admin: Record<string, string>;
    /** A test key of the project `other`, shared by the tests. */
    let otherKey: Record<string, string>;
    let slug: string;
    let projectId: string;
    let testKey: Record<string, string>;
    let evalKey: Record<string, string>;
    let serial = 0;

    beforeAll(async () => {
      h = await testApp({ SVC_EDITION: edition, SVC_RATE_LIMITS: RAISED_LIMITS }, (app) => (base = app));
      admin = bearer(await seedAdminKey(h.ctx));
      await json(await h.request("POST", "/v1/projects", { body: { slug: "other", name: "Other" }, headers: admin }), 201);
      otherKey = bearer((await seedApiKey(h.ctx, "test", "other")).secret);
    });
    afterAll(() => h.close());
    beforeEach(async () => {
      slug = `p-${++serial}`;
      projectId = (await json(await h.request("POST", "/v1/projects", { body: { slug, name: slug }, headers: admin }), 201)).id;
      testKey = bearer((await seedApiKey(h.ctx, "test", slug)).secret);
      evalKey = bearer((await seedApiKey(h.ctx, "eval", slug)).secret);
    });

    // ---- helpers ------------------------------------------------------------------------------

    const create = (body: unknown, headers = testKey) => h.request("POST", SESSIONS, { body, headers });
    const session = async (body: Record<string, unknown> = {}, headers = testKey) => json(await create({ projectId, ...body }, headers), 201);
    const get = (id: string, headers = testKey) => h.request("GET", `${SESSIONS}/${id}`, { headers });
    const destroy = (id: string, headers = testKey) => h.request("DELETE", `${SESSIONS}/${id}`, { headers });
    const put = (id: string, flagKey: string, body: unknown, headers = testKey) => h.request("PUT", `${SESSIONS}/${id}/overrides/${flagKey}`, { body, headers });
    const putBatch = (id: string, body: unknown, headers = testKey) => h.request("PUT", `${SESSIONS}/${id}/overrides/batch`, { body, headers });
    const unset = (id: string, flagKey: string, headers = testKey) => h.request("DELETE", `${SESSIONS}/${id}/overrides/${flagKey}`, { headers });
    /** Sets overrides the way the edition allows: one batch on Pro, one PUT each on CE. */
    async function override(id: string, overrides: Record<string, boolean | string>): Promise<Record<string, any>> {
      if (pro) return json(await putBatch(id, { overrides }), 200);
      let last: Record<string, any> = {};
      for (const [key, value] of Object.entries(overrides)) last = await json(await put(id, key, { value }), 200);
      return last;
    }

    const evaluate = async (flagKey: string, token?: string, key = evalKey) =>
      json(await h.request("POST", "/v1/evaluate", { body: { flagKey, context: { userId: "user-1", plan: "beta" } }, headers: token === undefined ? key : { ...key, "x-service-session": token } }), 200);
    const evaluateBatch = async (flags: string[], token?: string, key = evalKey) =>
      (await json(await h.request("POST", "/v1/evaluate/batch", { body: { flags, context: { userId: "user-1", plan: "beta" } }, headers: token === undefined ? key : { ...key, "x-service-session": token } }), 200))
        .results as Record<string, Record<string, unknown>>;
    /** A result without its timestamp. */
    const decision = (r: Record<string, unknown>) => {
      const { evaluatedAt: _, ...rest } = r;
      return rest;
    };

    /**
     * The rows of the two tables: this test's project only, or (`all`) every row, to show that a
     * refused write changed nothing anywhere.
     */
    async function dump(all = false): Promise<{ sessions: unknown[]; overrides: Record<string, unknown>[] }> {
      const where = all ? "" : `WHERE s.project_id = '${projectId}'`;
      const overrides = await rawRows(h.ctx, `SELECT o.* FROM session_overrides o JOIN test_sessions s ON s.id = o.session_id ${where} ORDER BY o.session_id, o.flag_key`);
      return {
        sessions: await rawRows(h.ctx, `SELECT s.* FROM test_sessions s ${where} ORDER BY s.id`),
        // An override's value as SQLite stores it, JSON text (PostgreSQL's jsonb arrives parsed).
        overrides: onPostgres ? overrides.map((o) => ({ ...o, value: JSON.stringify(o.value) })) : overrides,
      };
    }

    /** Flags of this test's project: `checkout` (boolean, a rule, enabled), `theme` (variants, enabled), `dark` (disabled). */
    async function seedFlags() {
      const flag = (body: unknown) => h.request("POST", `/v1/projects/${slug}/flags`, { body, headers: admin });
      const enable = (key: string, env: string) => h.request("PUT", `/v1/projects/${slug}/flags/${key}/states/${env}`, { body: { enabled: true }, headers: admin });
      await json(await flag({ key: "checkout", name: "Checkout", rules: [{ name: "beta", conditions: [{ attribute: "plan", operator: "equals", value: "beta" }] }] }), 201);
      await json(await flag({ key: "theme", name: "Theme", variants: [{ key: "blue" }, { key: "green" }] }), 201);
      await json(await flag({ key: "dark", name: "Dark" }), 201);
      for (const env of ["development", "production"]) {
        await json(await enable("checkout", env), 200);
        await json(await enable("theme", env), 200);
      }
    }

    // ---- create ------------------------------------------------------------------------------

    describe("POST /v1/testing/sessions", () => {
      test("201 with the session: empty overrides, no label, expiresAt = createdAt + 3600 s", async () => {
        const s = await session();
        expect(s).toEqual({
          id: expect.stringMatching(/^sess_[A-Za-z0-9]{22}$/),
          token: pro ? expect.stringMatching(/^svc_sess_[A-Za-z0-9]{32}$/) : s.id,
          projectId,
          overrides: {},
          createdAt: new Date(h.clock.now()).toISOString(),
          expiresAt: plus(s.createdAt, HOUR),
        });
        expect(s.createdAt).toMatch(ISO_TIMESTAMP);
        if (pro) expect(s.token).not.toBe(s.id);
        expect(await json(await get(s.id), 200)).toEqual(s);
        expect((await dump()).sessions).toEqual([{ id: s.id, project_id: projectId, token: s.token, label: null, created_at: s.createdAt, expires_at: s.expiresAt }]);
      });

      test("every session gets its own id and token", async () => {
        const all = await Promise.all(Array.from({ length: 20 }, () => session()));
        expect(new Set(all.map((s) => s.id)).size).toBe(20);
        expect(new Set(all.map((s) => s.token)).size).toBe(20);
      });

      test("label kept as given, up to 200 characters; projectId may be the slug; a full key may create", async () => {
        expect((await session({ label: "checkout suite #42" })).label).toBe("checkout suite #42");
        expect((await session({ label: "x".repeat(200) })).label).toHaveLength(200);
        expect(await session({ label: null })).not.toHaveProperty("label");
        const bySlug = await json(await create({ projectId: slug }), 201);
        expect(bySlug.projectId).toBe(projectId);
        const full = bearer((await seedApiKey(h.ctx, "full", slug)).secret);
        expect((await json(await create({ projectId }, full), 201)).projectId).toBe(projectId);
      });

      test(pro ? "Pro honours ttl: an integer from 1 to 86400 seconds" : "CE ignores ttl: always 3600 seconds", async () => {
        for (const ttl of [1, 60, 86_400]) {
          const s = await session({ ttl });
          expect(s.expiresAt).toBe(plus(s.createdAt, pro ? ttl * 1000 : HOUR));
        }
        if (!pro) {
          // Any number is accepted and ignored on CE.
          for (const ttl of [0, -5, 1.5, 86_401, 1e9]) expect((await session({ ttl })).expiresAt).toBe(plus(new Date(h.clock.now()).toISOString(), HOUR));
        }
      });

      if (pro) {
        test("Pro: a ttl outside 1..86400 or not an integer is 400 at body.ttl, and nothing is stored", async () => {
          for (const ttl of [0, -1, 86_401, 1.5, 1e9]) {
            expect(await json(await create({ projectId, ttl }), 400)).toEqual({
              error: "VALIDATION_ERROR",
              message: "Invalid request",
              details: [{ path: "body.ttl", message: "Must be an integer from 1 to 86400 (seconds)" }],
            });
          }
          expect((await dump()).sessions).toEqual([]);
        });
      }

      test("bad bodies: 400 with details, nothing stored", async () => {
        const cases: [unknown, string, string][] = [
          [{}, "body.projectId", "Must be a non-empty string: the project's id or slug"],
          [{ projectId: "" }, "body.projectId", "Must be a non-empty string: the project's id or slug"],
          [{ projectId: 42 }, "body.projectId", "Must be a non-empty string: the project's id or slug"],
          [{ projectId, label: "x".repeat(201) }, "body.label", "Must be a string of at most 200 characters, or null"],
          [{ projectId, label: 7 }, "body.label", "Must be a string of at most 200 characters, or null"],
          [{ projectId, ttl: "60" }, "body.ttl", "Must be a number of seconds"],
          [{ projectId, ttl: null }, "body.ttl", "Must be a number of seconds"],
          [{ projectId, ttl: true }, "body.ttl", "Must be a number of seconds"],
          [{ projectId, environment: "development" }, "body.environment", "Unknown field"],
        ];
        for (const [body, path, message] of cases) {
          const res = await json(await create(body), 400);
          expect({ body, res }).toEqual({ body, res: { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path, message }] } });
        }
        expect((await json(await h.request("POST", SESSIONS, { body: "{nope", headers: testKey }), 400)).message).toBe("Request body is not valid JSON");
        expect((await json(await h.request("POST", SESSIONS, { headers: testKey }), 400)).error).toBe("VALIDATION_ERROR");
        expect((await dump()).sessions).toEqual([]);
      });

      test("a projectId other than the key's own (another project, unknown, by id or slug): 403 FORBIDDEN, nothing stored", async () => {
        const otherId = (await h.ctx.stores.projects.bySlug("other"))!.id;
        for (const value of [otherId, "other", "proj_doesNotExist0000000000", "nope"]) {
          expect(await json(await create({ projectId: value }), 403)).toEqual({ error: "FORBIDDEN", message: MESSAGES.otherProject });
        }
        // The project check comes before the ttl check.
        expect((await json(await create({ projectId: otherId, ttl: 0 }), 403)).error).toBe("FORBIDDEN");
        expect((await dump()).sessions).toEqual([]);
      });
    });

    // ---- read and destroy -------------------------------------------------------------------

    describe("GET and DELETE /v1/testing/sessions/{id}", () => {
      test("GET: the session with every override, keys in alphabetical order", async () => {
        const s = await session({ label: "suite" });
        await override(s.id, { zeta: true, alpha: "green", mid: false });
        const got = await json(await get(s.id), 200);
        expect(got).toEqual({ ...s, overrides: { alpha: "green", mid: false, zeta: true } });
        expect(Object.keys(got.overrides)).toEqual(["alpha", "mid", "zeta"]);
      });

      test("unknown session: 404 on every endpoint", async () => {
        const id = "sess_unknown000000000000000";
        const expected = { error: "NOT_FOUND", message: `Test session ${id} not found` };
        expect(await json(await get(id), 404)).toEqual(expected);
        expect(await json(await destroy(id), 404)).toEqual(expected);
        expect(await json(await put(id, "a", { value: true }), 404)).toEqual(expected);
        expect(await json(await unset(id, "a"), 404)).toEqual(expected);
        if (pro) expect(await json(await putBatch(id, { overrides: { a: true } }), 404)).toEqual(expected);
        expect(await dump()).toEqual({ sessions: [], overrides: [] });
      });

      test("DELETE: 204, the session and its overrides are gone at once (404 after, rows removed)", async () => {
        const kept = await session();
        await override(kept.id, { a: true });
        const s = await session();
        await override(s.id, { a: false, b: "x" });
        expect(await json(await destroy(s.id), 204)).toEqual({});
        expect((await json(await get(s.id), 404)).error).toBe("NOT_FOUND");
        expect((await json(await destroy(s.id), 404)).error).toBe("NOT_FOUND");
        expect((await json(await put(s.id, "a", { value: true }), 404)).error).toBe("NOT_FOUND");
        expect((await json(await unset(s.id, "a"), 404)).error).toBe("NOT_FOUND");
        const rows = await dump();
        expect(rows.sessions.map((r: any) => r.id)).toEqual([kept.id]);
        expect(rows.overrides).toEqual([{ session_id: kept.id, flag_key: "a", value: "true", updated_at: expect.stringMatching(ISO_TIMESTAMP) }]);
        expect((await json(await get(kept.id), 200)).overrides).toEqual({ a: true });
      });

      test("another project's session: 403 FORBIDDEN on every endpoint, and nothing changes", async () => {
        const theirs = await json(await create({ projectId: "other" }, otherKey), 201);
        await json(await put(theirs.id, "a", { value: true }, otherKey), 200);
        const before = await dump(true);
        const forbidden = { error: "FORBIDDEN", message: MESSAGES.otherProject };
        expect(await json(await get(theirs.id), 403)).toEqual(forbidden);
        expect(await json(await destroy(theirs.id), 403)).toEqual(forbidden);
        expect(await json(await put(theirs.id, "a", { value: false }), 403)).toEqual(forbidden);
        expect(await json(await unset(theirs.id, "a"), 403)).toEqual(forbidden);
        if (pro) expect(await json(await putBatch(theirs.id, { overrides: { b: true } }), 403)).toEqual(forbidden);
        expect(await dump(true)).toEqual(before);
        expect((await json(await get(theirs.id, otherKey), 200)).overrides).toEqual({ a: true });
      });
    });

    // ---- overrides ----------------------------------------------------------------------------

    describe("PUT and DELETE /v1/testing/sessions/{id}/overrides/{flagKey}", () => {
      test("PUT sets or replaces one override and answers the whole map", async () => {
        const s = await session();
        expect(await json(await put(s.id, "checkout", { value: true }), 200)).toEqual({ id: s.id, overrides: { checkout: true } });
        expect(await json(await put(s.id, "theme", { value: "green" }), 200)).toEqual({ id: s.id, overrides: { checkout: true, theme: "green" } });
        expect(await json(await put(s.id, "checkout", { value: "Variant_B-2" }), 200)).toEqual({ id: s.id, overrides: { checkout: "Variant_B-2", theme: "green" } });
        expect(await json(await put(s.id, "theme", { value: false }), 200)).toEqual({ id: s.id, overrides: { checkout: "Variant_B-2", theme: false } });
        // A flag that does not exist (yet) may be overridden.
        expect((await json(await put(s.id, "not-a-flag-yet", { value: true }), 200)).overrides["not-a-flag-yet"]).toBe(true);
        expect((await dump()).overrides.map((r: any) => [r.flag_key, JSON.parse(r.value)])).toEqual([
          ["checkout", "Variant_B-2"],
          ["not-a-flag-yet", true],
          ["theme", false],
        ]);
      });

      test("bad values, bodies and flag keys: 400 with details, nothing changed", async () => {
        const s = await session();
        await json(await put(s.id, "kept", { value: true }), 200);
        const before = await dump(true);
        const VALUE = "Must be true, false, or a variant key (1 to 64 characters of A-Z, a-z, 0-9, _ or -)";
        const cases: [string, unknown, string, string][] = [
          ["a", {}, "body.value", VALUE],
          ["a", { value: 1 }, "body.value", VALUE],
          ["a", { value: null }, "body.value", VALUE],
          ["a", { value: { on: true } }, "body.value", VALUE],
          ["a", { value: [true] }, "body.value", VALUE],
          ["a", { value: "" }, "body.value", VALUE],
          ["a", { value: "has space" }, "body.value", VALUE],
          ["a", { value: "v".repeat(65) }, "body.value", VALUE],
          ["a", { value: true, extra: 1 }, "body.extra", "Unknown field"],
          ["Bad_Key", { value: true }, "params.flagKey", "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters"],
          ["a".repeat(129), { value: true }, "params.flagKey", "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters"],
          ["double--hyphen", { value: true }, "params.flagKey", "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters"],
        ];
        for (const [key, body, path, message] of cases) {
          const res = await json(await put(s.id, key, body), 400);
          expect({ key, body, res }).toEqual({ key, body, res: { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path, message }] } });
        }
        expect((await json(await h.request("PUT", `${SESSIONS}/${s.id}/overrides/a`, { body: "true", headers: testKey }), 400)).error).toBe("VALIDATION_ERROR");
        expect(await dump(true)).toEqual(before);
      });

      test("DELETE: 204 whether or not the override existed; a bad flag key is 400", async () => {
        const s = await session();
        await override(s.id, { a: true, b: "x" });
        expect(await json(await unset(s.id, "a"), 204)).toEqual({});
        expect(await json(await unset(s.id, "a"), 204)).toEqual({});
        expect(await json(await unset(s.id, "never-set"), 204)).toEqual({});
        expect((await json(await unset(s.id, "Not_A_Key"), 400)).details).toEqual([
          { path: "params.flagKey", message: "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters" },
        ]);
        expect((await json(await get(s.id), 200)).overrides).toEqual({ b: "x" });
        expect((await dump()).overrides.map((r: any) => r.flag_key)).toEqual(["b"]);
      });

      test(`at most ${MAX_OVERRIDES} overrides a session: the write past it is 400 and changes nothing; replacing still works`, async () => {
        const s = await session();
        const keys = Array.from({ length: MAX_OVERRIDES }, (_, i) => `flag-${i}`);
        if (pro) await json(await putBatch(s.id, { overrides: Object.fromEntries(keys.map((k) => [k, true])) }), 200);
        else for (const k of keys) await json(await put(s.id, k, { value: true }), 200);
        expect(Object.keys((await json(await get(s.id), 200)).overrides)).toHaveLength(MAX_OVERRIDES);
        expect((await dump()).overrides).toHaveLength(MAX_OVERRIDES);
        const before = await dump(true);

        expect(await json(await put(s.id, "one-more", { value: true }), 400)).toEqual({
          error: "VALIDATION_ERROR",
          message: `A test session holds at most ${MAX_OVERRIDES} overrides: this session has ${MAX_OVERRIDES} and the request would add 1. Nothing was changed.`,
          details: [{ path: "params.flagKey", message: `At most ${MAX_OVERRIDES} overrides a session` }],
        });
        if (pro) {
          // All or nothing: the replacement of flag-0 in the same batch is not applied either.
          const refused = await json(await putBatch(s.id, { overrides: { "flag-0": false, "one-more": true } }), 400);
          expect(refused.message).toContain("would add 1");
          expect(refused.details).toEqual([{ path: "body.overrides", message: `At most ${MAX_OVERRIDES} overrides a session` }]);
        }
        expect(await dump(true)).toEqual(before);
        // Replacing an existing override adds nothing: allowed at the cap.
        expect((await json(await put(s.id, "flag-0", { value: "on" }), 200)).overrides["flag-0"]).toBe("on");
        if (pro) expect((await json(await putBatch(s.id, { overrides: { "flag-1": "on", "flag-2": false } }), 200)).overrides["flag-2"]).toBe(false);
        // After a removal there is room for one more.
        await json(await unset(s.id, "flag-999"), 204);
        expect((await json(await put(s.id, "one-more", { value: true }), 200)).overrides["one-more"]).toBe(true);
        expect((await dump()).overrides).toHaveLength(MAX_OVERRIDES);
      });
    });

    // ---- batch ------------------------------------------------------------------------------

    describe("PUT /v1/testing/sessions/{id}/overrides/batch", () => {
      if (pro) {
        test("merges into the existing overrides (replacing the keys sent, keeping the rest) and answers the merged map", async () => {
          const s = await session();
          await json(await put(s.id, "keep", { value: true }), 200);
          await json(await put(s.id, "swap", { value: true }), 200);
          expect(await json(await putBatch(s.id, { overrides: { swap: "green", added: false } }), 200)).toEqual({ id: s.id, overrides: { added: false, keep: true, swap: "green" } });
          expect(await json(await putBatch(s.id, { overrides: { another: true } }), 200)).toEqual({ id: s.id, overrides: { added: false, another: true, keep: true, swap: "green" } });
          expect((await json(await get(s.id), 200)).overrides).toEqual({ added: false, another: true, keep: true, swap: "green" });
          expect((await dump()).overrides).toHaveLength(4);
        });

        test("always the batch endpoint: a flag named `batch` is set through its body, and DELETE .../overrides/batch removes it", async () => {
          const s = await session();
          // A single-override body is not a batch body.
          expect((await json(await putBatch(s.id, { value: true }), 400)).details).toEqual([
            { path: "body.overrides", message: "Must be a non-empty object mapping flag keys to true, false or a variant key" },
            { path: "body.value", message: "Unknown field" },
          ]);
          expect(await json(await putBatch(s.id, { overrides: { batch: true } }), 200)).toEqual({ id: s.id, overrides: { batch: true } });
          await json(await unset(s.id, "batch"), 204);
          expect((await json(await get(s.id), 200)).overrides).toEqual({});
        });

        test("bad bodies: 400 with details, all or nothing", async () => {
          const s = await session();
          await json(await put(s.id, "kept", { value: true }), 200);
          const before = await dump(true);
          const VALUE = "Must be true, false, or a variant key (1 to 64 characters of A-Z, a-z, 0-9, _ or -)";
          const NON_EMPTY = "Must be a non-empty object mapping flag keys to true, false or a variant key";
          const KEY = "Must be a flag key: kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters";
          const cases: [unknown, { path: string; message: string }[]][] = [
            [{}, [{ path: "body.overrides", message: NON_EMPTY }]],
            [{ overrides: {} }, [{ path: "body.overrides", message: NON_EMPTY }]],
            [{ overrides: [] }, [{ path: "body.overrides", message: NON_EMPTY }]],
            [{ overrides: "a" }, [{ path: "body.overrides", message: NON_EMPTY }]],
            [{ overrides: { good: true, bad: 1, worse: null } }, [{ path: "body.overrides.bad", message: VALUE }, { path: "body.overrides.worse", message: VALUE }]],
            [{ overrides: { good: true, Bad_Key: true, ["k".repeat(129)]: false } }, [{ path: "body.overrides.Bad_Key", message: KEY }, { path: `body.overrides.${"k".repeat(129)}`, message: KEY }]],
            [{ overrides: { good: true }, extra: 1 }, [{ path: "body.extra", message: "Unknown field" }]],
          ];
          for (const [body, details] of cases) {
            const res = await json(await putBatch(s.id, body), 400);
            expect({ body, res }).toEqual({ body, res: { error: "VALIDATION_ERROR", message: "Invalid request", details } });
          }
          expect(await dump(true)).toEqual(before);
        });
      } else {
        test("CE: 403 PRO_EDITION_REQUIRED, for any body and any session, after the credential checks; nothing changes", async () => {
          const s = await session();
          const refused = { error: "PRO_EDITION_REQUIRED", message: PRO_REQUIRED_MESSAGE };
          expect(PRO_REQUIRED_MESSAGE).toBe("This endpoint requires the Pro edition");
          for (const body of [{ overrides: { a: true } }, {}, { value: true }, { overrides: { Bad_Key: 5 } }]) {
            expect(await json(await putBatch(s.id, body), 403)).toEqual(refused);
          }
          expect(await json(await putBatch("sess_unknown000000000000000", { overrides: { a: true } }), 403)).toEqual(refused);
          // Credential and scope come first.
          expect((await json(await putBatch(s.id, { overrides: { a: true } }, {}), 401)).error).toBe("UNAUTHORIZED");
          expect(await json(await putBatch(s.id, { overrides: { a: true } }, evalKey), 403)).toEqual({ error: "FORBIDDEN", message: MESSAGES.scope, details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope test or full" }] });
          expect((await dump()).overrides).toEqual([]);
          // One call per flag is the CE way.
          expect((await json(await put(s.id, "a", { value: true }), 200)).overrides).toEqual({ a: true });
        });
      }
    });

    // ---- access -----------------------------------------------------------------------------

    describe("access", () => {
      test("401 without a valid key; 403 for eval and mgmt keys and admin keys; test and full keys pass (login tokens: test/http/testing-console.test.ts)", async () => {
        const s = await session();
        const calls: [string, string, unknown?][] = [
          ["POST", SESSIONS, { projectId }],
          ["GET", `${SESSIONS}/${s.id}`],
          ["PUT", `${SESSIONS}/${s.id}/overrides/a`, { value: true }],
          ["PUT", `${SESSIONS}/${s.id}/overrides/batch`, { overrides: { a: true } }],
          ["DELETE", `${SESSIONS}/${s.id}/overrides/a`],
          ["DELETE", `${SESSIONS}/${s.id}`],
        ];
        const takes = "The Testing API takes a project API key of scope test or full";
        const missing = { details: [{ path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" }] };
        const refused: [Record<string, string>, number, string, object?][] = [
          [{}, 401, "Invalid or expired API key", missing],
          [bearer("svc_sk_test_0123456789abcdefghijklmnopqrstuv"), 401, "Invalid or expired API key"],
          [evalKey, 403, MESSAGES.scope, { details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope test or full" }] }],
          [bearer((await seedApiKey(h.ctx, "mgmt", slug)).secret), 403, MESSAGES.scope, { details: [{ path: "headers.authorization", message: "This key has scope mgmt; this endpoint takes a key of scope test or full" }] }],
          [admin, 403, takes],
        ];
        for (const [headers, status, message, extra] of refused) {
          for (const [method, path, body] of calls) {
            const res = await h.request(method, path, { headers, body });
            expect({ call: `${method} ${path}`, status: res.status, body: await res.json() }).toEqual({
              call: `${method} ${path}`,
              status,
              body: { error: status === 401 ? "UNAUTHORIZED" : "FORBIDDEN", message, ...extra },
            });
          }
        }
        expect(await json(await get(s.id), 200)).toEqual(s);
        const full = bearer((await seedApiKey(h.ctx, "full", slug)).secret);
        const ok = pro ? 200 : 403;
        for (const [headers] of [[testKey], [full]]) {
          expect((await h.request("PUT", `${SESSIONS}/${s.id}/overrides/batch`, { headers, body: { overrides: { a: true } } })).status).toBe(ok);
          expect((await h.request("PUT", `${SESSIONS}/${s.id}/overrides/a`, { headers, body: { value: true } })).status).toBe(200);
        }
      });

      test("a body that is not JSON is judged after the caller, and on CE after the edition of the batch endpoint", async () => {
        const s = await session();
        const unreadable = (path: string, headers: Record<string, string>) => h.request("PUT", path, { headers: { ...headers, "content-type": "text/plain" }, body: "{nope" });
        for (const path of [`${SESSIONS}/${s.id}/overrides/a`, `${SESSIONS}/${s.id}/overrides/batch`]) {
          expect(await json(await unreadable(path, {}), 401)).toMatchObject({ error: "UNAUTHORIZED", message: "Invalid or expired API key" });
          expect(await json(await unreadable(path, evalKey), 403)).toEqual({ error: "FORBIDDEN", message: MESSAGES.scope, details: [{ path: "headers.authorization", message: "This key has scope eval; this endpoint takes a key of scope test or full" }] });
        }
        expect((await json(await unreadable(`${SESSIONS}/${s.id}/overrides/a`, testKey), 400)).message).toBe("Content-Type must be application/json");
        const batch = await unreadable(`${SESSIONS}/${s.id}/overrides/batch`, testKey);
        if (pro) expect((await json(batch, 400)).message).toBe("Content-Type must be application/json");
        else expect(await json(batch, 403)).toEqual({ error: "PRO_EDITION_REQUIRED", message: "This endpoint requires the Pro edition" });
        expect((await json(await get(s.id), 200)).overrides).toEqual({});
      });

      test("session ids never reach the access log (in CE the id is the token)", async () => {
        const s = await session();
        await json(await get(s.id), 200);
        await json(await put(s.id, "a", { value: true }), 200);
        await evaluate("a", s.token);
        await tick(); // the app's access-log lines are written after the response
        const lines = JSON.stringify(h.logs());
        expect(lines).toContain("sess_[redacted]");
        expect(lines).not.toContain(s.id.slice(5));
        expect(lines).not.toContain(s.token.slice(-20));
      });
    });

    // ---- evaluation -------------------------------------------------------------------------

    describe("evaluation with X-Service-Session", () => {
      test("an override wins with TEST_OVERRIDE and ruleId null; booleans set enabled, strings serve the variant; unknown flags too", async () => {
        await seedFlags();
        const s = await session();
        expect(decision(await evaluate("checkout", s.token))).toEqual({ flagKey: "checkout", enabled: true, variant: null, reason: "TARGETING_RULE_MATCH", ruleId: expect.stringMatching(/^rule_/) });
        await override(s.id, { checkout: false, dark: true, theme: "green", ghost: "shadow", "ghost-flag": true });
        // The rule matched before; the override wins and carries no rule.
        expect(await evaluate("checkout", s.token)).toEqual({ flagKey: "checkout", enabled: false, variant: null, reason: "TEST_OVERRIDE", ruleId: null, evaluatedAt: new Date(h.clock.now()).toISOString() });
        // A disabled flag turned on.
        expect(decision(await evaluate("dark", s.token))).toEqual({ flagKey: "dark", enabled: true, variant: null, reason: "TEST_OVERRIDE", ruleId: null });
        // A string serves that variant, enabled.
        expect(decision(await evaluate("theme", s.token))).toEqual({ flagKey: "theme", enabled: true, variant: "green", reason: "TEST_OVERRIDE", ruleId: null });
        // Flags that do not exist: the override wins over FLAG_NOT_FOUND.
        expect(decision(await evaluate("ghost", s.token))).toEqual({ flagKey: "ghost", enabled: true, variant: "shadow", reason: "TEST_OVERRIDE", ruleId: null });
        expect(decision(await evaluate("ghost-flag", s.token))).toEqual({ flagKey: "ghost-flag", enabled: true, variant: null, reason: "TEST_OVERRIDE", ruleId: null });
        // A boolean on a multi-variant flag: enabled as given, variant null.
        await override(s.id, { theme: false });
        expect(decision(await evaluate("theme", s.token))).toEqual({ flagKey: "theme", enabled: false, variant: null, reason: "TEST_OVERRIDE", ruleId: null });
        await override(s.id, { theme: true });
        expect(decision(await evaluate("theme", s.token))).toEqual({ flagKey: "theme", enabled: true, variant: null, reason: "TEST_OVERRIDE", ruleId: null });
        // Not overridden: resolves normally.
        expect((await evaluate("missing", s.token)).reason).toBe("FLAG_NOT_FOUND");
      });

      test("batch evaluation: each overridden key gets its override, the others resolve normally", async () => {
        await seedFlags();
        const s = await session();
        await override(s.id, { checkout: false, ghost: "x" });
        const results = await evaluateBatch(["checkout", "theme", "ghost", "dark", "nope"], s.token);
        expect(Object.fromEntries(Object.entries(results).map(([k, r]) => [k, [r.reason, r.enabled, r.variant, r.ruleId]]))).toEqual({
          checkout: ["TEST_OVERRIDE", false, null, null],
          theme: ["FLAG_ENABLED", true, expect.any(String), null],
          ghost: ["TEST_OVERRIDE", true, "x", null],
          dark: ["FLAG_DISABLED", false, null, null],
          nope: ["FLAG_NOT_FOUND", false, null, null],
        });
      });

      test("any key of the project, in any of its environments, may carry the token; both dispatch paths honour it", async () => {
        await seedFlags();
        const s = await session();
        await override(s.id, { checkout: false });
        const production = bearer((await seedApiKey(h.ctx, "eval", slug, "production")).secret);
        const full = bearer((await seedApiKey(h.ctx, "full", slug)).secret);
        for (const key of [evalKey, production, testKey, full]) expect((await evaluate("checkout", s.token, key)).reason).toBe("TEST_OVERRIDE");
        // The Elysia twin (what app.handle serves) reads the same header.
        const twin = await base.handle(
          new Request("http://localhost/v1/evaluate", { method: "POST", headers: { ...evalKey, "content-type": "application/json", "x-service-session": s.token }, body: '{"flagKey":"checkout"}' }),
        );
        expect((await json(twin, 200)).reason).toBe("TEST_OVERRIDE");
        const twinBatch = await base.handle(
          new Request("http://localhost/v1/evaluate/batch", { method: "POST", headers: { ...evalKey, "content-type": "application/json", "x-service-session": s.token }, body: '{"flags":["checkout"]}' }),
        );
        expect((await json(twinBatch, 200)).results.checkout.reason).toBe("TEST_OVERRIDE");
      });

      test("a missing, empty, unknown, other project's, expired or destroyed token is ignored" + (pro ? "; so is the session id (Pro)" : ""), async () => {
        await seedFlags();
        const real = decision(await evaluate("checkout"));
        expect(real.reason).toBe("TARGETING_RULE_MATCH");
        const theirs = await json(await create({ projectId: "other", label: "theirs" }, otherKey), 201);
        await json(await put(theirs.id, "checkout", { value: false }, otherKey), 200);
        const destroyed = await session();
        await override(destroyed.id, { checkout: false });
        await json(await destroy(destroyed.id), 204);
        const expiring = await session(pro ? { ttl: 60 } : {});
        await override(expiring.id, { checkout: false });
        const live = await session();
        await override(live.id, { checkout: false });
        expect((await evaluate("checkout", expiring.token)).reason).toBe("TEST_OVERRIDE");
        h.clock.advance(pro ? 60_000 : HOUR);
        const ignored = ["", "sess_unknown000000000000000", "svc_sess_unknown", theirs.token, destroyed.token, expiring.token, ...(pro ? [live.id] : [])];
        for (const token of ignored) {
          expect({ token, result: decision(await evaluate("checkout", token)) }).toEqual({ token, result: real });
          expect({ token, result: decision((await evaluateBatch(["checkout"], token)).checkout!) }).toEqual({ token, result: real });
        }
        // The live session of this project still applies (CE: a 3600 s session created at the same time also expired).
        if (pro) expect((await evaluate("checkout", live.token)).reason).toBe("TEST_OVERRIDE");
        // The other project's token works for the other project's keys.
        const otherEval = bearer((await seedApiKey(h.ctx, "eval", "other")).secret);
        expect((await evaluate("checkout", theirs.token, otherEval)).reason).toBe(pro ? "TEST_OVERRIDE" : "FLAG_NOT_FOUND");
      });

      test("DELETE of an override makes the flag evaluate normally again for that token", async () => {
        await seedFlags();
        const s = await session();
        const real = decision(await evaluate("checkout"));
        await override(s.id, { checkout: false, theme: "blue" });
        expect((await evaluate("checkout", s.token)).reason).toBe("TEST_OVERRIDE");
        await json(await unset(s.id, "checkout"), 204);
        expect(decision(await evaluate("checkout", s.token))).toEqual(real);
        expect((await evaluate("theme", s.token)).variant).toBe("blue");
      });

      test("requests without the header see the real state while sessions override everything", async () => {
        await seedFlags();
        const keys = ["checkout", "theme", "dark", "ghost"];
        const before = Object.fromEntries(Object.entries(await evaluateBatch(keys)).map(([k, r]) => [k, decision(r)]));
        for (let i = 0; i < 3; i++) {
          const s = await session();
          await override(s.id, { checkout: i % 2 === 0, theme: "green", dark: true, ghost: true });
        }
        const after = Object.fromEntries(Object.entries(await evaluateBatch(keys)).map(([k, r]) => [k, decision(r)]));
        expect(after).toEqual(before);
        for (const k of keys) expect(decision(await evaluate(k))).toEqual(before[k]!);
      });

      test("isolation: two sessions override the same flags differently; concurrent requests each see only their own", async () => {
        await seedFlags();
        const a = await session({ label: "a" });
        const b = await session({ label: "b" });
        await override(a.id, { checkout: true, theme: "blue", dark: true });
        await override(b.id, { checkout: false, theme: "green" });
        const real = Object.fromEntries(Object.entries(await evaluateBatch(["checkout", "theme", "dark"])).map(([k, r]) => [k, decision(r)]));
        const expected = {
          a: { checkout: [true, null], theme: [true, "blue"], dark: [true, null] },
          b: { checkout: [false, null], theme: [true, "green"], dark: [real.dark!.enabled, real.dark!.variant] },
          none: { checkout: [real.checkout!.enabled, null], theme: [true, real.theme!.variant], dark: [false, null] },
        };
        const tokens = { a: a.token as string, b: b.token as string, none: undefined };
        const requests = Array.from({ length: 300 }, (_, i) => {
          const who = (["a", "b", "none"] as const)[i % 3]!;
          const flag = (["checkout", "theme", "dark"] as const)[Math.floor(i / 3) % 3]!;
          return i % 2 === 0
            ? evaluate(flag, tokens[who]).then((r) => ({ who, flag, got: [r.enabled, r.variant] }))
            : evaluateBatch([flag], tokens[who]).then((r) => ({ who, flag, got: [r[flag]!.enabled, r[flag]!.variant] }));
        });
        for (const { who, flag, got } of await Promise.all(requests)) {
          expect({ who, flag, got }).toEqual({ who, flag, got: expected[who][flag] });
        }
        expect(real.checkout!.reason).toBe("TARGETING_RULE_MATCH");
      });

      test("deleting the project drops its sessions at once, from memory and disk", async () => {
        await json(await h.request("POST", "/v1/projects", { body: { slug: "doomed", name: "Doomed" }, headers: admin }), 201);
        const doomedKey = bearer((await seedApiKey(h.ctx, "test", "doomed")).secret);
        const s = await json(await create({ projectId: "doomed" }, doomedKey), 201);
        await json(await put(s.id, "a", { value: true }, doomedKey), 200);
        const kept = await session();
        expect(h.ctx.testSessions.overridesFor(s.token, s.projectId, h.clock.now())?.get("a")).toBe(true);
        await json(await h.request("DELETE", "/v1/projects/doomed", { headers: admin }), 204);
        expect(h.ctx.testSessions.overridesFor(s.token, s.projectId, h.clock.now())).toBeUndefined();
        expect(h.ctx.testSessions.live(s.id, h.clock.now())).toBeUndefined();
        expect(await dump()).toEqual({ sessions: [expect.objectContaining({ id: kept.id })], overrides: [] });
        expect((await json(await get(kept.id), 200)).id).toBe(kept.id);
      });
    });

    // ---- expiry, sweep, restart ---------------------------------------------------------------

    describe("expiry", () => {
      test("expired at expiresAt exactly: 404 on every endpoint and the token ignored, before any sweep", async () => {
        await seedFlags();
        const ttl = pro ? 5 : 3600;
        const s = await session(pro ? { ttl } : {});
        await override(s.id, { checkout: false });
        h.clock.advance(ttl * 1000 - 1);
        expect((await json(await get(s.id), 200)).id).toBe(s.id);
        expect((await evaluate("checkout", s.token)).reason).toBe("TEST_OVERRIDE");
        h.clock.advance(1);
        expect(new Date(h.clock.now()).toISOString()).toBe(s.expiresAt);
        expect((await json(await get(s.id), 404)).error).toBe("NOT_FOUND");
        expect((await json(await put(s.id, "theme", { value: true }), 404)).error).toBe("NOT_FOUND");
        expect((await json(await unset(s.id, "checkout"), 404)).error).toBe("NOT_FOUND");
        if (pro) expect((await json(await putBatch(s.id, { overrides: { theme: true } }), 404)).error).toBe("NOT_FOUND");
        expect((await json(await destroy(s.id), 404)).error).toBe("NOT_FOUND");
        expect((await evaluate("checkout", s.token)).reason).toBe("TARGETING_RULE_MATCH");
        // Still on disk until the sweep, unchanged by the refused writes.
        expect((await dump()).overrides).toEqual([{ session_id: s.id, flag_key: "checkout", value: "false", updated_at: expect.any(String) }]);
      });

      test("the sweep removes expired sessions and their overrides from the database and memory, and keeps live ones", async () => {
        // Past every earlier test's sessions (at most 86,400 s), swept, so the counts below are this test's.
        h.clock.advance(2 * 24 * HOUR);
        await h.services.testing.sweep();
        const old = await session(pro ? { ttl: 60 } : {});
        await override(old.id, { a: true, b: false });
        h.clock.advance(pro ? 30_000 : HOUR / 2);
        const young = await session(pro ? { ttl: 60 } : {});
        await override(young.id, { a: true });
        expect(await h.services.testing.sweep()).toBe(0);
        expect((await dump()).sessions).toHaveLength(2);
        h.clock.advance(pro ? 30_000 : HOUR / 2);
        expect(await h.services.testing.sweep()).toBe(1);
        const rows = await dump();
        expect(rows.sessions.map((r: any) => r.id)).toEqual([young.id]);
        expect(rows.overrides.map((r: any) => r.session_id)).toEqual([young.id]);
        expect(h.ctx.testSessions.size).toBe(1);
        expect((await json(await get(young.id), 200)).overrides).toEqual({ a: true });
        expect(h.logs().some((l) => l.msg === "expired test sessions removed" && l.sessions === 1)).toBe(true);
      });

      test("a restart reloads live sessions and their overrides from the database; expired ones are not loaded", async () => {
        // An app of its own: it is closed and reopened on its data dir.
        const r = await testApp({ SVC_EDITION: edition });
        let reopened: Awaited<ReturnType<typeof createContext>> | undefined;
        try {
          const rAdmin = bearer(await seedAdminKey(r.ctx));
          const rTest = bearer((await seedApiKey(r.ctx, "test")).secret);
          const rEval = bearer((await seedApiKey(r.ctx, "eval")).secret);
          await json(await r.request("POST", "/v1/projects/default/flags", { body: { key: "checkout", name: "Checkout" }, headers: rAdmin }), 201);
          await json(await r.request("PUT", "/v1/projects/default/flags/checkout/states/development", { body: { enabled: true }, headers: rAdmin }), 200);
          const open = async (body: Record<string, unknown>) => json(await r.request("POST", SESSIONS, { body: { projectId: "default", ...body }, headers: rTest }), 201);
          const s = await open({ label: "survivor" });
          const doomed = await open(pro ? { ttl: 10 } : {});
          for (const id of [s.id, doomed.id]) await json(await r.request("PUT", `${SESSIONS}/${id}/overrides/checkout`, { body: { value: false }, headers: rTest }), 200);
          await json(await r.request("PUT", `${SESSIONS}/${s.id}/overrides/theme`, { body: { value: "green" }, headers: rTest }), 200);
          const before = await json(await r.request("GET", `${SESSIONS}/${s.id}`, { headers: rTest }), 200);
          r.clock.advance(pro ? 10_000 : 0);

          r.ctx.close();
          reopened = await createContext(r.ctx.config, { log: createLogger({ level: "error", format: "json", write: () => {} }), clock: r.clock });
          const handle = dispatcher(createApp(reopened));
          const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
            handle(new Request(`http://localhost${path}`, { method, headers: { ...headers, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));
          expect(await json(await call("GET", `${SESSIONS}/${s.id}`, rTest), 200)).toEqual(before);
          const result = await json(await call("POST", "/v1/evaluate/batch", { ...rEval, "x-service-session": s.token }, { flags: ["checkout", "theme"] }), 200);
          expect([result.results.checkout.reason, result.results.checkout.enabled, result.results.theme.variant]).toEqual(["TEST_OVERRIDE", false, "green"]);
          expect((await json(await call("POST", "/v1/evaluate", rEval, { flagKey: "checkout" }), 200)).reason).toBe("FLAG_ENABLED");
          expect(reopened.testSessions.size).toBe(pro ? 1 : 2);
          if (pro) {
            expect((await json(await call("GET", `${SESSIONS}/${doomed.id}`, rTest), 404)).error).toBe("NOT_FOUND");
            expect((await json(await call("POST", "/v1/evaluate", { ...rEval, "x-service-session": doomed.token }, { flagKey: "checkout" }), 200)).reason).toBe("FLAG_ENABLED");
          }
        } finally {
          reopened?.close();
          rmSync(r.dir, { recursive: true, force: true });
        }
      });
    });

    test("the API document lists the seven operations with the testing access group; batch is marked Pro", async () => {
      const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
      const ops: [string, string][] = [
        ["/v1/testing/sessions", "post"],
        ["/v1/testing/sessions", "get"],
        ["/v1/testing/sessions/{id}", "get"],
        ["/v1/testing/sessions/{id}", "delete"],
        ["/v1/testing/sessions/{id}/overrides/{flagKey}", "put"],
        ["/v1/testing/sessions/{id}/overrides/{flagKey}", "delete"],
        ["/v1/testing/sessions/{id}/overrides/batch", "put"],
      ];
      for (const [path, method] of ops) {
        const op = doc.paths[path]?.[method];
        expect({ path, method, access: op?.["x-flagsvc-access"], tags: op?.tags }).toEqual({ path, method, access: "testing", tags: ["Testing"] });
        expect(op.summary).toBeTruthy();
        expect(op.description).toContain("test or full");
      }
      const batch = doc.paths["/v1/testing/sessions/{id}/overrides/batch"].put;
      expect(batch["x-flagsvc-edition"]).toBe("pro");
      expect(batch.description).toContain("PRO_EDITION_REQUIRED");
      expect(doc.paths["/v1/testing/sessions"].post.description).toContain("3600");
    });
  });
}

describe("the listening server", () => {
  const dir = tempDir();
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  sqliteOnly("start-up sweeps expired sessions from the database and schedules the hourly sweep", async () => {
    const clock = new TestClock();
    const config = loadConfig({ SVC_DATA_DIR: dir, SVC_PORT: "0", SVC_HOST: "127.0.0.1", SVC_LOG_LEVEL: "error" });
    const quiet = createLogger({ level: "error", format: "json", write: () => {} });
    // A first run leaves an expired and a live session on disk.
    const first = await createContext(config, { log: quiet, clock });
    const insert = (id: string, expiresAt: string) =>
      sqliteOf(first).sqlite.run("INSERT INTO test_sessions (id, project_id, token, label, created_at, expires_at) SELECT ?, id, ?, NULL, ?, ? FROM projects LIMIT 1", [id, id, new Date(clock.now()).toISOString(), expiresAt]);
    sqliteOf(first).sqlite.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('proj_x', 'x', 'X', 'x', 'x')");
    insert("sess_expired", new Date(clock.now() - 1).toISOString());
    insert("sess_live", new Date(clock.now() + HOUR).toISOString());
    first.close();

    const server = await startServer(config, { log: quiet, clock });
    try {
      expect(server.ctx.scheduler.names()).toContain("test-sessions-sweep");
      expect(sqliteOf(server.ctx).sqlite.query("SELECT id FROM test_sessions").all()).toEqual([{ id: "sess_live" }]);
      expect(server.ctx.testSessions.live("sess_live", clock.now())?.id).toBe("sess_live");
    } finally {
      await server.stop();
    }
  });
});
