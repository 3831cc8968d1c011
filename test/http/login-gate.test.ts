/**
 * POST /v1/auth/login under load: the bound on password checks (hash-gate.ts). Client addresses
 * are injected as a proxy would send them (SVC_BEHIND_PROXY, the last X-Forwarded-For entry).
 * The argon2id checks are counted by watching Bun.password.verify; where the order matters, the
 * test holds the checks that started until it lets them run (then they run as always), so that
 * none ends before every request of a burst has been admitted or refused.
 */
import { afterEach, beforeEach, describe, expect, spyOn, test } from "bun:test";
import { HASH_QUEUE, HASH_SHARE, HASH_SLOTS } from "../../src/modules/auth/hash-gate";
import { testApp, type TestApp, rawRows } from "../helpers";

const EMAIL = "admin@localhost";
const PASSWORD = "correct horse battery";
/** Tens of argon2id checks, two at a time on a busy machine. */
const ARGON_TESTS_MS = 30_000;

const SHARE_REFUSAL = { error: "RATE_LIMITED", message: "Too many logins in progress from this address; retry after 1 s", retryAfter: 1 };
const FULL_REFUSAL = { error: "RATE_LIMITED", message: "Too many logins in progress; retry after 1 s", retryAfter: 1 };

let h: TestApp;
const realVerify = Bun.password.verify.bind(Bun.password);
let verify: ReturnType<typeof spyOn<typeof Bun.password, "verify">>;
/** Lets held checks run (a failed test leaves none waiting). */
let release = () => {};
beforeEach(() => {
  verify = spyOn(Bun.password, "verify");
});
afterEach(() => {
  release();
  h?.close();
  verify.mockRestore();
});

/** Checks started from now on wait for `release()`, then run. */
function holdChecks(): void {
  const held = new Promise<void>((r) => (release = r));
  verify.mockImplementation(async (...args) => {
    await held;
    return realVerify(...args);
  });
}

/** `work()` started with its checks held, released `ms` later; its result. */
async function heldFor<T>(ms: number, work: () => Promise<T>): Promise<T> {
  holdChecks();
  const result = work();
  await Bun.sleep(ms);
  release();
  return result;
}

const proxied = async () => (h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD, SVC_BEHIND_PROXY: "true" }));

/** A login from `address` (as the proxy saw it), with the time its answer took. */
async function login(address: string | null, email = EMAIL, password = "wrong password") {
  const headers: Record<string, string> = address === null ? {} : { "x-forwarded-proto": "https", "x-forwarded-for": `198.51.100.7, ${address}` };
  const started = performance.now();
  const res = await h.request("POST", "/v1/auth/login", { body: { email, password }, headers });
  const body = await res.json();
  return { status: res.status, headers: res.headers, body, ms: performance.now() - started };
}

/** `n` logins at once from `address` (wrong passwords, or random emails). */
const burst = (n: number, address: string | null, email = EMAIL) => Promise.all(Array.from({ length: n }, () => login(address, email)));

/** What a login may write: users, revoked tokens, settings. */
async function stored(): Promise<string> {
  // Not the insights' first-start mark: PostgreSQL's store writes it in the background (no login's doing).
  return JSON.stringify(await Promise.all(["users", "revoked_tokens", "settings WHERE key <> 'insights_observed_since'"].map((t) => rawRows(h.ctx, `SELECT * FROM ${t} ORDER BY 1`))));
}

