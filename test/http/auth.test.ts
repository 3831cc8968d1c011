/** POST /v1/auth/login, POST /v1/auth/logout, GET /v1/auth/me: tokens, expiry, forgery, lockout. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import type { ApiError } from "../../src/http/errors";
import { HashGate } from "../../src/modules/auth/hash-gate";
import { login as serviceLogin, LoginThrottle } from "../../src/modules/auth/service";
import { bearer, onPostgres, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";

const EMAIL = "admin@localhost";
const PASSWORD = "correct horse battery";
const INVALID_LOGIN = { error: "UNAUTHORIZED", message: "Invalid email or password" };
const INVALID_TOKEN = { error: "UNAUTHORIZED", message: "Invalid or expired token" };
/** Tests that make tens of logins: each checks an argon2id hash (~0.1 s, more on a busy machine). */
const ARGON_TESTS_MS = 30_000;

let h: TestApp;
beforeAll(async () => {
  h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
});
afterAll(() => h.close());

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const decode = (part: string) => JSON.parse(Buffer.from(part, "base64url").toString("utf8"));

async function login(app: TestApp, email = EMAIL, password = PASSWORD) {
  return app.request("POST", "/v1/auth/login", { body: { email, password } });
}

async function token(app: TestApp = h, email = EMAIL, password = PASSWORD): Promise<string> {
  const res = await login(app, email, password);
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

const me = (app: TestApp, t: string) => app.request("GET", "/v1/auth/me", { headers: bearer(t) });

describe("login", () => {
  test("200 with token, expiresAt and user; the JWT is HS256 with sub, role, exp, iat, jti", async () => {
    const res = await login(h);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { token: string; expiresAt: string; user: Record<string, unknown> };
    expect(Object.keys(body).sort()).toEqual(["expiresAt", "token", "user"]);
    expect(body.user).toEqual({ id: expect.stringMatching(/^usr_[A-Za-z0-9]{22}$/), email: EMAIL, role: "admin" });
    expect(body.expiresAt).toBe(new Date(h.clock.now() + 3600_000).toISOString());

    const [header, payload, signature] = body.token.split(".");
    expect(decode(header!)).toMatchObject({ alg: "HS256" });
    const claims = decode(payload!);
    expect(claims.sub).toBe(body.user.id);
    expect(claims.role).toBe("admin");
    expect(claims.iat).toBe(Math.floor(h.clock.now() / 1000));
    expect(claims.exp).toBe(claims.iat + 3600);
    expect(typeof claims.jti).toBe("string");
    expect(claims.jti.length).toBeGreaterThanOrEqual(16);
    expect(signature!.length).toBeGreaterThan(0);
    expect(new Date(claims.exp * 1000).toISOString()).toBe(body.expiresAt);
  });

  test("each login gets its own jti", async () => {
    const a = decode((await token()).split(".")[1]!);
    const b = decode((await token()).split(".")[1]!);
    expect(a.jti).not.toBe(b.jti);
  });

  test("the email is compared lower-case", async () => {
    const res = await login(h, "ADMIN@LocalHost");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { user: { email: string } }).user.email).toBe(EMAIL);
  });

  test("wrong password and unknown email get the same 401", async () => {
    const wrong = await login(h, EMAIL, "not the password");
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual(INVALID_LOGIN);
    const unknown = await login(h, "nobody@example.com", PASSWORD);
    expect(unknown.status).toBe(401);
    expect(await unknown.json()).toEqual(INVALID_LOGIN);
  });

  test("an unknown email costs a password verification too (no fast path)", async () => {
    const time = async (email: string) => {
      const start = performance.now();
      for (let i = 0; i < 3; i++) expect((await login(h, email, "wrong password!")).status).toBe(401);
      return performance.now() - start;
    };
    await time("warm-up@example.com");
    const known = await time(EMAIL);
    const unknown = await time("nobody-else@example.com");
    // An argon2id verification takes tens of milliseconds; skipping it would take about one.
    expect(unknown).toBeGreaterThan(known * 0.25);
  });

  test("bad bodies are 400 VALIDATION_ERROR", async () => {
    for (const body of [{ email: EMAIL }, { password: PASSWORD }, { email: EMAIL, password: PASSWORD, remember: true }, { email: 1, password: PASSWORD }]) {
      const res = await h.request("POST", "/v1/auth/login", { body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("VALIDATION_ERROR");
    }
    const empty = await h.request("POST", "/v1/auth/login");
    expect(empty.status).toBe(400);
  });

  test("the password never reaches the log", async () => {
    await login(h);
    await login(h, EMAIL, "a wrong secret value");
    const text = JSON.stringify(h.logs());
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain("a wrong secret value");
  });
});

describe("me and logout", () => {
  test("GET /v1/auth/me returns the user", async () => {
    const t = await token();
    const res = await me(h, t);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: expect.stringMatching(/^usr_/), email: EMAIL, role: "admin" });
  });

  test("me and logout need a login token: none is 401, keys are 403", async () => {
    expect((await h.request("GET", "/v1/auth/me")).status).toBe(401);
    expect((await h.request("POST", "/v1/auth/logout")).status).toBe(401);
    const admin = await seedAdminKey(h.ctx);
    const res = await h.request("GET", "/v1/auth/me", { headers: bearer(admin) });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toBe("FORBIDDEN");
    const full = await seedApiKey(h.ctx, "full");
    expect((await h.request("POST", "/v1/auth/logout", { headers: bearer(full.secret) })).status).toBe(403);
  });

  test("logout: 204, then that token is 401; another token of the same user still works", async () => {
    const t = await token();
    const other = await token();
    const res = await h.request("POST", "/v1/auth/logout", { headers: bearer(t) });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const after = await me(h, t);
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual(INVALID_TOKEN);
    expect((await h.request("POST", "/v1/auth/logout", { headers: bearer(t) })).status).toBe(401);
    expect((await me(h, other)).status).toBe(200);
  });

  test("a logged-out token stays revoked after a credential reload (stored, not only in memory)", async () => {
    const t = await token();
    expect((await h.request("POST", "/v1/auth/logout", { headers: bearer(t) })).status).toBe(204);
    await h.ctx.credentials.reload();
    expect((await me(h, t)).status).toBe(401);
  });
});

