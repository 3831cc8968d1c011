/**
 * Evaluation under writes, through the compiled binary over HTTPS keep-alive: `POST /v1/evaluate`
 * with wrk -t1 -c50 (as scripts/bench/eval does it), alone and while `--rate` flag and state
 * writes a second run alongside (half state PUTs flipping `enabled`, half flag PATCHes, started
 * on a fixed schedule by this process with an admin key), in the same run: each round runs both,
 * which goes first alternating by round; the figures are the medians of the rounds' ratios
 * (under writes / alone), since the VM's speed drifts between rounds. 1,000 flags; no webhook
 * registered; the eval, mgmt and admin limits are raised out of reach through SVC_RATE_LIMITS.
 * Servers on CPU 0 (every thread), wrk and the writer on CPU 1 when the machine has two.
 * With `--baseline PATH`, a second binary is started and seeded too, and each round measures
 * both (one at a time, which goes first alternating by round).
 * Target (issue 21): evaluation p99 under writes within 25 % of alone, throughput at least 90 %.
 * Usage: scripts/bench/mixed [--binary PATH] [--baseline PATH] [--rounds N] [--seconds N] [--rate N]
 */
import { join } from "node:path";
import { apiClient } from "../lib/api";
import { benchBinary, benchWorkspace } from "../lib/binary";
import { ensureWrk, median, percentile, pinServer, runWrk, type WrkResult } from "../lib/wrk";
import { ADMIN_KEY, flagKey, paced, seededServer, type Seeded } from "../lib/writes";
import { argOf } from "../lib/proc";

const ROUNDS = Number(argOf("--rounds") ?? 4);
const SECONDS = Number(argOf("--seconds") ?? 8);
const RATE = Number(argOf("--rate") ?? 100);
const FLAGS = 1000;
ensureWrk();

const api = apiClient(ADMIN_KEY);
const binaries: [string, string][] = [["after", benchBinary(argOf("--binary"), "mixed")]];
const baseline = argOf("--baseline");
if (baseline !== undefined) binaries.unshift(["before", benchBinary(baseline, "mixed")]);
const { dir, live } = benchWorkspace("mixed");
const body = JSON.stringify({ flagKey: flagKey(500), context: { userId: "user-4711", plan: "pro", country: "DE" } });

console.log(`${ROUNDS} rounds: POST /v1/evaluate with wrk -t1 -c50 -d${SECONDS}s over HTTPS keep-alive, alone and with ${RATE} writes/s alongside (half state PUT, half flag PATCH), ${FLAGS} flags; no webhook registered`);
const servers = new Map<string, Seeded & { evalKey: string }>();
let cpu: number | undefined;
for (const [name, binary] of binaries) {
  const server = await seededServer(binary, join(dir, name), FLAGS, ["eval", "mgmt", "admin"]);
  live.add(server.proc);
  const { key } = await api(server.base, "POST", "/v1/projects/default/api-keys", { name: "bench", scope: "eval", environment: "production" });
  servers.set(name, { ...server, evalKey: key });
  cpu = pinServer(server.proc.pid);
  console.log(`  ${name}: ${binary}`);
}
if (cpu !== undefined) Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
console.log(cpu === undefined ? "  (one CPU: servers, wrk and the writer share it)" : `  servers on CPU 0, wrk and the writer on CPU ${cpu}`);

interface Pair {
  alone: WrkResult;
  mixed: WrkResult;
  writeMs: number[];
}
const pairs = new Map<string, Pair[]>(binaries.map(([name]) => [name, []]));
const fmt = (r: WrkResult) => `${Math.round(r.rps).toString().padStart(6)} req/s   p50 ${r.p50Ms.toFixed(2)} ms   p99 ${r.p99Ms.toFixed(2)} ms`;

async function evaluate(server: Seeded & { evalKey: string }, seconds: number): Promise<WrkResult> {
  const r = await runWrk({ url: `${server.base}/v1/evaluate`, seconds, cpu, method: "POST", body, headers: { authorization: `Bearer ${server.evalKey}` } });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} evaluations were not 2xx`);
  return r;
}

async function underWrites(server: Seeded & { evalKey: string }, seconds: number): Promise<{ result: WrkResult; writeMs: number[] }> {
  const writes = paced(server, RATE);
  const result = await evaluate(server, seconds);
  const { latencies, skipped } = await writes.stop();
  if (skipped > 0) console.log(`    (${skipped} writes not started: 16 were unanswered)`);
  return { result, writeMs: latencies };
}

// Warm-up: JIT, the first writes' query compilation.
for (const server of servers.values()) await underWrites(server, 2);

for (let round = 1; round <= ROUNDS; round++) {
  const order = round % 2 === 1 ? binaries : [...binaries].reverse();
  for (const [name] of order) {
    const server = servers.get(name)!;
    let alone: WrkResult | undefined;
    let mixed: { result: WrkResult; writeMs: number[] } | undefined;
    const steps = [async () => void (alone = await evaluate(server, SECONDS)), async () => void (mixed = await underWrites(server, SECONDS))];
    for (const step of round % 2 === 1 ? steps : steps.reverse()) await step();
    pairs.get(name)!.push({ alone: alone!, mixed: mixed!.result, writeMs: mixed!.writeMs });
    const w = mixed!.writeMs;
    console.log(`  round ${round} ${name.padEnd(6)} alone        ${fmt(alone!)}`);
    console.log(`  round ${round} ${name.padEnd(6)} under writes ${fmt(mixed!.result)}   (${w.length} writes: p50 ${percentile(w, 50).toFixed(1)} ms, p99 ${percentile(w, 99).toFixed(1)} ms)`);
  }
}

console.log("");
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const met = (ok: boolean) => (ok ? "met" : "NOT met");
const med = (runs: WrkResult[]): WrkResult => ({
  rps: median(runs.map((r) => r.rps)),
  requests: median(runs.map((r) => r.requests)),
  p50Ms: median(runs.map((r) => r.p50Ms)),
  p99Ms: median(runs.map((r) => r.p99Ms)),
  non2xx: 0,
});
for (const [name] of binaries) {
  const p = pairs.get(name)!;
  const p99 = median(p.map((x) => x.mixed.p99Ms / x.alone.p99Ms));
  const rps = median(p.map((x) => x.mixed.rps / x.alone.rps));
  const w = p.flatMap((x) => x.writeMs);
  console.log(`${name.padEnd(6)} evaluate alone        median ${fmt(med(p.map((x) => x.alone)))}`);
  console.log(`${name.padEnd(6)} evaluate under writes median ${fmt(med(p.map((x) => x.mixed)))}; the writes: p50 ${percentile(w, 50).toFixed(1)} ms, p99 ${percentile(w, 99).toFixed(1)} ms`);
  console.log(`  under writes / alone, median of the rounds' ratios: p99 ${pct(p99)} (target <= 125 %: ${met(p99 <= 1.25)}), throughput ${pct(rps)} (target >= 90 %: ${met(rps >= 0.9)})`);
}
if (baseline !== undefined) {
  const after = pairs.get("after")!;
  const before = pairs.get("before")!;
  const ratio = (f: (x: Pair) => number) => pct(median(after.map((x, i) => f(x) / f(before[i]!))));
  console.log(`after / before under writes, median of the rounds' ratios: evaluate p99 ${ratio((x) => x.mixed.p99Ms)}, throughput ${ratio((x) => x.mixed.rps)}`);
}
process.exit(0);