describe("login: a share of the password checks per client address", () => {
  test("past its share, an address gets a fast 429 with Retry-After, and no check runs", async () => {
    await proxied();
    const before = await stored();
    const answers = await heldFor(100, () => burst(HASH_SHARE + 4, "203.0.113.1"));
    const checked = answers.filter((a) => a.status === 401);
    const refused = answers.filter((a) => a.status === 429);
    expect(checked).toHaveLength(HASH_SHARE);
    expect(refused).toHaveLength(4);
    expect(verify).toHaveBeenCalledTimes(HASH_SHARE);
    const reset = String(Math.ceil(h.clock.now() / 1000) + 1);
    for (const r of refused) {
      expect(r.body).toEqual(SHARE_REFUSAL);
      expect(r.headers.get("retry-after")).toBe("1");
      expect(["limit", "remaining", "reset"].map((n) => r.headers.get(`x-ratelimit-${n}`))).toEqual([String(HASH_SHARE), "0", reset]);
      // Answered without waiting for the checks that hold the share.
      expect(r.ms).toBeLessThan(Math.min(...checked.map((c) => c.ms)));
    }
    expect(await stored()).toBe(before);
  }, ARGON_TESTS_MS);

  test("another address is checked while one holds its share; the share is free again afterwards", async () => {
    await proxied();
    holdChecks();
    const hammering = burst(HASH_SHARE + 4, "203.0.113.1");
    await Bun.sleep(50);
    const checking = login("203.0.113.2", EMAIL, PASSWORD);
    await Bun.sleep(50);
    release();
    const [hammer, other] = await Promise.all([hammering, checking]);
    expect(hammer.filter((a) => a.status === 429)).toHaveLength(4);
    expect(other.status).toBe(200);
    expect(verify).toHaveBeenCalledTimes(HASH_SHARE + 1);
    // Told to retry after 1 s: refused until then, checked after.
    expect((await login("203.0.113.1", EMAIL, PASSWORD)).body).toEqual(SHARE_REFUSAL);
    h.clock.advance(1_000);
    expect((await login("203.0.113.1", EMAIL, PASSWORD)).status).toBe(200);
  }, ARGON_TESTS_MS);

  test("requests without an address (app.handle, no proxy) are one client: `unknown`", async () => {
    h = await testApp({ SVC_ADMIN_PASSWORD: PASSWORD });
    const answers = await heldFor(100, () => burst(HASH_SHARE + 2, null));
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(HASH_SHARE).fill(401), 429, 429]);
    expect(answers.find((a) => a.status === 429)!.body).toEqual(SHARE_REFUSAL);
  }, ARGON_TESTS_MS);

  test("with every slot and queue place taken, a new address gets a fast 429 too; the queue drains", async () => {
    await proxied();
    const places = HASH_SLOTS + HASH_QUEUE;
    const addresses = Math.ceil(places / HASH_SHARE);
    holdChecks();
    const holders = Array.from({ length: addresses }, (_, i) => burst(Math.min(HASH_SHARE, places - i * HASH_SHARE), `203.0.113.${10 + i}`));
    await Bun.sleep(100); // every holder admitted, no check ended
    const before = await stored();
    const late = await login("203.0.113.99");
    expect(late.status).toBe(429);
    expect(late.body).toEqual(FULL_REFUSAL);
    expect(late.headers.get("retry-after")).toBe("1");
    expect(late.headers.get("x-ratelimit-limit")).toBe(String(places));
    expect(late.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(await stored()).toBe(before);
    release();
    const held = (await Promise.all(holders)).flat();
    expect(held.map((a) => a.status)).toEqual(Array(places).fill(401));
    expect(verify).toHaveBeenCalledTimes(places);
    expect((await login("203.0.113.99", EMAIL, PASSWORD)).status).toBe(200);
  }, ARGON_TESTS_MS);
});

describe("login: the gate and the failed-login lockout", () => {
  test("a 429 for a full share is not a failed password: the lockout comes after 10 checked failures", async () => {
    await proxied();
    const first = await heldFor(100, () => burst(HASH_SHARE + 6, "203.0.113.1"));
    expect(first.filter((a) => a.status === 429)).toHaveLength(6);
    h.clock.advance(1_000); // as the 429s said
    for (let i = HASH_SHARE; i < 10; i++) expect((await login("203.0.113.1")).status).toBe(401);
    const locked = await login("203.0.113.1", EMAIL, PASSWORD);
    expect(locked.status).toBe(429);
    // 15 minutes from the first failure, a second ago.
    expect(locked.body.message).toBe("Too many failed logins for this email; retry after 899 s");
  }, ARGON_TESTS_MS);

  test("a locked email is refused before the gate: the lockout's 429, no check, even past the share", async () => {
    await proxied();
    for (let i = 0; i < 10; i++) expect((await login("203.0.113.1")).status).toBe(401);
    verify.mockClear();
    const answers = await burst(HASH_SHARE + 3, "203.0.113.1");
    for (const a of answers) {
      expect(a.status).toBe(429);
      expect(a.body.message).toBe("Too many failed logins for this email; retry after 900 s");
      expect(a.headers.get("x-ratelimit-limit")).toBe("10");
    }
    expect(verify).not.toHaveBeenCalled();
  }, ARGON_TESTS_MS);
});