describe("token validity", () => {
  test("a token expires after one hour", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const t = await token(app);
      app.clock.advance(3600_000 - 1000);
      expect((await me(app, t)).status).toBe(200);
      app.clock.advance(1000 + 1);
      const res = await me(app, t);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(INVALID_TOKEN);
    } finally {
      app.close();
    }
  });

  test("a tampered signature is 401", async () => {
    const t = await token();
    const [header, payload, signature] = t.split(".");
    const flipped = signature!.slice(0, -2) + (signature!.endsWith("AA") ? "BB" : "AA");
    const res = await me(h, `${header}.${payload}.${flipped}`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual(INVALID_TOKEN);
  });

  test("a tampered payload (role raised) is 401", async () => {
    const viewer = await h.request("POST", "/v1/users", {
      headers: bearer(await seedAdminKey(h.ctx)),
      body: { email: "viewer@example.com", password: "viewer password", role: "viewer" },
    });
    expect(viewer.status).toBe(201);
    const t = await token(h, "viewer@example.com", "viewer password");
    const [header, payload, signature] = t.split(".");
    const claims = decode(payload!);
    const forged = `${header}.${b64url({ ...claims, role: "admin" })}.${signature}`;
    expect((await h.request("GET", "/v1/users", { headers: bearer(forged) })).status).toBe(401);
  });

  test('a token with alg "none" is 401', async () => {
    const t = await token();
    const claims = decode(t.split(".")[1]!);
    for (const alg of ["none", "None", "NONE"]) {
      const unsigned = `${b64url({ alg, typ: "JWT" })}.${b64url(claims)}.`;
      const res = await me(h, unsigned);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(INVALID_TOKEN);
    }
  });

  test("a token signed with another secret is 401", async () => {
    const t = await token();
    const claims = decode(t.split(".")[1]!);
    const forged = await new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(new TextEncoder().encode("another-secret-another-secret-another-secret"));
    const res = await me(h, forged);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual(INVALID_TOKEN);
  });

  test("SVC_JWT_SECRET signs the tokens when set; tokens of another instance are 401", async () => {
    const secret = "s".repeat(40);
    const a = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD, SVC_JWT_SECRET: secret });
    const b = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const t = await token(a);
      const claims = decode(t.split(".")[1]!);
      const own = await new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(secret));
      expect((await me(a, own)).status).toBe(200);
      expect((await me(b, t)).status).toBe(401);
    } finally {
      a.close();
      b.close();
    }
  });
});

