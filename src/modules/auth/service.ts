/**
 * Login: password check with equal work for unknown emails, and the failed-login lockout
 * (decisions §4): after 10 failures for one email within 15 minutes of the first, that email
 * gets 429 until those 15 minutes have passed, whatever the password. Held in memory with the
 * injected clock; entries are dropped once their window ends, and the table is capped. The
 * check itself runs through a HashGate (hash-gate.ts): a bounded, fair share of the cores.
 */
import type { CredentialRegistry } from "../../http/credentials";
import { ApiError } from "../../http/errors";
import type { Clock } from "../../lib/clock";
import { normalizeEmail, type UserRecord } from "../users/service";
import type { UserReader } from "../users/store";
import type { HashGate } from "./hash-gate";
import type { LoginRefusal, Tally } from "../metrics/counts";

export const MAX_FAILURES = 10;
export const LOCKOUT_WINDOW_MS = 15 * 60_000;
/** Emails tracked at most; past it the oldest entry goes (memory stays bounded under a spray). */
const MAX_TRACKED = 100_000;

export const INVALID_LOGIN = "Invalid email or password";

interface Failures {
  first: number;
  count: number;
}

export class LoginThrottle {
  /** By email, in order of the first failure of the current window (so expired ones lead). */
  private failures = new Map<string, Failures>();

  constructor(private readonly clock: Clock) {}

  private sweep(now: number): void {
    for (const [email, f] of this.failures) {
      if (now - f.first < LOCKOUT_WINDOW_MS) break;
      this.failures.delete(email);
    }
  }

  /** Seconds until `email` may try again (0 when it may now). */
  lockout(email: string): number {
    const now = this.clock.now();
    this.sweep(now);
    const f = this.failures.get(email);
    if (f === undefined || f.count < MAX_FAILURES) return 0;
    return Math.max(1, Math.ceil((f.first + LOCKOUT_WINDOW_MS - now) / 1000));
  }

  fail(email: string): void {
    const now = this.clock.now();
    this.sweep(now);
    const f = this.failures.get(email);
    if (f !== undefined) {
      f.count++;
      return;
    }
    if (this.failures.size >= MAX_TRACKED) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(email, { first: now, count: 1 });
  }

  succeed(email: string): void {
    this.failures.delete(email);
  }

  /** Emails tracked now (tests). */
  size(): number {
    return this.failures.size;
  }
}

/**
 * Unknown emails are verified against this argon2id hash (of a random password nobody knows),
 * with the cost of PASSWORD_OPTIONS, so that they take as long as a wrong password. A constant:
 * nothing to compute at start-up, and no secret (no password matches it).
 */
export const DUMMY_HASH = "$argon2id$v=19$m=65536,t=2,p=1$s6KqI0KLw7PeDLkNcTgkL28JwoconaPgNObRIJzWRMg$lRYcRBaqPXb4jMjWKTBssp1Z09plfkyyVpDhAHKOtNo";

const unauthorized = () => new ApiError(401, "UNAUTHORIZED", INVALID_LOGIN);

/**
 * A login's 429: `retryAfter` in the body and `Retry-After`, and X-RateLimit-* of the bound that
 * refused it (its `limit`, nothing left, reset when the wait ends) rather than the caller's
 * per-minute values, which would tell it to come back within the minute.
 */
function tooMany(message: string, retryAfter: number, limit: number, now: number): ApiError {
  return new ApiError(
    429,
    "RATE_LIMITED",
    `${message}; retry after ${retryAfter} s`,
    undefined,
    {
      "retry-after": String(retryAfter),
      "x-ratelimit-limit": String(limit),
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String(Math.ceil(now / 1000) + retryAfter),
    },
    { retryAfter },
  );
}

/** A check refused by the gate may be sent again in a second: a check takes a fraction of one. */
const GATE_RETRY_AFTER = 1;

/** What a login is checked against: the lockout per email, the hashing bound per client; where its refusals are counted (`/metrics`). */
export interface LoginLimits {
  throttle: LoginThrottle;
  gate: HashGate;
  refused: Tally<LoginRefusal>;
}

/** What a login reads: the users, and the registry that issues its token. */
export interface LoginDeps {
  users: UserReader;
  credentials: CredentialRegistry;
  clock: Clock;
}

/**
 * `client`: the caller's address as the rate limiter counts it (src/http/auth.ts). The order,
 * all decided in one turn before anything waits: the email's lockout, then the caller's place
 * in the hashing gate (a refusal there is no failed password), then the attempt counts as a
 * failure until it succeeds.
 */
export async function login(
  { users, credentials, clock }: LoginDeps,
  { throttle, gate, refused }: LoginLimits,
  client: string,
  input: { email: string; password: string },
): Promise<{ token: string; expiresAt: number; jti: string; user: UserRecord }> {
  const email = normalizeEmail(input.email);
  const retryAfter = throttle.lockout(email);
  if (retryAfter > 0) {
    refused.add("locked_out");
    throw tooMany("Too many failed logins for this email", retryAfter, MAX_FAILURES, clock.now());
  }
  // The same argon2id verification whether or not the email exists.
  const checked = gate.run(client, async () => {
    const user = await users.byEmail(email);
    return (await Bun.password.verify(input.password, user?.passwordHash ?? DUMMY_HASH)) ? user : undefined;
  });
  if (checked === "share" || checked === "full") {
    refused.add("busy");
    if (checked === "share") throw tooMany("Too many logins in progress from this address", GATE_RETRY_AFTER, gate.share, clock.now());
    throw tooMany("Too many logins in progress", GATE_RETRY_AFTER, gate.slots + gate.queueSize, clock.now());
  }
  // Counted as a failure before the check, in the same turn as the lockout test: logins sent in
  // parallel cannot try more than MAX_FAILURES passwords while earlier checks run or wait. A
  // success clears the count.
  throttle.fail(email);
  const user = await checked;
  if (!user) {
    refused.add("bad_credentials");
    throw unauthorized();
  }
  throttle.succeed(email);
  // Before the token is made: a user just created by `flagsvc admin create-user` becomes known,
  // and a password just set by `reset-password` dates the token after the change (issued on the
  // tokens' cut-off as the registry knew it before, it would be refused).
  await credentials.pollExternalChanges();
  const { token, expiresAt, jti } = await credentials.issueToken(user.id, user.role);
  return { token, expiresAt, jti, user: { id: user.id, email: user.email, role: user.role } };
}
