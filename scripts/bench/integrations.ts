/**
 * Integrations through the compiled binary (Pro), each figure printed:
 *  1. evaluation throughput with all six integrations enabled (trackEvaluations on, the
 *     default) against none, in the same run: two servers, paired rounds alternating which goes
 *     first, the median of the rounds' ratios (target >= 95 %); what the six sent and failed;
 *  2. at about 10,000 evaluations a second (wrk paced by a delay per request): evaluation ->
 *     arrival at the receiver, p50 and p99, for the vendors whose events carry the evaluation's
 *     time (Mixpanel, Amplitude, Segment; target p99 < 2 s), and what each integration sent and
 *     dropped or failed at that rate;
 *  3. change -> arrival: a state PUT's start to its event at the receiver, p50 and p99 per
 *     vendor (target p99 < 200 ms).
 * The receiver plays the six vendors' endpoints (one local server, in this process): in 1 it
 * reads each body and answers; in 2 and 3 it also parses them to time what arrives.
 * Servers on CPU 0 (every thread, the integrations thread included), wrk and this process on
 * CPU 1.
 * Usage: scripts/bench/integrations [--binary PATH] [--rounds N] [--seconds N]
 */
import { join } from "node:path";
import { apiClient } from "../lib/api";
import { benchBinary, benchWorkspace, flagKey, flaggedServer, type FlaggedServer } from "../lib/binary";
import { ensureWrk, pairedRounds, percentile, pinServer, runWrk, type WrkResult } from "../lib/wrk";
import { argOf } from "../lib/proc";

const ROUNDS = Number(argOf("--rounds") ?? 4);
const SECONDS = Number(argOf("--seconds") ?? 8);
const FLAGS = 100;
const ADMIN_KEY = `svc_admin_${"i".repeat(40)}`;
ensureWrk();

const api = apiClient(ADMIN_KEY);
const binary = benchBinary(argOf("--binary"), "integrations");
const { dir, live } = benchWorkspace("integrations");

// ---- the receiver: six vendors on one port ----------------------------------------------------
let timing = false;
/** Evaluation -> arrival, ms, per vendor (phase 2). */
const evalLatency: Record<string, number[]> = { mixpanel: [], amplitude: [], segment: [] };
/** Flag key -> arrival (performance.now()) per vendor (phase 3). */
const changeArrivals: Record<string, Map<string, number>> = { mixpanel: new Map(), amplitude: new Map(), segment: new Map(), datadog: new Map(), slack: new Map() };
const EXPOSURES = new Set(["$experiment_started", "$exposure", "Experiment Viewed"]);

function timeArrival(path: string, body: any): void {
  const now = Date.now();
  const at = performance.now();
  const change = (vendor: string, key: unknown) => typeof key === "string" && !changeArrivals[vendor]!.has(key) && changeArrivals[vendor]!.set(key, at);
  if (path === "/import") {
    for (const e of body) EXPOSURES.has(e.event) ? evalLatency.mixpanel!.push(now - e.properties.time) : change("mixpanel", e.properties.flag_key);
  } else if (path === "/2/httpapi") {
    for (const e of body.events) EXPOSURES.has(e.event_type) ? evalLatency.amplitude!.push(now - e.time) : change("amplitude", e.event_properties?.flag_key);
  } else if (path === "/v1/batch") {
    for (const m of body.batch) {
      if (m.type !== "track") continue;
      EXPOSURES.has(m.event) ? evalLatency.segment!.push(now - Date.parse(m.timestamp)) : change("segment", m.properties?.flag_key);
    }
  } else if (path === "/api/v2/events") change("datadog", body.data.attributes.attributes.changed_resource.name);
  else if (path.startsWith("/services/")) change("slack", /flag \*([^*]+)\*/.exec(body.text)?.[1]);
}

const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    if (timing) timeArrival(path, JSON.parse(text));
    if (path === "/import") return Response.json({ code: 200, status: "OK" });
    if (path === "/2/httpapi") return Response.json({ code: 200 });
    if (path === "/v1/batch") return Response.json({ success: true });
    if (path === "/users/track") return Response.json({ message: "success" }, { status: 201 });
    if (path.startsWith("/api/v2/")) return Response.json({ errors: [] }, { status: 202 });
    return new Response("ok");
  },
});
const host = `http://127.0.0.1:${receiver.port}`;
const INTEGRATIONS: [string, Record<string, unknown>][] = [
  ["mixpanel", { projectToken: "bench-token", apiHost: host }],
  ["amplitude", { apiKey: "bench-key", apiHost: host }],
  ["segment", { writeKey: "bench-key", apiHost: host }],
  ["braze", { apiKey: "bench-key", apiHost: host }],
  ["datadog", { apiKey: "bench-key", apiHost: host }],
  ["slack", { webhookUrl: `${host}/services/T0000/B0000/bench` }],
];

type Server = FlaggedServer;

async function server(name: string, withIntegrations: boolean): Promise<Server> {
  const s = await flaggedServer({ binary, dataDir: join(dir, name), adminKey: ADMIN_KEY, flags: FLAGS, live, env: { SVC_EDITION: "pro" } });
  if (withIntegrations) for (const [type, config] of INTEGRATIONS) await api(s.base, "POST", "/v1/projects/default/integrations", { type, config });
  return s;
}

