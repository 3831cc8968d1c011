/**
 * What `/metrics` costs (docs/metrics.md, "What counting costs").
 *
 * Usage: bun scripts/bench/metrics.ts [BINARY] [--rounds N] [--seconds N] [--baseline REV]
 *
 *  a) Evaluate throughput, counting on against counting off, in the same run: POST /v1/evaluate
 *     with wrk -t1 -c50 (servers on CPU 0, wrk on CPU 1), in rounds of two runs back to back
 *     whose order alternates; the figure is the median of the rounds' ratios (target >= 97 %).
 *     Counting on: this tree's binary (dist/flagsvc). Counting off: the binary built from the
 *     commit before the counting began (`--baseline`, default the parent of the commit
 *     "Evaluation counts (issue 32 groundwork)"), which has neither the per-evaluation counter
 *     nor the request counts, and differs from this tree in nothing else on the evaluation path.
 *     No switch in the service turns counting off: a branch on the hot path would be measured too.
 *  b) The memory of the evaluation counters with 10,000 flags x 3 environments x 4 variants,
 *     every cell touched (each variant with every reason): heap after a full collection, with
 *     and without the counters, in this process.
 *  c) A `/metrics` scrape with those counters (120,000 evaluation series: one reason a
 *     variant), the request counts of 40 routes and the process defaults: the registry's text,
 *     timed in this process (median of 7), and its size.
 * Figures, not a test: exit 0 whether or not targets are met.
 */
import { existsSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { FlagCounter } from "../../src/evaluation/counts";
import type { LabelledCounter } from "../../src/evaluation/snapshot";
import { REASONS, type EvaluationResult } from "../../src/evaluation/types";
import { RequestCounts } from "../../src/http/request-counts";
import { LOGIN_REFUSALS, Tally } from "../../src/modules/metrics/counts";
import { createMetrics } from "../../src/modules/metrics/service";
import { benchBinary, benchWorkspace, flaggedServer, flagKey, ROOT } from "../lib/binary";
import { ensureWrk, median, pairedRounds, pinServer, runWrk } from "../lib/wrk";

const argv = process.argv.slice(2);
const option = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const ROUNDS = Number(option("--rounds") ?? 6);
const SECONDS = Number(option("--seconds") ?? 3);
const given = argv.find((a, i) => !a.startsWith("--") && !argv[i - 1]?.startsWith("--"));
const binary = benchBinary(given, "metrics");
const { dir, live } = benchWorkspace("metrics");
const ADMIN_KEY = `svc_admin_${"m".repeat(40)}`;
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

/** The binary of `rev` (the service without counting), built in the scratch folder. */
function baselineBinary(): { rev: string; path: string } {
  const git = (...args: string[]) => Bun.spawnSync(["git", "-C", ROOT, ...args]).stdout.toString().trim();
  const groundwork = git("log", "--format=%H", "-1", "--grep=^Evaluation counts (issue 32 groundwork)");
  const rev = option("--baseline") ?? (groundwork ? `${groundwork}^` : "");
  if (!rev) throw new Error("no baseline: give --baseline REV (a commit without evaluation counting)");
  const sha = git("rev-parse", "--short", rev);
  const tree = join(dir, "baseline");
  mkdirSync(tree);
  const extract = Bun.spawnSync(["bash", "-c", `git -C '${ROOT}' archive '${rev}' | tar -x -C '${tree}'`]);
  if (extract.exitCode !== 0) throw new Error(`cannot extract ${rev}: ${extract.stderr}`);
  symlinkSync(join(ROOT, "node_modules"), join(tree, "node_modules"));
  const path = join(tree, "dist", "flagsvc");
  const build = Bun.spawnSync([process.execPath, "scripts/build.ts"], { cwd: tree, stdout: "ignore", stderr: "inherit" });
  if (build.exitCode !== 0 || !existsSync(path)) throw new Error(`cannot build ${rev}`);
  return { rev: sha, path };
}

// ---- a) throughput ---------------------------------------------------------------------------
ensureWrk();
console.log("building the baseline (counting off) ...");
const baseline = baselineBinary();
const FLAGS = 1_000;
const on = await flaggedServer({ binary, dataDir: join(dir, "on"), adminKey: ADMIN_KEY, flags: FLAGS, live });
const off = await flaggedServer({ binary: baseline.path, dataDir: join(dir, "off"), adminKey: ADMIN_KEY, flags: FLAGS, live });
pinServer(on.pid);
const wrkCpu = pinServer(off.pid);
const evaluate = (s: typeof on) => () =>
  runWrk({ url: `${s.base}/v1/evaluate`, seconds: SECONDS, method: "POST", headers: { authorization: `Bearer ${s.evalKey}` }, body: JSON.stringify({ flagKey: flagKey(42), context: { userId: "user-4711" } }), cpu: wrkCpu });
// Warm both up (JIT, caches) before the measured rounds.
await evaluate(off)();
await evaluate(on)();
const rounds = await pairedRounds(ROUNDS, evaluate(off), evaluate(on));
for (const proc of live) proc.kill("SIGTERM");

// ---- b) counter memory -----------------------------------------------------------------------
const FLAG_COUNT = 10_000;
const ENVIRONMENTS = ["development", "staging", "production"];
const VARIANTS = ["control", "blue", "green", "red"];
const heap = () => {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
};
const before = heap();
const counters: LabelledCounter[] = [];
for (let f = 0; f < FLAG_COUNT; f++) {
  for (const env of ENVIRONMENTS) {
    const counter = new FlagCounter("prj_bench", `env_${env}`, `flag-${String(f).padStart(5, "0")}`);
    for (const variant of VARIANTS) for (const reason of REASONS) counter.add({ variant, enabled: true, reason } as EvaluationResult, 1);
    counters.push({ counter, projectSlug: "default", environmentSlug: env });
  }
}
const counterBytes = heap() - before;

// ---- c) scrape time --------------------------------------------------------------------------
// One reason per variant here: 120,000 series, as a flag serving its four variants by rollout.
const scraped: LabelledCounter[] = counters.map(({ counter, projectSlug, environmentSlug }) => {
  const c = new FlagCounter(counter.projectId, counter.environmentId, counter.flagKey);
  for (const variant of VARIANTS) c.add({ variant, enabled: true, reason: "PERCENTAGE_ROLLOUT" } as EvaluationResult, 1);
  return { counter: c, projectSlug, environmentSlug };
});
const requests = new RequestCounts();
for (let r = 0; r < 40; r++) for (const status of [200, 400, 401, 404]) requests.record(requests.slot("POST", `/v1/route-${r}/:key`), status, 0.002);
const metrics = createMetrics({
  snapshot: { labelledCounters: () => scraped },
  requests,
  deliveries: { storedOutcomes: () => ({ succeeded: 0, retried: 0, failed: 0 }) },
  loginRefused: new Tally(LOGIN_REFUSALS),
  store: { pendingDeliveries: async () => 0, queuedChangeEvents: async () => 0, changeLogPosition: async () => 0, pluginsByStatus: async () => [], integrationEvents: async () => [] },
  schedules: { countPending: async () => 0 },
  streams: { size: () => ({ changes: 0, definitions: 0, audit: 0 }) },
  database: { bytes: async () => 0 },
  version: "bench",
  edition: "ce",
});
const times: number[] = [];
let size = 0;
for (let i = 0; i < 7; i++) {
  const t0 = performance.now();
  size = (await metrics.scrape()).length;
  times.push(performance.now() - t0);
}

console.log(`
a) POST /v1/evaluate, ${FLAGS} flags, wrk -t1 -c50, ${ROUNDS} rounds of ${SECONDS} s + ${SECONDS} s, order alternating
   counting off (${baseline.rev}, before the counting): ${rounds.a.map((r) => Math.round(r.rps)).join(", ")} req/s
   counting on  (this tree):                  ${rounds.b.map((r) => Math.round(r.rps)).join(", ")} req/s
   on / off, median of the rounds' ratios: ${pct(rounds.ratio)} (target >= 97 %); p99 on ${median(rounds.b.map((r) => r.p99Ms)).toFixed(2)} ms, off ${median(rounds.a.map((r) => r.p99Ms)).toFixed(2)} ms
b) evaluation counters, ${FLAG_COUNT} flags x ${ENVIRONMENTS.length} environments x ${VARIANTS.length} variants, every cell touched:
   ${(counterBytes / 1024 / 1024).toFixed(1)} MB of heap (${Math.round(counterBytes / counters.length)} bytes a flag and environment)
c) /metrics text with ${scraped.length * VARIANTS.length} evaluation series, 160 request series and the defaults:
   ${median(times).toFixed(0)} ms (median of 7; min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}), ${(size / 1024 / 1024).toFixed(1)} MB of text`);
process.exit(0);
