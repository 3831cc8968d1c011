/**
 * Valid logins from one loopback address while another hammers POST /v1/auth/login (issue 20,
 * point 5): the e2e test on the binary and `scripts/bench/auth --login` both run it.
 * Requests go through node:https agents bound to a source address (`localAddress`; on Linux any
 * 127.x.y.z is a local address of the loopback interface), with keep-alive connections, so the
 * server sees two clients, as it would two hosts. The attacker is a process of its own (this file
 * run as a script), as another host would be: in the measuring process, its thousands of answers
 * a second would queue the valid logins' own answers behind them and inflate their times.
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
  const user = agent(opts.loginFrom ?? "127.0.0.1");
  const attacker =
    concurrency > 0
      ? Bun.spawn([process.execPath, import.meta.path, base, opts.attackFrom ?? "127.0.0.2", String(concurrency)], { stdout: "pipe", stderr: "inherit" })
      : undefined;
  try {
    if (attacker) await Bun.sleep(500); // the attack in full swing first
    const loginMs: number[] = [];
    const started = performance.now();
    for (let i = 0; i < opts.logins && performance.now() - started < budgetMs; i++) {
      const { status, ms } = await post(base, user, opts.email, opts.password);
      if (status !== 200) throw new Error(`valid login ${i + 1} answered ${status}`);
      loginMs.push(ms);
      await Bun.sleep(pauseMs);
    }
    return { loginMs, attack: attacker ? await stop(attacker) : {} };
  } finally {
    attacker?.kill("SIGKILL");
    user.destroy();
  }
}

/** Stops the attacking process; its answers by status, as it printed them. */
async function stop(attacker: Bun.Subprocess<"ignore", "pipe", "inherit">): Promise<Record<number, number>> {
  attacker.kill("SIGTERM");
  const printed = await new Response(attacker.stdout).text();
  await attacker.exited;
  return JSON.parse(printed) as Record<number, number>;
}

/**
 * The attacker (run as a script: BASE FROM CONCURRENCY): `concurrency` logins with random
 * unknown emails in flight at all times (each would cost a full check, and none is ever locked
 * out), until SIGTERM; then its answers by status, as JSON on stdout.
 */
async function hammer(base: string, from: string, concurrency: number): Promise<void> {
  const via = agent(from);
  const attack: Record<number, number> = {};
  let stopped = false;
  process.on("SIGTERM", () => (stopped = true));
  const loop = async () => {
    while (!stopped) {
      const { status } = await post(base, via, `${crypto.randomUUID()}@example.com`, "wrong password").catch(() => ({ status: 0 }));
      attack[status] = (attack[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  via.destroy();
  process.stdout.write(JSON.stringify(attack));
}

if (import.meta.main) await hammer(process.argv[2]!, process.argv[3]!, Number(process.argv[4]));
