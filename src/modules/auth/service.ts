/**
 * Login: password check with equal work for unknown emails, and the failed-login lockout
 * (decisions §4): after 10 failures for one email within 15 minutes of the first, that email
 * gets 429 until those 15 minutes have passed, whatever the password. Held in memory with the
 * injected clock; entries are dropped once their window ends, and the table is capped.
 */
import type { AppContext } from "../../context";
import { ApiError } from "../../http/errors";
import type { Clock } from "../../lib/clock";
import { findUserForLogin, normalizeEmail, type UserRecord } from "../users/service";

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

  /** Seconds until `email` may try again (0 when it may now), and that moment in Unix seconds. */
  lockout(email: string): { retryAfter: number; until: number } {
    const now = this.clock.now();
    this.sweep(now);
    const f = this.failures.get(email);
    if (f === undefined || f.count < MAX_FAILURES) return { retryAfter: 0, until: 0 };
    const retryAfter = Math.max(1, Math.ceil((f.first + LOCKOUT_WINDOW_MS - now) / 1000));
    return { retryAfter, until: Math.ceil(now / 1000) + retryAfter };
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

export async function login(
  ctx: AppContext,
  throttle: LoginThrottle,
  input: { email: string; password: string },
): Promise<{ token: string; expiresAt: number; user: UserRecord }> {
  const email = normalizeEmail(input.email);
  const { retryAfter, until } = throttle.lockout(email);
  if (retryAfter > 0) {
    // The X-RateLimit-* of this answer are the lockout's (the caller's own per-minute values
    // would tell it to come back within the minute).
    throw new ApiError(
      429,
      "RATE_LIMITED",
      `Too many failed logins for this email; retry after ${retryAfter} s`,
      undefined,
      {
        "retry-after": String(retryAfter),
        "x-ratelimit-limit": String(MAX_FAILURES),
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(until),
      },
      { retryAfter },
    );
  }
  // Counted as a failure before the check, in the same turn as the lockout test: logins sent in
  // parallel cannot try more than MAX_FAILURES passwords while earlier checks run. A success
  // clears the count.
  throttle.fail(email);
  const user = findUserForLogin(ctx, email);
  // The same argon2id verification whether or not the email exists.
  const ok = await Bun.password.verify(input.password, user?.passwordHash ?? DUMMY_HASH);
  if (!user || !ok) throw unauthorized();
  throttle.succeed(email);
  // Before the token is made: a user just created by `flagsvc admin create-user` becomes known,
  // and a password just set by `reset-password` dates the token after the change (issued on the
  // tokens' cut-off as the registry knew it before, it would be refused).
  ctx.credentials.pollExternalChanges();
  const { token, expiresAt } = await ctx.credentials.issueToken(user.id, user.role);
  return { token, expiresAt, user: { id: user.id, email: user.email, role: user.role } };
}