describe("failed-login lockout", () => {
  test("10 failures within 15 minutes lock that email (429 + Retry-After) until 15 minutes after the first", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      expect((await login(app, EMAIL, "wrong password 0")).status).toBe(401);
      app.clock.advance(10 * 60_000); // the window runs from the first failure
      for (let i = 1; i < 10; i++) expect((await login(app, EMAIL.toUpperCase(), `wrong password ${i}`)).status).toBe(401);

      const locked = await login(app, EMAIL, PASSWORD); // even the right password
      expect(locked.status).toBe(429);
      expect(locked.headers.get("retry-after")).toBe("300");
      // Its X-RateLimit-* tell the same: the lockout's limit, nothing left, reset when it ends.
      expect(["limit", "remaining", "reset"].map((h) => locked.headers.get(`x-ratelimit-${h}`))).toEqual(["10", "0", String(Math.ceil(app.clock.now() / 1000) + 300)]);
      const body = (await locked.json()) as Record<string, unknown>;
      expect(body).toEqual({ error: "RATE_LIMITED", message: expect.any(String), retryAfter: 300 });

      // Other emails are not affected.
      expect((await login(app, "someone@example.com", "whatever pass")).status).toBe(401);

      app.clock.advance(5 * 60_000 - 1000);
      const still = await login(app, EMAIL, PASSWORD);
      expect(still.status).toBe(429);
      expect(still.headers.get("retry-after")).toBe("1");

      app.clock.advance(1000);
      expect((await login(app, EMAIL, PASSWORD)).status).toBe(200);
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS);

  test("logins admitted at once try at most 10 passwords: the rest get 429 while the first checks run or wait", async () => {
    // Through the service with a gate that admits all 30 (the app's lets one address run
    // HASH_SHARE checks at once, and all addresses at most three per core): checks waiting in
    // the gate count as failures too.
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      const limits = { throttle: new LoginThrottle(app.ctx.stores.loginFailures, app.clock), gate: new HashGate(2, 30, 30), refused: app.ctx.loginRefused };
      const attempt = (i: number) =>
        serviceLogin(app.services.login, limits, `10.0.0.${i}`, { email: EMAIL, password: i === 29 ? PASSWORD : `wrong password ${i}` }).then(
          () => 200,
          (e: ApiError) => e.status,
        );
      const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => attempt(i)));
      if (onPostgres) {
        // Concurrent counts reach PostgreSQL in no set order: which 10 are checked is not the call
        // order, but 10 passwords at most are (a 401, or the right one's 200), and the rest get 429.
        expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(10);
        expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(19);
        expect(statuses.every((s) => s === 401 || s === 429 || s === 200)).toBe(true);
      } else {
        expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
        expect(statuses.slice(10)).toEqual(Array(20).fill(429)); // the right password, sent last, too
      }
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS);

  test("after 15 minutes locked out, login works", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      for (let i = 0; i < 10; i++) expect((await login(app, EMAIL, "wrong password")).status).toBe(401);
      const locked = await login(app, EMAIL, PASSWORD);
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get("retry-after"))).toBe(900);
      app.clock.advance(15 * 60_000);
      expect((await login(app, EMAIL, PASSWORD)).status).toBe(200);
      // A fresh window: one failure does not lock.
      expect((await login(app, EMAIL, "wrong password")).status).toBe(401);
      expect((await login(app, EMAIL, PASSWORD)).status).toBe(200);
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS);

  test("failures older than 15 minutes do not count; a successful login clears the count", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      for (let i = 0; i < 9; i++) expect((await login(app, EMAIL, "wrong password")).status).toBe(401);
      app.clock.advance(15 * 60_000);
      for (let i = 0; i < 9; i++) expect((await login(app, EMAIL, "wrong password")).status).toBe(401);
      expect((await login(app, EMAIL, PASSWORD)).status).toBe(200);
      for (let i = 0; i < 9; i++) expect((await login(app, EMAIL, "wrong password")).status).toBe(401);
      expect((await login(app, EMAIL, PASSWORD)).status).toBe(200);
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS);

  test("unknown emails lock the same way (nothing tells them apart)", async () => {
    const app = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    try {
      for (let i = 0; i < 10; i++) expect((await login(app, "ghost@example.com", "wrong password")).status).toBe(401);
      expect((await login(app, "ghost@example.com", "wrong password")).status).toBe(429);
    } finally {
      app.close();
    }
  }, ARGON_TESTS_MS);

  test("the failure table drops the counts whose window has ended", async () => {
    const app = await testApp();
    try {
      const throttle = new LoginThrottle(app.ctx.stores.loginFailures, app.clock);
      for (let i = 0; i < 100; i++) await throttle.fail(`user${i}@example.com`);
      expect(await throttle.prune()).toBe(0);
      app.clock.advance(15 * 60_000);
      await throttle.fail("late@example.com");
      expect(await throttle.prune()).toBe(100);
      expect(await throttle.lockout("user1@example.com")).toBe(0);
      expect(await app.ctx.stores.loginFailures.get("late@example.com")).toMatchObject({ count: 1 });
    } finally {
      app.close();
    }
  });

});
