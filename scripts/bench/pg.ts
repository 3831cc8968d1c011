/**
 * Several nodes on PostgreSQL (docs/scaling.md, Sizing), through the compiled binary, side by
 * side with SQLite in the same run:
 *  - evaluate throughput (wrk -t1 -c50, HTTPS keep-alive, POST /v1/evaluate) of one node on
 *    PostgreSQL against one on SQLite, in alternating rounds; the figure is the median of the
 *    rounds' ratios (target >= 95 %: evaluation never reads the database). Servers on CPU 0, wrk
 *    on CPU 1 when the machine has two;
 *  - two PostgreSQL nodes against one: client-side round-robin, two wrk processes of 25
 *    connections each, one per node's port (their sum), against one wrk of 50 connections on one
 *    node; nothing pinned, since the two nodes and the load share every core;
 *  - a write on node A (a state PUT flipping `enabled`) until node B's evaluation reflects it,
 *    timed from the write's start, B polled without pause: p50 / p99 over `--writes` writes
 *    (target p99 < 100 ms);
 *  - state PUT latency and throughput on PostgreSQL and on SQLite, in alternating rounds, with 1
 *    and with 8 writers each keeping one write in flight (scripts/lib/writes.ts).
 * Every node has the same 1,000 flags (two rules each, enabled at 50 % in production): seeded
 * through the SQLite node and through node A; B starts after that and loads them.
 * PostgreSQL: FLAGSVC_TEST_PG_URL (a superuser's URL; a database is created there), else a
 * private cluster of Debian's package started for the run (test/pg.ts). A figure, not a test:
 * exit 0 whether or not the targets are met.
 * Usage: scripts/bench/pg [BINARY] [--seconds N] [--rounds N] [--writes N]
 */
import { join } from "node:path";
import { createDatabase, pgAvailable } from "../../test/pg";
import { apiClient } from "../lib/api";
import { benchBinary, benchWorkspace, launchBinary } from "../lib/binary";
import { argOf } from "../lib/proc";
import { median, pairedRounds, percentile, pinServer, runWrk, ensureWrk, type WrkResult } from "../lib/wrk";
import { ADMIN_KEY, flagKey, saturate, seededServer, type Seeded } from "../lib/writes";

const SECONDS = Number(argOf("--seconds") ?? 5);
const ROUNDS = Number(argOf("--rounds") ?? 4);
const WRITES = Number(argOf("--writes") ?? 250);
const FLAGS = 1000;
const WRITE_SECONDS = 3;
const WRITE_ROUNDS = 3;

if (!pgAvailable()) {
  console.log("pg bench: no PostgreSQL (set FLAGSVC_TEST_PG_URL, or install Debian's postgresql): nothing measured");
  process.exit(0);
}
ensureWrk();
const binary = benchBinary(process.argv.slice(2).find((a, i, all) => !a.startsWith("--") && !all[i - 1]?.startsWith("--")), "pg");
const { dir, live } = benchWorkspace("pg");
const api = apiClient(ADMIN_KEY);
const LIMITS = ["eval", "mgmt", "admin"];
const JWT = "bench-pg-jwt-secret-of-enough-length-0123456789";
const CONTEXT = { userId: "user-4711", plan: "pro", country: "DE" };
const evaluateBody = (key: string) => JSON.stringify({ flagKey: key, context: CONTEXT });

console.log(`binary ${binary}; ${FLAGS} flags; wrk -t1 over HTTPS keep-alive, ${ROUNDS} rounds of ${SECONDS} s`);
const url = await createDatabase();
const pgEnv = { SVC_DATABASE_URL: url, SVC_JWT_SECRET: JWT };

