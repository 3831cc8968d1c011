/**
 * The OFREP change stream at scale (issue 30), through the compiled binary over HTTPS on
 * 127.0.0.1, with 1,000 streams held open by a few client processes (streams-client.ts):
 *  1. change → arrival: a state PUT toggles a flag of the streams' environment, and every
 *     stream's message is timed from just before the PUT was sent to its arrival in the client
 *     (≥ 100 changes, one at a time, each once all 1,000 had it); p50, p99 and max over every
 *     arrival, and the p99 of each change's last arrival (target p99 < 100 ms);
 *  2. the server's RSS per stream: (RSS with 1,000 streams − RSS with none) / 1,000;
 *  3. POST /v1/evaluate throughput (wrk, 50 connections) with the 1,000 streams open against
 *     none, in paired rounds alternating which goes first; the figure is the median of the
 *     rounds' ratios (target ≥ 95 %).
 * The token in the streams' URL is made as the server makes it, from the SVC_JWT_SECRET it is
 * started with (scripts/lib/streams.ts). Nothing is pinned: the server, wrk and the clients
 * share the machine's cores.
 * Usage: scripts/bench/streams [--binary PATH] [--streams N] [--clients N] [--changes N] [--rounds N] [--seconds N]
 */
import { join } from "node:path";
import type { Subprocess } from "bun";
import { apiClient } from "../lib/api";
import { benchBinary, benchWorkspace, flagKey, flaggedServer, rssMb } from "../lib/binary";
import { argOf, drain } from "../lib/proc";
import { eventsPath } from "../lib/streams";
import { ensureWrk, pairedRounds, percentile, runWrk, type WrkResult } from "../lib/wrk";

const STREAMS = Number(argOf("--streams") ?? 1000);
const CLIENTS = Number(argOf("--clients") ?? 4);
const CHANGES = Number(argOf("--changes") ?? 120);
const ROUNDS = Number(argOf("--rounds") ?? 4);
const SECONDS = Number(argOf("--seconds") ?? 10);
const FLAGS = 100;
const ADMIN_KEY = `svc_admin_${"s".repeat(40)}`;
const JWT_SECRET = "bench-streams-jwt-secret-0123456789abcdef";
ensureWrk();

const api = apiClient(ADMIN_KEY);
const binary = benchBinary(argOf("--binary"), "streams");
const { dir, live } = benchWorkspace("streams");
const now = () => performance.timeOrigin + performance.now();

const server = await flaggedServer({ binary, dataDir: join(dir, "server"), adminKey: ADMIN_KEY, flags: FLAGS, live, env: { SVC_JWT_SECRET: JWT_SECRET } });
const made = await api(server.base, "POST", "/v1/projects/default/api-keys", { name: "streams", scope: "eval", environment: "production" });
const project = await api(server.base, "GET", "/v1/projects/default");
const url = `${server.base}${eventsPath(JWT_SECRET, { id: made.id, secret: made.key, projectId: project.id, environmentId: project.environments.find((e: { slug: string }) => e.slug === "production").id })}`;

// ---- the clients ---------------------------------------------------------------------------------
/** Arrivals by message id: each client's arrival times. */
const arrivals = new Map<number, number[]>();
let clients: Subprocess[] = [];
let ended = 0;

async function connectAll(): Promise<void> {
  const per = Math.ceil(STREAMS / CLIENTS);
  let ready = 0;
  clients = Array.from({ length: CLIENTS }, (_, i) => {
    const count = Math.min(per, STREAMS - i * per);
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "streams-client.ts"), "--url", url, "--count", String(count)], {
      stdout: "pipe",
      stderr: "inherit",
    });
    live.add(proc);
    let partial = "";
    void drain(proc.stdout, (text) => {
      const lines = (partial + text).split("\n");
      partial = lines.pop()!;
      for (const line of lines) {
        const [kind, a, b] = line.split(" ");
        if (kind === "ready") ready += Number(a);
        else if (kind === "ended") ended++;
        else if (kind === "m") {
          const id = Number(a);
          let times = arrivals.get(id);
          if (times === undefined) arrivals.set(id, (times = []));
          times.push(Number(b));
        }
      }
    });
    return proc;
  });
  const deadline = Date.now() + 60_000;
  while (ready < STREAMS) {
    if (Date.now() > deadline) throw new Error(`only ${ready} of ${STREAMS} streams connected`);
    await Bun.sleep(20);
  }
}

