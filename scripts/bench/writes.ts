/**
 * Flag writes through the compiled binary over HTTPS keep-alive: state PUT
 * (`PUT /v1/projects/default/flags/{key}/states/production`, flipping `enabled`) and flag PATCH
 * (`PATCH /v1/projects/default/flags/{key}`, a new name and one rule dropped or restored),
 * throughput and p50/p99, on 1,000 flags, with an admin key, `--clients` writers each keeping
 * one request in flight on its own flags, `--seconds` per kind and round. No webhook is
 * registered (a write stores no event and kicks nothing). The mgmt and admin limits are raised
 * out of reach through SVC_RATE_LIMITS, so the limiter runs but does not cap the figures.
 * With `--baseline PATH`, a second binary (e.g. built from the commit before a change) is
 * measured side by side: both are started and seeded, then each round loads one at a time,
 * which goes first alternating by round, so that both meet the machine's load alike; the
 * summary gives after / before ratios (the median of the rounds'). Servers on CPU 0, this
 * process on CPU 1 when the machine has two.
 * Target (issue 21): after at most 15 % slower than before.
 * Usage: scripts/bench/writes [--binary PATH] [--baseline PATH] [--rounds N] [--seconds N] [--clients N]
 */
import { join } from "node:path";
import { benchBinary, benchWorkspace } from "../lib/binary";
import { median, percentile, pinServer } from "../lib/wrk";
import { saturate, seededServer, type Seeded, type WriteKind } from "../lib/writes";
import { argOf } from "../lib/proc";

const ROUNDS = Number(argOf("--rounds") ?? 3);
const SECONDS = Number(argOf("--seconds") ?? 5);
const CLIENTS = Number(argOf("--clients") ?? 8);
const FLAGS = 1000;
const KINDS: [WriteKind, string][] = [
  ["state", "state PUT"],
  ["patch", "flag PATCH"],
];

interface Run {
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

const binaries: [string, string][] = [["after", benchBinary(argOf("--binary"), "writes")]];
const baseline = argOf("--baseline");
if (baseline !== undefined) binaries.unshift(["before", benchBinary(baseline, "writes")]);
const { dir, live } = benchWorkspace("writes");

console.log(`${ROUNDS} rounds of ${SECONDS} s per kind and binary: ${CLIENTS} clients, one request each in flight, HTTPS keep-alive, admin key, ${FLAGS} flags; no webhook registered`);
const servers = new Map<string, Seeded>();
let cpu: number | undefined;
for (const [name, binary] of binaries) {
  const t0 = performance.now();
  const server = await seededServer(binary, join(dir, name), FLAGS, ["mgmt", "admin"]);
  live.add(server.proc);
  servers.set(name, server);
  cpu = pinServer(server.proc.pid);
  console.log(`  ${name}: ${binary} (${FLAGS} flags seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}
if (cpu !== undefined) Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
console.log(cpu === undefined ? "  (one CPU: servers and clients share it)" : `  servers on CPU 0, clients on CPU ${cpu}`);

const runs = new Map<string, Run[]>();
const fmt = (r: Run) => `${Math.round(r.rps).toString().padStart(6)} writes/s   p50 ${r.p50Ms.toFixed(2)} ms   p99 ${r.p99Ms.toFixed(2)} ms`;
// A short warm-up of each kind on each binary: the first writes compile queries and JIT.
for (const server of servers.values()) for (const [kind] of KINDS) await saturate(server, kind, CLIENTS, 1);

for (let round = 1; round <= ROUNDS; round++) {
  const order = round % 2 === 1 ? binaries : [...binaries].reverse();
  for (const [kind, label] of KINDS) {
    for (const [name] of order) {
      const latencies = await saturate(servers.get(name)!, kind, CLIENTS, SECONDS);
      const run = { rps: latencies.length / SECONDS, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
      runs.set(`${name} ${kind}`, [...(runs.get(`${name} ${kind}`) ?? []), run]);
      console.log(`  round ${round} ${name.padEnd(6)} ${label.padEnd(10)} ${fmt(run)}`);
    }
  }
}

console.log("");
for (const [kind, label] of KINDS) {
  for (const [name] of binaries) {
    const r = runs.get(`${name} ${kind}`)!;
    console.log(`${name.padEnd(6)} ${label.padEnd(10)} median ${fmt({ rps: median(r.map((x) => x.rps)), p50Ms: median(r.map((x) => x.p50Ms)), p99Ms: median(r.map((x) => x.p99Ms)) })}`);
  }
  if (baseline !== undefined) {
    const after = runs.get(`after ${kind}`)!;
    const before = runs.get(`before ${kind}`)!;
    const ratio = (f: (r: Run) => number) => median(after.map((r, i) => f(r) / f(before[i]!)));
    const rps = ratio((r) => r.rps);
    console.log(
      `  after / before, median of the rounds' ratios: throughput ${(rps * 100).toFixed(1)} % (target >= 85 %: ${rps >= 0.85 ? "met" : "NOT met"}), p50 ${(ratio((r) => r.p50Ms) * 100).toFixed(1)} %, p99 ${(ratio((r) => r.p99Ms) * 100).toFixed(1)} %`,
    );
  }
}
process.exit(0);
