/**
 * What readers of the evaluation records cost under load (issue 29), through the compiled
 * binary, in one run: a server with three first-party plugins taking `onEvaluations` (PostHog,
 * ClickHouse, HubSpot) and two integrations with `trackEvaluations` (Mixpanel, Segment), against
 * the same server with none. Every figure is printed:
 *  1. evaluation throughput and p99 at 50 connections, paired rounds alternating which server
 *     goes first; the figure is the median of the rounds' ratios (target >= 90 %);
 *  2. the readers' server's RSS: idle (readers active, before any load), under load (the mean of
 *     its samples during the rounds, and the highest) and 10 s after the load ended
 *     (targets: under load at most 30 % above idle; after 10 s within 10 % of idle); the same
 *     for the server without readers, for comparison;
 *  3. batch evaluation (50 flags a request) with 20 plugins taking `onEvaluations` against none,
 *     paired rounds as in 1;
 *  4. what the readers got: records sent and dropped, per plugin and integration.
 * Nothing is pinned: servers, wrk, the local receiver (every vendor on one port, in this process)
 * and this process share the machine's cores, as on a small VM.
 * Usage: scripts/bench/consumers [--binary PATH] [--rounds N] [--seconds N]
 */
import { join } from "node:path";
import { apiClient, pool } from "../lib/api";
import { benchBinary, benchWorkspace, flagKey, flaggedServer, rssMb, type FlaggedServer } from "../lib/binary";
import { ensureWrk, median, pairedRounds, runWrk, type WrkResult } from "../lib/wrk";
import { argOf } from "../lib/proc";

const ROUNDS = Number(argOf("--rounds") ?? 4);
const SECONDS = Number(argOf("--seconds") ?? 15);
const FLAGS = 100;
const MANY_PLUGINS = 20;
const ADMIN_KEY = `svc_admin_${"c".repeat(40)}`;
ensureWrk();

const api = apiClient(ADMIN_KEY);
const binary = benchBinary(argOf("--binary"), "consumers");
const { dir, live } = benchWorkspace("consumers");

// ---- the receiver: every vendor on one port, answering as each does ---------------------------
let received = 0;
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    received += (await req.arrayBuffer()).byteLength;
    if (path === "/import") return Response.json({ code: 200, status: "OK" });
    if (path === "/v1/batch") return Response.json({ success: true });
    if (path === "/batch/") return Response.json({ status: 1 });
    if (path.startsWith("/crm/")) return Response.json({ status: "COMPLETE", results: [] });
    return new Response("", { status: 200 });
  },
});
const host = `http://127.0.0.1:${receiver.port}`;
const PLUGINS: [string, Record<string, unknown>][] = [
  ["@flagsvc/posthog", { apiKey: "phc_bench", baseUrl: host }],
  ["@flagsvc/clickhouse", { baseUrl: host }],
  ["@flagsvc/hubspot", { accessToken: "bench-token", baseUrl: host }],
];
const INTEGRATIONS: [string, Record<string, unknown>][] = [
  ["mixpanel", { projectToken: "bench-token", apiHost: host }],
  ["segment", { writeKey: "bench-key", apiHost: host }],
];

interface Server extends FlaggedServer {
  name: string;
  plugins: string[];
}

async function server(name: string): Promise<Server> {
  const s = await flaggedServer({ binary, dataDir: join(dir, name), adminKey: ADMIN_KEY, flags: FLAGS, live, env: { SVC_EDITION: "pro" } });
  return { ...s, name, plugins: [] };
}

async function installPlugin(s: Server, packageName: string, config: Record<string, unknown>): Promise<void> {
  const { id } = await api(s.base, "POST", "/v1/projects/default/plugins", { packageName, config });
  for (;;) {
    const st = await api(s.base, "GET", `/v1/projects/default/plugins/${id}/status`);
    if (st.status === "active") break;
    if (st.status !== "installing") throw new Error(`${packageName}: ${st.status} ${st.errorMessage}`);
    await Bun.sleep(10);
  }
  s.plugins.push(id);
}

/** RSS samples of each server taken while it is under load. */
const samples = new Map<number, number[]>();
async function load(s: Server, seconds: number, batch = false): Promise<WrkResult> {
  const body = batch
    ? JSON.stringify({ flags: Array.from({ length: 50 }, (_, i) => flagKey(i)), context: { userId: "user-4711", plan: "pro" } })
    : JSON.stringify({ flagKey: flagKey(50), context: { userId: "user-4711", plan: "pro" } });
  const mine = samples.get(s.pid) ?? [];
  samples.set(s.pid, mine);
  const sampler = setInterval(() => mine.push(rssMb(s.pid)), 250);
  try {
    const r = await runWrk({ url: `${s.base}/v1/evaluate${batch ? "/batch" : ""}`, seconds, method: "POST", body, headers: { authorization: `Bearer ${s.evalKey}` } });
    if (r.non2xx > 0) throw new Error(`${r.non2xx} evaluations were not 2xx`);
    return r;
  } finally {
    clearInterval(sampler);
  }
}