async function disconnectAll(): Promise<void> {
  for (const c of clients) {
    c.kill("SIGKILL");
    await c.exited;
    live.delete(c);
  }
  clients = [];
  await Bun.sleep(500); // the server notices the closed connections
}

// ---- load ------------------------------------------------------------------------------------------
const body = JSON.stringify({ flagKey: flagKey(50), context: { userId: "user-4711", plan: "pro" } });
async function load(seconds: number): Promise<WrkResult> {
  const r = await runWrk({ url: `${server.base}/v1/evaluate`, seconds, method: "POST", body, headers: { authorization: `Bearer ${server.evalKey}` } });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} evaluations were not 2xx`);
  return r;
}

const fmt = (r: WrkResult) => `${Math.round(r.rps).toString().padStart(6)} req/s   p99 ${r.p99Ms.toFixed(2)} ms`;
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const ms = (x: number) => `${x.toFixed(1)} ms`;

console.log(`binary: ${binary}; ${FLAGS} flags; ${STREAMS} OFREP streams from ${CLIENTS} client processes; nothing pinned (${navigator.hardwareConcurrency} CPUs shared by the server, the clients and wrk)`);
await load(2);
await Bun.sleep(3_000);
const rssNone = rssMb(server.pid);

// ---- 2: memory ---------------------------------------------------------------------------------------
const connecting = performance.now();
await connectAll();
const connectSeconds = (performance.now() - connecting) / 1000;
await Bun.sleep(3_000);
const rssOpen = rssMb(server.pid);
console.log(`connected ${STREAMS} streams in ${connectSeconds.toFixed(1)} s`);
console.log(`RSS: ${rssNone.toFixed(1)} MB with no stream, ${rssOpen.toFixed(1)} MB with ${STREAMS}: ${(((rssOpen - rssNone) * 1024) / STREAMS).toFixed(1)} KB a stream`);

// ---- 1: change → arrival ---------------------------------------------------------------------------
const latencies: number[] = [];
const lastArrivals: number[] = [];
let missing = 0;
let enabled = true;
for (let change = 0; change < CHANGES; change++) {
  enabled = !enabled;
  const before = new Set(arrivals.keys());
  const sent = now();
  await api(server.base, "PUT", `/v1/projects/default/flags/${flagKey(0)}/states/production`, { enabled, rolloutPercentage: 50 });
  const deadline = Date.now() + 5_000;
  let id: number | undefined;
  for (;;) {
    id ??= [...arrivals.keys()].find((k) => !before.has(k));
    if (id !== undefined && arrivals.get(id)!.length >= STREAMS) break;
    if (Date.now() > deadline) break;
    await Bun.sleep(2);
  }
  const times = id === undefined ? [] : arrivals.get(id)!;
  missing += STREAMS - times.length;
  for (const t of times) latencies.push(t - sent);
  if (times.length > 0) lastArrivals.push(Math.max(...times) - sent);
  await Bun.sleep(20);
}
console.log(`change → arrival (a state PUT sent → the message read by the client), ${CHANGES} changes × ${STREAMS} streams:`);
console.log(
  `  every arrival: p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, max ${ms(Math.max(...latencies))} (target p99 < 100 ms); the last stream of each change: p50 ${ms(percentile(lastArrivals, 50))}, p99 ${ms(percentile(lastArrivals, 99))}; missing ${missing}, streams ended ${ended}`,
);

// ---- 3: evaluation with the streams open, against none ---------------------------------------------
const none = async () => {
  if (clients.length > 0) await disconnectAll();
  return load(SECONDS);
};
const open = async () => {
  if (clients.length === 0) {
    await connectAll();
    await Bun.sleep(2_000);
  }
  return load(SECONDS);
};
const { a, b, ratio } = await pairedRounds(ROUNDS, none, open);
console.log(`evaluation (POST /v1/evaluate), 50 connections, ${ROUNDS} paired rounds of ${SECONDS} s:`);
for (let r = 0; r < ROUNDS; r++) console.log(`  round ${r + 1}: none ${fmt(a[r]!)}   ${STREAMS} streams ${fmt(b[r]!)}   ${pct(b[r]!.rps / a[r]!.rps)}`);
console.log(`  with ${STREAMS} streams open: ${pct(ratio)} of the throughput with none (median of the rounds' ratios; target >= 95 %)`);
await disconnectAll();
process.exit(0);
