/**
 * `scripts/bench/auth --login`: valid logins from 127.0.0.1 while 127.0.0.2 hammers
 * POST /v1/auth/login with 16 requests at once (scripts/lib/login-attack.ts), on a binary, and
 * with `--baseline PATH` on a second binary (e.g. built from the commit before a change), side by
 * side: rounds alternate which binary goes first, one server at a time on a fresh data dir, so
 * that both meet the machine's load alike. Each round measures a few logins without the attack
 * (what a login costs on the machine now), then the logins under attack, for at most `budget`
 * seconds (a login of the binary without the gate takes seconds: fewer of its logins fit).
 * The per-address limit of 300 requests a minute is raised out of reach on both, so that what
 * answers the attacker is the login route, not admission.
 * Usage: scripts/bench/auth --login [--binary PATH] [--baseline PATH] [--rounds N] [--logins N per round] [--budget S]
 */
import { join } from "node:path";
import { benchBinary, benchWorkspace, launchBinary } from "../lib/binary";
import { loginUnderAttack } from "../lib/login-attack";
import { percentile } from "../lib/wrk";
import { argOf } from "../lib/proc";

const EMAIL = "admin@localhost";
const PASSWORD = "correct horse battery";

interface Figures {
  quietMs: number[];
  attackedMs: number[];
  attack: Record<number, number>;
}

export async function loginBench(argv: string[]): Promise<void> {
  const arg = (name: string) => argOf(name, argv);
  const rounds = Number(arg("--rounds") ?? 3);
  const logins = Number(arg("--logins") ?? 8);
  const budgetMs = Number(arg("--budget") ?? 15) * 1000;
  const binaries: [string, string][] = [["after", benchBinary(arg("--binary"), "auth --login")]];
  const baseline = arg("--baseline");
  if (baseline !== undefined) binaries.unshift(["before", benchBinary(baseline, "auth --login")]);
  const { dir, live } = benchWorkspace("login");
  const figures = new Map<string, Figures>(binaries.map(([name]) => [name, { quietMs: [], attackedMs: [], attack: {} }]));
  console.log(
    `${rounds} rounds: per binary, 3 lone logins, then up to ${logins} valid logins from 127.0.0.1 (for at most ${budgetMs / 1000} s) while 127.0.0.2 keeps 16 logins with random emails in flight`,
  );
  for (const [name, binary] of binaries) console.log(`  ${name}: ${binary}`);
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? binaries : [...binaries].reverse();
    for (const [name, binary] of order) {
      const { proc, base } = await launchBinary(binary, join(dir, `${name}-${round}`), {
        SVC_LOG_LEVEL: "warn",
        SVC_ADMIN_PASSWORD: PASSWORD,
        SVC_RATE_LIMITS: "anonymous:100000000",
      });
      live.add(proc);
      try {
        const login = { base, email: EMAIL, password: PASSWORD };
        const quiet = await loginUnderAttack({ ...login, logins: 3, concurrency: 0 });
        const attacked = await loginUnderAttack({ ...login, logins, budgetMs });
        const f = figures.get(name)!;
        f.quietMs.push(...quiet.loginMs);
        f.attackedMs.push(...attacked.loginMs);
        for (const [status, n] of Object.entries(attacked.attack)) f.attack[Number(status)] = (f.attack[Number(status)] ?? 0) + n;
        console.log(`  round ${round} ${name.padEnd(6)} lone ${ms(percentile(quiet.loginMs, 50))}; under attack ${attacked.loginMs.map(ms).join(", ")}`);
      } finally {
        proc.kill();
        await proc.exited;
        live.delete(proc);
      }
    }
  }
  for (const [name, f] of figures) {
    const a = f.attackedMs;
    console.log(
      `${name.padEnd(6)} valid logins under attack (${a.length}): p50 ${ms(percentile(a, 50))}, p99 ${ms(percentile(a, 99))}, max ${ms(Math.max(...a))}; lone p50 ${ms(percentile(f.quietMs, 50))}; attacker's answers ${JSON.stringify(f.attack)}`,
    );
  }
}

const ms = (n: number) => `${Math.round(n)} ms`;