async function readersReport(s: Server): Promise<string> {
  const parts: string[] = [];
  for (const id of s.plugins.slice(0, PLUGINS.length)) {
    const st = await api(s.base, "GET", `/v1/projects/default/plugins/${id}/status`);
    parts.push(`${st.packageName ?? id}: dropped ${st.stats.evaluationsDropped}, status ${st.status}`);
  }
  const { integrations } = await api(s.base, "GET", "/v1/projects/default/integrations");
  for (const i of integrations) parts.push(`${i.type}: sent ${i.stats.sent}, failed ${i.stats.failed}`);
  return parts.join("; ");
}

const fmt = (r: WrkResult) => `${Math.round(r.rps).toString().padStart(6)} req/s   p99 ${r.p99Ms.toFixed(2)} ms`;
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

const none = await server("none");
const readers = await server("readers");
for (const [packageName, config] of PLUGINS) await installPlugin(readers, packageName, config);
for (const [type, config] of INTEGRATIONS) await api(readers.base, "POST", "/v1/projects/default/integrations", { type, config });
console.log(`binary: ${binary}; ${FLAGS} flags; nothing pinned (${navigator.hardwareConcurrency} CPUs shared by both servers, wrk and the receiver)`);
console.log(`readers: plugins ${PLUGINS.map(([p]) => p).join(", ")} (onEvaluations); integrations ${INTEGRATIONS.map(([t]) => t).join(", ")} (trackEvaluations)`);

// ---- 1 and 2: throughput and memory ------------------------------------------------------------
await load(none, 2);
await load(readers, 2);
samples.clear();
await Bun.sleep(10_000);
const idle = { none: rssMb(none.pid), readers: rssMb(readers.pid) };
const { a, b, ratio } = await pairedRounds(ROUNDS, () => load(none, SECONDS), () => load(readers, SECONDS));
console.log(`evaluation (POST /v1/evaluate), 50 connections, ${ROUNDS} paired rounds of ${SECONDS} s:`);
for (let r = 0; r < ROUNDS; r++) console.log(`  round ${r + 1}: none ${fmt(a[r]!)}   readers ${fmt(b[r]!)}   ${pct(b[r]!.rps / a[r]!.rps)}`);
const p99Ratio = median(b.map((r, i) => r.p99Ms / a[i]!.p99Ms));
console.log(`  with 3 plugins and 2 integrations reading: ${pct(ratio)} of the throughput of none (median of the rounds' ratios; target >= 90 %); p99 ${pct(p99Ratio)} of none's`);
await Bun.sleep(10_000);
const after = { none: rssMb(none.pid), readers: rssMb(readers.pid) };
for (const s of [none, readers]) {
  const xs = samples.get(s.pid)!;
  const mean = xs.reduce((n, x) => n + x, 0) / xs.length;
  const max = Math.max(...xs);
  const i = idle[s.name as keyof typeof idle];
  const e = after[s.name as keyof typeof after];
  console.log(
    `  RSS ${s.name.padEnd(7)}: idle ${i.toFixed(0)} MB; under load mean ${mean.toFixed(0)} MB (${pct(mean / i - 1)} above idle), highest ${max.toFixed(0)} MB (${pct(max / i - 1)}); 10 s after ${e.toFixed(0)} MB (${pct(e / i - 1)})`,
  );
}
console.log("  targets (readers): under load at most 30 % above idle; 10 s after within 10 % of idle");
console.log(`  what the readers did: ${await readersReport(readers)}`);

// ---- 3: batch evaluation with 20 plugins --------------------------------------------------------
await pool(MANY_PLUGINS - PLUGINS.length, 2, async (i) => installPlugin(readers, "@flagsvc/posthog", { apiKey: `phc_bench_${i}`, baseUrl: host }));
await load(none, 3, true);
await load(readers, 3, true);
await Bun.sleep(3000);
const many = await pairedRounds(ROUNDS, () => load(none, SECONDS, true), () => load(readers, SECONDS, true));
console.log(`batch evaluation (50 flags a request), ${MANY_PLUGINS} plugins and 2 integrations reading, ${ROUNDS} paired rounds of ${SECONDS} s:`);
for (let r = 0; r < ROUNDS; r++) console.log(`  round ${r + 1}: none ${fmt(many.a[r]!)}   readers ${fmt(many.b[r]!)}   ${pct(many.b[r]!.rps / many.a[r]!.rps)}`);
console.log(`  ${pct(many.ratio)} of the throughput of none (median of the rounds' ratios)`);
console.log(`receiver took ${(received / 1e6).toFixed(1)} MB`);

receiver.stop(true);
process.exit(0);