const t0 = performance.now();
const [sqlite, a] = await Promise.all([
  seededServer(binary, join(dir, "sqlite"), FLAGS, LIMITS),
  seededServer(binary, join(dir, "a"), FLAGS, LIMITS, pgEnv),
]);
live.add(sqlite.proc);
live.add(a.proc);
const b = await launchBinary(binary, join(dir, "b"), { SVC_LOG_LEVEL: "warn", SVC_RATE_LIMITS: LIMITS.map((k) => `${k}:100000000`).join(","), ...pgEnv });
live.add(b.proc);
console.log(`  seeded the SQLite node and PostgreSQL node A, then started node B, in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

const evalKey = async (server: { base: string }) => (await api(server.base, "POST", "/v1/projects/default/api-keys", { name: "bench", scope: "eval", environment: "production" })).key as string;
const keys = { sqlite: await evalKey(sqlite), pg: await evalKey(a) };

const fmt = (r: { rps: number; p50Ms: number; p99Ms: number }, unit = "req/s") =>
  `${Math.round(r.rps).toString().padStart(7)} ${unit}   p50 ${r.p50Ms.toFixed(2)} ms   p99 ${r.p99Ms.toFixed(2)} ms`;
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const met = (ok: boolean) => (ok ? "met" : "NOT met");

async function evaluate(label: string, base: string, key: string, opts: { cpu?: number; connections?: number } = {}): Promise<WrkResult> {
  const r = await runWrk({ url: `${base}/v1/evaluate`, seconds: SECONDS, cpu: opts.cpu, connections: opts.connections, method: "POST", body: evaluateBody(flagKey(500)), headers: { authorization: `Bearer ${key}` } });
  if (r.non2xx > 0) throw new Error(`${label}: ${r.non2xx} answers were not 2xx`);
  console.log(`    ${label.padEnd(30)} ${fmt(r)}`);
  return r;
}

// ---- 1. one node on PostgreSQL against one on SQLite ----------------------------------------
const cpu = pinServer(sqlite.proc.pid);
pinServer(a.proc.pid);
console.log(`\nevaluate, one node: SQLite and PostgreSQL in alternating rounds ${cpu === undefined ? "(one CPU: all share it)" : "(servers on CPU 0, wrk on CPU 1)"}`);
const one = await pairedRounds(
  ROUNDS,
  (r) => evaluate(`round ${r} SQLite`, sqlite.base, keys.sqlite, { cpu }),
  (r) => evaluate(`round ${r} PostgreSQL`, a.base, keys.pg, { cpu }),
);

// ---- 2. two PostgreSQL nodes against one --------------------------------------------------
const unpin = (pid: number) => Bun.spawnSync(["taskset", "-a", "-cp", `0-${navigator.hardwareConcurrency - 1}`, String(pid)], { stdout: "ignore", stderr: "ignore" });
for (const pid of [a.proc.pid, b.proc.pid, process.pid]) unpin(pid);
console.log(`\nevaluate on PostgreSQL, two nodes (client-side round-robin: 2 x wrk -c25, one per node) against one node (wrk -c50); nothing pinned`);
const both = async (r: number): Promise<WrkResult> => {
  const [x, y] = await Promise.all([
    runWrk({ url: `${a.base}/v1/evaluate`, seconds: SECONDS, connections: 25, method: "POST", body: evaluateBody(flagKey(500)), headers: { authorization: `Bearer ${keys.pg}` } }),
    runWrk({ url: `${b.base}/v1/evaluate`, seconds: SECONDS, connections: 25, method: "POST", body: evaluateBody(flagKey(500)), headers: { authorization: `Bearer ${keys.pg}` } }),
  ]);
  if (x.non2xx + y.non2xx > 0) throw new Error("two nodes: answers that were not 2xx");
  const sum = { rps: x.rps + y.rps, requests: x.requests + y.requests, p50Ms: Math.max(x.p50Ms, y.p50Ms), p99Ms: Math.max(x.p99Ms, y.p99Ms), non2xx: 0 };
  console.log(`    ${`round ${r} two nodes (A + B)`.padEnd(30)} ${fmt(sum)}   (A ${Math.round(x.rps)}, B ${Math.round(y.rps)}; p50/p99 the worse node's)`);
  return sum;
};
const two = await pairedRounds(ROUNDS, (r) => evaluate(`round ${r} one node (A)`, a.base, keys.pg), both);

// ---- 3. a write on A until B's evaluation reflects it ---------------------------------------
console.log(`\nwrite on A -> evaluation on B: ${WRITES} state PUTs on A, each timed until B's evaluation reflects it`);
const tls = { rejectUnauthorized: false };
const evaluateOnB = async (key: string): Promise<boolean> => {
  const res = await fetch(`${b.base}/v1/evaluate`, { method: "POST", headers: { authorization: `Bearer ${keys.pg}`, "content-type": "application/json" }, body: evaluateBody(key), tls });
  if (res.status !== 200) throw new Error(`B answered ${res.status}`);
  return ((await res.json()) as { reason: string }).reason !== "FLAG_DISABLED";
};
const toB: number[] = [];
const acked: number[] = [];
for (let i = 0; i < WRITES; i++) {
  const key = flagKey(i % FLAGS);
  const enabled = (await evaluateOnB(key)) === false; // flip what B sees now
  const start = performance.now();
  const write = api(a.base, "PUT", `/v1/projects/default/flags/${key}/states/production`, { enabled }).then(() => acked.push(performance.now() - start));
  while ((await evaluateOnB(key)) !== enabled) {
    if (performance.now() - start > 5000) throw new Error(`B did not reflect the write on ${key} within 5 s`);
  }
  toB.push(performance.now() - start);
  await write;
}
const summary = (xs: number[]) => `p50 ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`;
console.log(`    A -> B's evaluation: ${summary(toB)}`);
console.log(`    (A's own answer to the PUT: ${summary(acked)})`);

// ---- 4. state PUT on PostgreSQL and on SQLite ----------------------------------------------
if (cpu !== undefined) {
  pinServer(sqlite.proc.pid);
  pinServer(a.proc.pid);
  Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
}
b.proc.kill("SIGTERM");
await b.proc.exited;
live.delete(b.proc);
console.log(`\nstate PUT, ${WRITE_ROUNDS} rounds of ${WRITE_SECONDS} s per backend and writer count, alternating (servers on CPU 0, writers on CPU 1; PostgreSQL itself unpinned)`);
interface WriteRun {
  rps: number;
  p50Ms: number;
  p99Ms: number;
}
const putRun = async (label: string, server: Seeded, clients: number): Promise<WriteRun> => {
  const latencies = await saturate(server, "state", clients, WRITE_SECONDS);
  const run = { rps: latencies.length / WRITE_SECONDS, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
  console.log(`    ${label.padEnd(30)} ${fmt(run, "writes/s")}`);
  return run;
};
for (const server of [sqlite, a]) await saturate(server, "state", 8, 1); // warm-up
const puts: Record<string, { sqlite: WriteRun[]; pg: WriteRun[] }> = {};
for (const clients of [1, 8]) {
  const runs = (puts[clients] = { sqlite: [] as WriteRun[], pg: [] as WriteRun[] });
  for (let r = 1; r <= WRITE_ROUNDS; r++) {
    const pair = [
      async () => runs.sqlite.push(await putRun(`round ${r} SQLite, ${clients} writer${clients > 1 ? "s" : ""}`, sqlite, clients)),
      async () => runs.pg.push(await putRun(`round ${r} PostgreSQL, ${clients} writer${clients > 1 ? "s" : ""}`, a, clients)),
    ];
    for (const run of r % 2 === 1 ? pair : pair.reverse()) await run();
  }
}

// ---- summary --------------------------------------------------------------------------------
const med = (runs: { rps: number; p50Ms: number; p99Ms: number }[]) => ({ rps: median(runs.map((r) => r.rps)), p50Ms: median(runs.map((r) => r.p50Ms)), p99Ms: median(runs.map((r) => r.p99Ms)) });
console.log("\nsummary (medians of the rounds)");
console.log(`  evaluate, one node:  SQLite ${fmt(med(one.a))}`);
console.log(`                       PostgreSQL ${fmt(med(one.b))}`);
console.log(`  PostgreSQL / SQLite, median of the rounds' ratios: ${pct(one.ratio)} (target >= 95 %: ${met(one.ratio >= 0.95)})`);
console.log(`  evaluate on PostgreSQL: one node ${fmt(med(two.a))}; two nodes ${fmt(med(two.b))}; two / one ${pct(two.ratio)}`);
console.log(`  write on A -> evaluation on B over ${WRITES} writes: ${summary(toB)} (target p99 < 100 ms: ${met(percentile(toB, 99) < 100)})`);
for (const clients of [1, 8]) {
  const { sqlite: s, pg } = puts[clients]!;
  console.log(`  state PUT, ${clients} writer${clients > 1 ? "s" : " "}: SQLite ${fmt(med(s), "writes/s")}; PostgreSQL ${fmt(med(pg), "writes/s")}`);
}
console.log(`  machine: ${navigator.hardwareConcurrency} CPUs; PostgreSQL ${process.env.FLAGSVC_TEST_PG_URL ? "at FLAGSVC_TEST_PG_URL" : "a private local cluster (fsync off, test/pg.ts)"}`);
process.exit(0);