async function stats(s: Server): Promise<Record<string, { sent: number; failed: number; lastError: string | null }>> {
  const { integrations } = await api(s.base, "GET", "/v1/projects/default/integrations");
  return Object.fromEntries(integrations.map((i: { type: string; stats: { sent: number; failed: number; lastError: string | null } }) => [i.type, i.stats]));
}
const statsDelta = (before: Awaited<ReturnType<typeof stats>>, after: Awaited<ReturnType<typeof stats>>) =>
  Object.keys(after)
    .map((t) => `${t} sent ${after[t]!.sent - (before[t]?.sent ?? 0)}, failed ${after[t]!.failed - (before[t]?.failed ?? 0)}`)
    .join("; ");

let cpu: number | undefined;
let userNo = 0;
async function evaluate(s: Server, seconds: number, delayMs?: number): Promise<WrkResult> {
  // A new user per run: Braze's attributes are per user, and a run is not all one user.
  const body = JSON.stringify({ flagKey: flagKey(50), context: { userId: `user-${++userNo}`, plan: "pro" } });
  const r = await runWrk({ url: `${s.base}/v1/evaluate`, seconds, cpu, method: "POST", body, headers: { authorization: `Bearer ${s.evalKey}` }, connections: delayMs === undefined ? 50 : 18, delayMs });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} evaluations were not 2xx`);
  return r;
}
const fmt = (r: WrkResult) => `${Math.round(r.rps).toString().padStart(6)} req/s   p99 ${r.p99Ms.toFixed(2)} ms`;
const p = (xs: number[]) => (xs.length === 0 ? "none arrived" : `p50 ${percentile(xs, 50).toFixed(0)} ms, p99 ${percentile(xs, 99).toFixed(0)} ms (${xs.length} events)`);

const none = await server("none", false);
const six = await server("six", true);
for (const s of [none, six]) cpu = pinServer(s.pid);
if (cpu !== undefined) Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
console.log(`binary: ${binary}; ${FLAGS} flags; ${cpu === undefined ? "one CPU shared" : `servers on CPU 0 (all threads), wrk, the receiver and this process on CPU ${cpu}`}`);

// ---- 1: throughput, six integrations against none --------------------------------------------
await evaluate(none, 2);
await evaluate(six, 2);
await Bun.sleep(3000);
await throughput("every server thread on CPU 0 (a one-core server: the integrations thread shares the request core, at SCHED_IDLE)");
// Not run as with plugins (the request thread alone on CPU 0, the other threads beside wrk): on
// two vCPUs the receiver, which plays six vendors, shares wrk's CPU, and its work slows the load
// generator in the integrations' rounds only, so that figure measured the bench, not the server.

async function throughput(where: string): Promise<void> {
  const before = await stats(six);
  const { a, b, ratio } = await pairedRounds(ROUNDS, () => evaluate(none, SECONDS), () => evaluate(six, SECONDS));
  console.log(`${where}:`);
  for (let r = 0; r < ROUNDS; r++) console.log(`  round ${r + 1}: none ${fmt(a[r]!)}   six integrations ${fmt(b[r]!)}   ${((b[r]!.rps / a[r]!.rps) * 100).toFixed(1)} %`);
  console.log(`  evaluation with six integrations (trackEvaluations on): ${(ratio * 100).toFixed(1)} % of none (median of ${ROUNDS} rounds; target >= 95 %)`);
  await Bun.sleep(5000);
  const evaluated = b.reduce((n, r) => n + r.requests, 0);
  console.log(`  ${evaluated} evaluations on the six's server; the six then: ${statsDelta(before, await stats(six))}`);
}

// ---- 2: about 10,000 evaluations a second: evaluation -> arrival, drops -----------------------
{
  await Bun.sleep(3000);
  const before = await stats(six);
  timing = true;
  const r = await evaluate(six, SECONDS, 1);
  await Bun.sleep(4000);
  timing = false;
  console.log(`paced load: ${Math.round(r.rps)} evaluations/s for ${SECONDS} s (${r.requests} in all; wrk paced, 18 connections, 1 ms apart), evaluation p99 ${r.p99Ms.toFixed(2)} ms`);
  for (const [vendor, xs] of Object.entries(evalLatency)) console.log(`  evaluation -> arrival, ${vendor}: ${p(xs)} (target p99 < 2000)`);
  console.log(`  what each integration did: ${statsDelta(before, await stats(six))}`);
}

// ---- 3: change -> arrival ---------------------------------------------------------------------
{
  timing = true;
  const started = new Map<string, number>();
  for (let i = 0; i < FLAGS; i++) {
    const key = flagKey(i);
    started.set(key, performance.now());
    await api(six.base, "PUT", `/v1/projects/default/flags/${key}/states/production`, { enabled: false });
    const deadline = performance.now() + 5000;
    while (Object.values(changeArrivals).some((m) => !m.has(key)) && performance.now() < deadline) await Bun.sleep(1);
    await Bun.sleep(10);
  }
  timing = false;
  for (const [vendor, arrivals] of Object.entries(changeArrivals)) {
    const xs = [...started].filter(([k]) => arrivals.has(k)).map(([k, t]) => arrivals.get(k)! - t);
    console.log(`change -> arrival, ${vendor}: ${p(xs)} of ${FLAGS} changes (target p99 < 200)`);
  }
}

receiver.stop(true);
process.exit(0);
