/**
 * Sign-in by cookie (docs/console.md): POST/GET/DELETE /v1/auth/session, the cookie accepted
 * wherever a login token is (never on evaluation, OFREP or definitions routes), the CSRF check
 * on unsafe methods, the lockout, and the API document.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { bearer, entriesAfter, json, lastPosition, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

const EMAIL = "admin@localhost";
const PASSWORD = "correct horse battery";
const CSRF_REFUSED = { error: "FORBIDDEN", message: "Missing or invalid X-CSRF-Token" };
const ARGON_TESTS_MS = 30_000;

let h: TestApp;
let adminKey: string;
beforeAll(async () => {
  h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
  adminKey = await seedAdminKey(h.ctx);
});
afterAll(() => h.close());

interface Session {
  cookie: string;
  csrf: string;
  setCookie: string;
  body: Record<string, any>;
}

async function signIn(email = EMAIL, password = PASSWORD): Promise<Session> {
  const res = await h.request("POST", "/v1/auth/session", { body: { email, password } });
  const body = await json(res, 200);
  const setCookie = res.headers.get("set-cookie")!;
  return { cookie: setCookie.split(";")[0]!, csrf: body.csrfToken, setCookie, body };
}

const withCookie = (s: Session, csrf?: string) => ({ cookie: s.cookie, ...(csrf === undefined ? {} : { "x-csrf-token": csrf }) });

describe("POST /v1/auth/session", () => {
  test("200 {expiresAt, user, csrfToken}, the token only in an HttpOnly, Secure, SameSite=Strict cookie", async () => {
    const s = await signIn();
    expect(Object.keys(s.body).sort()).toEqual(["csrfToken", "expiresAt", "user"]);
    expect(s.body.user).toEqual({ id: expect.stringMatching(/^usr_/), email: EMAIL, role: "admin" });
    expect(s.body.expiresAt).toBe(new Date(h.clock.now() + 3600_000).toISOString());
    expect(s.setCookie).toMatch(/^flagsvc_session=eyJ[\w-]+\.[\w-]+\.[\w-]+; HttpOnly; Secure; SameSite=Strict; Path=\/; Max-Age=3600$/);
    expect(JSON.stringify(s.body)).not.toContain(s.cookie.slice("flagsvc_session=".length));
    expect(s.csrf).toMatch(/^[\w-]{43}$/);
  }, ARGON_TESTS_MS);

  test("a wrong password: the login's 401, no cookie", async () => {
    const res = await h.request("POST", "/v1/auth/session", { body: { email: EMAIL, password: "wrong password!" } });
    expect(await json(res, 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid email or password" });
    expect(res.headers.get("set-cookie")).toBeNull();
  }, ARGON_TESTS_MS);

  test("the 10-failure lockout applies, and is shared with POST /v1/auth/login", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      for (let i = 0; i < 5; i++) expect((await app.request("POST", "/v1/auth/session", { body: { email: EMAIL, password: `nope ${i}` } })).status).toBe(401);
      for (let i = 0; i < 5; i++) expect((await app.request("POST", "/v1/auth/login", { body: { email: EMAIL, password: `nope ${i}` } })).status).toBe(401);
      const locked = await app.request("POST", "/v1/auth/session", { body: { email: EMAIL, password: PASSWORD } });
      expect(await json(locked, 429)).toMatchObject({ error: "RATE_LIMITED", message: expect.stringMatching(/^Too many failed logins for this email; retry after \d+ s$/) });
      expect(locked.headers.get("set-cookie")).toBeNull();
      app.clock.advance(15 * 60_000);
      expect((await app.request("POST", "/v1/auth/session", { body: { email: EMAIL, password: PASSWORD } })).status).toBe(200);
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS * 2);

  test("bad input: 400, no cookie", async () => {
    const res = await h.request("POST", "/v1/auth/session", { body: { email: EMAIL } });
    expect((await json(res, 400)).error).toBe("VALIDATION_ERROR");
    expect(res.headers.get("set-cookie")).toBeNull();
  });
});

describe("the cookie as a credential", () => {
  test("GET /v1/auth/session with the cookie or the Bearer token: the same session; without: 401", async () => {
    const s = await signIn();
    const byCookie = await json(await h.request("GET", "/v1/auth/session", { headers: withCookie(s) }), 200);
    expect(byCookie).toEqual(s.body);
    const token = s.cookie.slice("flagsvc_session=".length);
    expect(await json(await h.request("GET", "/v1/auth/session", { headers: bearer(token) }), 200)).toEqual(s.body);
    expect((await json(await h.request("GET", "/v1/auth/session"), 401)).error).toBe("UNAUTHORIZED");
    expect(await json(await h.request("GET", "/v1/auth/session", { headers: { cookie: "flagsvc_session=eyJ.nope.nope" } }), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired token" });
  }, ARGON_TESTS_MS);

  test("an expired session's cookie: 401", async () => {
    const s = await signIn();
    h.clock.advance(3600_000 + 1000);
    try {
      expect(await json(await h.request("GET", "/v1/auth/session", { headers: withCookie(s) }), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired token" });
    } finally {
      h.clock.advance(-(3600_000 + 1000));
    }
  }, ARGON_TESTS_MS);

  test("accepted where a login token is (reads), with the user's role", async () => {
    const s = await signIn();
    expect((await json(await h.request("GET", "/v1/projects", { headers: withCookie(s) }), 200)).projects.map((p: any) => p.slug)).toContain("default");
    expect(await json(await h.request("GET", "/v1/auth/me", { headers: withCookie(s) }), 200)).toEqual(s.body.user);
  }, ARGON_TESTS_MS);

  test("an Authorization header wins over the cookie", async () => {
    const s = await signIn();
    const res = await h.request("GET", "/v1/auth/me", { headers: { ...withCookie(s), ...bearer(adminKey) } });
    expect((await json(res, 403)).message).toBe("This endpoint takes a login token (POST /v1/auth/login)");
  }, ARGON_TESTS_MS);

  test("never read on evaluation, OFREP and definitions routes", async () => {
    const s = await signIn();
    for (const [method, path, body] of [
      ["POST", "/v1/evaluate", { flagKey: "x", context: {} }],
      ["POST", "/ofrep/v1/evaluate/flags", { context: {} }],
      ["GET", "/v1/definitions", undefined],
    ] as const) {
      const res = await h.request(method, path, { headers: withCookie(s, s.csrf), body });
      expect({ path, status: res.status }).toEqual({ path, status: 401 });
    }
  }, ARGON_TESTS_MS);
});

describe("CSRF", () => {
  test("an unsafe request by cookie without or with a wrong X-CSRF-Token: 403, nothing changes; with it: done, the user is the actor", async () => {
    const s = await signIn();
    const before = await lastPosition(h.ctx);
    const create = (headers: Record<string, string>) => h.request("POST", "/v1/projects/default/flags", { headers, body: { key: "csrf-flag", name: "CSRF" } });
    expect(await json(await create(withCookie(s)), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await create(withCookie(s, "A".repeat(43))), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await create(withCookie(s, "")), 403)).toEqual(CSRF_REFUSED);
    // Another session's token does not fit this one.
    const other = await signIn();
    expect(await json(await create(withCookie(s, other.csrf)), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await create(withCookie(s, s.csrf.slice(0, 20))), 403)).toEqual(CSRF_REFUSED);
    expect(await entriesAfter(h.ctx, before)).toEqual([]);
    expect((await h.request("GET", "/v1/projects/default/flags/csrf-flag", { headers: withCookie(s) })).status).toBe(404);

    expect((await create(withCookie(s, s.csrf))).status).toBe(201);
    const entries = await entriesAfter(h.ctx, before);
    expect(entries.map((e) => [e.resource_type, e.action, e.actor_type, e.actor_id])).toEqual([["flag", "created", "user", s.body.user.id]]);
  }, ARGON_TESTS_MS);

  test("PUT, PATCH and DELETE are checked too; requests with Authorization are not", async () => {
    const s = await signIn();
    expect(await json(await h.request("PUT", "/v1/projects/default/flags/csrf-flag/states/development", { headers: withCookie(s), body: { enabled: true } }), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await h.request("PATCH", "/v1/projects/default/flags/csrf-flag", { headers: withCookie(s), body: { name: "x" } }), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await h.request("DELETE", "/v1/projects/default/flags/csrf-flag", { headers: withCookie(s) }), 403)).toEqual(CSRF_REFUSED);
    expect(await json(await h.request("GET", "/v1/projects/default/flags/csrf-flag", { headers: withCookie(s) }), 200)).toMatchObject({ key: "csrf-flag", name: "CSRF" });
    const token = s.cookie.slice("flagsvc_session=".length);
    expect((await h.request("PUT", "/v1/projects/default/flags/csrf-flag/states/development", { headers: bearer(token), body: { enabled: true } })).status).toBe(200);
  }, ARGON_TESTS_MS);

  test("an API key put in the cookie is no credential", async () => {
    const key = (await seedApiKey(h.ctx, "full")).secret;
    expect((await h.request("GET", "/v1/projects/default/flags", { headers: { cookie: `flagsvc_session=${key}` } })).status).toBe(401);
  });
});

describe("DELETE /v1/auth/session", () => {
  test("needs the CSRF header; then revokes the token and clears the cookie", async () => {
    const s = await signIn();
    expect(await json(await h.request("DELETE", "/v1/auth/session", { headers: withCookie(s) }), 403)).toEqual(CSRF_REFUSED);
    expect((await h.request("GET", "/v1/auth/session", { headers: withCookie(s) })).status).toBe(200);
    const res = await h.request("DELETE", "/v1/auth/session", { headers: withCookie(s, s.csrf) });
    expect(res.status).toBe(204);
    expect(res.headers.get("set-cookie")).toBe("flagsvc_session=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0");
    expect(await json(await h.request("GET", "/v1/auth/session", { headers: withCookie(s) }), 401)).toEqual({ error: "UNAUTHORIZED", message: "Invalid or expired token" });
    expect((await h.request("GET", "/v1/auth/session", { headers: bearer(s.cookie.slice("flagsvc_session=".length)) })).status).toBe(401);
  }, ARGON_TESTS_MS);
});

test("the API document describes the three operations and the cookie", async () => {
  const doc = await json(await h.request("GET", "/v1/openapi.json"), 200);
  const ops = doc.paths["/v1/auth/session"];
  expect(Object.keys(ops).sort()).toEqual(["delete", "get", "post"]);
  for (const op of Object.values(ops) as any[]) {
    expect(op.summary.length).toBeGreaterThan(10);
    expect(op.description).toContain("X-CSRF-Token");
    expect(op.description).toContain("SameSite=Strict");
  }
  expect(ops.post.security).toEqual([]);
});
