/**
 * Login: password check with equal work for unknown emails, and the failed-login lockout
 * (decisions §4): after 10 failures for one email within 15 minutes of the first, that email
 * gets 429 until those 15 minutes have passed, whatever the password. Counted in the database
 * (store.ts: the same count on every node), with the injected clock; counts whose window has
 * ended are pruned hourly. The check itself runs through a HashGate (hash-gate.ts): a bounded, fair share of the cores.
 */
import type { CredentialRegistry } from "../../http/credentials";
import { ApiError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { normalizeEmail, type UserRecord } from "../users/service";
import type { UserReader } from "../users/store";
import type { HashGate } from "./hash-gate";
import type { LoginRefusal, Tally } from "../metrics/counts";
import type { LoginFailures, LoginFailureStore } from "./store";

export const MAX_FAILURES = 10;
export const LOCKOUT_WINDOW_MS = 15 * 60_000;

export const INVALID_LOGIN = "Invalid email or password";

/** Seconds until an email with these failures may try again at `now` (0: it may now). */
function waitFor(f: LoginFailures | undefined, now: number, atLeast: number): number {
  if (f === undefined || f.count < atLeast) return 0;
  const ends = Date.parse(f.firstAt) + LOCKOUT_WINDOW_MS;
  return now >= ends ? 0 : Math.max(1, Math.ceil((ends - now) / 1000));
}

/**
 * The failures per email, counted in the database (store.ts) so that every node sharing it
 * locks an email together: N failures spread over the nodes count as N.
 */
export class LoginThrottle {
  constructor(
    private readonly store: LoginFailureStore,
    private readonly clock: Clock,
  ) {}

  /** Seconds until `email` may try again (0 when it may now). */
  async lockout(email: string): Promise<number> {
    return waitFor(await this.store.get(email), this.clock.now(), MAX_FAILURES);
  }

  /**
   * Counts a failure (atomically, on every node's count): 0, or the seconds to wait when this
   * attempt is beyond MAX_FAILURES (attempts sent in parallel, here or on other nodes, that all
   * passed the lockout test before the count reached it).
   */
  async fail(email: string): Promise<number> {
    const now = this.clock.now();
    return waitFor(await this.store.fail(email, iso(now), iso(now - LOCKOUT_WINDOW_MS)), now, MAX_FAILURES + 1);
  }

  succeed(email: string): Promise<void> {
    return this.store.clear(email);
  }

  /** Drops the counts whose window has ended (an hourly job, on one node at a time); returns how many. */
  prune(): Promise<number> {
    return this.store.prune(iso(this.clock.now() - LOCKOUT_WINDOW_MS));
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
 * `client`: the caller's address as the rate limiter counts it (src/http/auth.ts). The order:
 * the email's lockout, then the caller's place in the hashing gate (a refusal there is no
 * failed password), then the attempt counts as a failure until it succeeds.
 */
export async function login(
  { users, credentials, clock }: LoginDeps,
  { throttle, gate, refused }: LoginLimits,
  client: string,
  input: { email: string; password: string },
): Promise<{ token: string; expiresAt: number; jti: string; user: UserRecord }> {
  const email = normalizeEmail(input.email);
  const retryAfter = await throttle.lockout(email);
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
  // Counted as a failure before the check's answer is used, atomically in the database: logins
  // sent in parallel (to any node) cannot try more than MAX_FAILURES passwords while earlier
  // checks run or wait; those beyond get the lockout's 429 whatever their check says. A success
  // clears the count.
  const beyond = await throttle.fail(email).catch((e) => {
    void checked.catch(() => undefined);
    throw e;
  });
  if (beyond > 0) {
    void checked.catch(() => undefined);
    refused.add("locked_out");
    throw tooMany("Too many failed logins for this email", beyond, MAX_FAILURES, clock.now());
  }
  const user = await checked;
  if (!user) {
    refused.add("bad_credentials");
    throw unauthorized();
  }
  await throttle.succeed(email);
  // Before the token is made: a user just created by `flagsvc admin create-user` becomes known,
  // and a password just set by `reset-password` dates the token after the change (issued on the
  // tokens' cut-off as the registry knew it before, it would be refused).
  await credentials.pollExternalChanges();
  const { token, expiresAt, jti } = await credentials.issueToken(user.id, user.role);
  return { token, expiresAt, jti, user: { id: user.id, email: user.email, role: user.role } };
}
