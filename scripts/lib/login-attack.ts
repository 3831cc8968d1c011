/**
 * Valid logins from one loopback address while another hammers POST /v1/auth/login (issue 20,
 * point 5): the e2e test on the binary and `scripts/bench/auth --login` both run it.
 * Requests go through node:https agents bound to a source address (`localAddress`; on Linux any
 * 127.x.y.z is a local address of the loopback interface), with keep-alive connections, so the
 * server sees two clients, as it would two hosts.
 */
import { Agent, request } from "node:https";

export interface AttackOptions {
  /** `https://127.0.0.1:PORT` of a running server. */
  base: string;
  email: string;
  password: string;
  /** The valid logins, one after the other, each `pauseMs` after the previous answer. */
  logins: number;
  pauseMs?: number;
  /** No valid login is sent once this long has passed since the first (then fewer are made). */
  budgetMs?: number;
  /** Requests in flight from the attacker at all times: each answer sends the next at once (0: no attack). */
  concurrency?: number;
  attackFrom?: string;
  loginFrom?: string;
}

export interface AttackResult {
  /** How long each valid login took, in the order sent (milliseconds). */
  loginMs: number[];
  /** The attacker's answers by status. */
  attack: Record<number, number>;
}

const agent = (localAddress: string) => new Agent({ keepAlive: true, localAddress, rejectUnauthorized: false });

/** One login through `via`: its status and how long it took. */
function post(base: string, via: Agent, email: string, password: string): Promise<{ status: number; ms: number }> {
  const body = JSON.stringify({ email, password });
  const started = performance.now();
  return new Promise((done, fail) => {
    const req = request(
      `${base}/v1/auth/login`,
      { method: "POST", agent: via, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on("end", () => done({ status: res.statusCode!, ms: performance.now() - started }));
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

export async function loginUnderAttack(opts: AttackOptions): Promise<AttackResult> {
  const { base, concurrency = 16, pauseMs = 100, budgetMs = Infinity } = opts;
  const attacker = agent(opts.attackFrom ?? "127.0.0.2");
  const user = agent(opts.loginFrom ?? "127.0.0.1");
  const attack: Record<number, number> = {};
  let stopped = false;
  // Random unknown emails: each costs a full check (the dummy hash) and none is ever locked out.
  const hammer = async () => {
    while (!stopped) {
      const { status } = await post(base, attacker, `${crypto.randomUUID()}@example.com`, "wrong password");
      attack[status] = (attack[status] ?? 0) + 1;
    }
  };
  const loops = Array.from({ length: concurrency }, hammer);
  try {
    if (concurrency > 0) await Bun.sleep(500); // the attack in full swing first
    const loginMs: number[] = [];
    const started = performance.now();
    for (let i = 0; i < opts.logins && performance.now() - started < budgetMs; i++) {
      const { status, ms } = await post(base, user, opts.email, opts.password);
      if (status !== 200) throw new Error(`valid login ${i + 1} answered ${status}`);
      loginMs.push(ms);
      await Bun.sleep(pauseMs);
    }
    return { loginMs, attack };
  } finally {
    stopped = true;
    await Promise.allSettled(loops);
    attacker.destroy();
    user.destroy();
  }
}

/** The `p`-th percentile (0-100) of `values`, nearest rank. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
