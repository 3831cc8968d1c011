/**
 * Login cannot be saturated (issue 20, point 5), on the compiled binary over real sockets:
 * 127.0.0.2 hammers POST /v1/auth/login with 16 requests at once (random emails, each answer
 * sends the next) while 127.0.0.1 logs in validly, one login after the other.
 * The bound is relative to the same logins without the attack, measured in the same test: the
 * machine this runs on is shared, and a lone login took from 0.25 s to 0.8 s on it, by the
 * load of the moment. Before the gate, each valid login waited behind the attacker's checks: the issue
 * measured p50 2.9 s, p99 9.1 s; here 4.8 to 13 s against a lone login's 0.3 s (15 to 40
 * times). With it, 2 to 3 times at the median (its check shares the cores with the attacker's
 * single one, and the machine with the attack's requests).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { loginUnderAttack } from "../../scripts/lib/login-attack";
import { percentile } from "../../scripts/lib/wrk";
import { binaryPath, cleanup, startBinary } from "./binary";

const EMAIL = "admin@localhost";
const PASSWORD = "correct horse battery";

beforeAll(async () => {
  await binaryPath();
}, 120_000);

afterAll(() => {
  cleanup();
});

test("a valid login from 127.0.0.1 stays fast while 127.0.0.2 hammers login with 16 requests at once", async () => {
  // The per-address limit of 300 requests a minute would cut the attacker off at admission
  // within a second, so that the gate would not be what is tested: raised out of reach.
  const srv = await startBinary({ env: { SVC_ADMIN_PASSWORD: PASSWORD, SVC_RATE_LIMITS: "anonymous:100000000" } });
  try {
    const login = { base: srv.url, email: EMAIL, password: PASSWORD };
    const quietBefore = await loginUnderAttack({ ...login, logins: 3, concurrency: 0 });
    const attacked = await loginUnderAttack({ ...login, logins: 8, budgetMs: 20_000 });
    const quietAfter = await loginUnderAttack({ ...login, logins: 3, concurrency: 0 });
    const quiet = percentile([...quietBefore.loginMs, ...quietAfter.loginMs], 50);
    const figures = `quiet p50 ${Math.round(quiet)} ms; under attack ${attacked.loginMs.map(Math.round).join(", ")} ms; attacker's answers ${JSON.stringify(attacked.attack)}`;
    console.log(figures);
    expect(attacked.loginMs.length, figures).toBe(8);
    expect(percentile(attacked.loginMs, 50), figures).toBeLessThan(Math.max(1_000, 4 * quiet));
    expect(Math.max(...attacked.loginMs), figures).toBeLessThan(Math.max(2_000, 8 * quiet));
    // The attacker was answered: checks within its share, fast 429s past it.
    expect(attacked.attack[401], figures).toBeGreaterThan(0);
    expect(attacked.attack[429], figures).toBeGreaterThan(attacked.attack[401]!);
  } finally {
    await srv.stop();
  }
}, 90_000);
