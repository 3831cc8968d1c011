/**
 * Plugins through the compiled binary (issue 22), each figure printed:
 *  1. evaluation throughput with 10 active plugins subscribed to onEvaluations against none, in
 *     the same run (two servers, rounds alternating which goes first; the figure is the median
 *     of the rounds' ratios), and how many records were dropped at that load (target: >= 95 %);
 *  2. change -> onEvent latency: a state PUT's start to the plugin's ctx.http arriving at a local
 *     receiver, p50 and p99 (target p99 < 100 ms);
 *  3. activation time per plugin (install answered -> status active, polled every 2 ms);
 *  4. RSS per active plugin (server RSS with 10 active plugins against none; target < 5 MB);
 *  5. a memory bomb on an idle server (64 MiB cap), then evaluation beside a plugin that runs a
 *     slow memory bomb (about 2 MB every 100 ms, for seconds, to the cap): the server's peak RSS
 *     against its base, and evaluation p99 against alone (targets: base + the cap; p99 within 10 %);
 *  6. the request thread's CPU per evaluation record with 10 readers (in this process, the real
 *     record stream and host: a figure the VM's noise does not blur).
 * The plugins are a counter (onEvaluations adds the batch's length), a forwarder (onEvent posts
 * the event to the receiver) and two bombs (activate fills arrays until the cap ends it: at once,
 * or slowly, between requests).
 * Servers on CPU 0 (every thread, plugin workers included), wrk and this process on CPU 1; the
 * throughput comparison is run again with the request thread alone on CPU 0.
 * Usage: scripts/bench/plugins [--binary PATH] [--rounds N] [--seconds N]
 */
import { LeaseKeeper, newNodeId } from "../../src/modules/leases/keeper";
import { SqliteLeaseStore } from "../../src/modules/leases/store";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { systemClock } from "../../src/lib/clock";
import { createLogger } from "../../src/lib/log";
import { EvaluationRecords } from "../../src/modules/evaluation/records";
import { PluginHost } from "../../src/plugins/host";
import { SqliteRuntimeStore } from "../../src/plugins/runtime-store";
import { DEFAULT_LIMITS } from "../../src/plugins/sandbox";
import { apiClient } from "../lib/api";
import { benchBinary, benchWorkspace, flagKey, flaggedServer, rssMb, type FlaggedServer } from "../lib/binary";
import { ensureWrk, median, pairedRounds, percentile, pinRequestThread, pinServer, runWrk, type WrkResult } from "../lib/wrk";
import { argOf } from "../lib/proc";

const ROUNDS = Number(argOf("--rounds") ?? 4);
const SECONDS = Number(argOf("--seconds") ?? 8);
const PLUGINS = 10;
const FLAGS = 100;
const ADMIN_KEY = `svc_admin_${"p".repeat(40)}`;
ensureWrk();

const api = apiClient(ADMIN_KEY);
const binary = benchBinary(argOf("--binary"), "plugins");
const { dir, live } = benchWorkspace("plugins");

const PACKAGES: Record<string, { hooks: string[]; source: string }> = {
  counter: { hooks: ["onEvaluations"], source: "let seen = 0;\nexport function onEvaluations(batch) { seen += batch.length; }" },
  forwarder: {
    hooks: ["onEvent"],
    source: `export async function onEvent(event, ctx) { await ctx.http({ method: "POST", url: ctx.config.url, body: JSON.stringify({ key: event.data.flagKey, at: event.timestamp }) }); }`,
  },
  bomb: { hooks: ["activate"], source: "export function activate() { const a = []; for (;;) a.push(new Array(100000).fill(1)); }" },
  // A bomb that keeps going for seconds: about 2 MB more after each answer of a receiver that takes 100 ms.
  "slow-bomb": {
    hooks: ["activate"],
    source: `export async function activate(ctx) { const a = []; for (let i = 0; ; i++) { for (let j = 0; j < 8; j++) a.push(new Array(32768).fill(i)); await ctx.http({ method: "GET", url: ctx.config.url }); } }`,
  },
};

function dropPackages(dataDir: string): void {
  for (const [name, { hooks, source }] of Object.entries(PACKAGES)) {
    const folder = join(dataDir, "marketplace", name);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "index.js"), source);
    const configSchema = { type: "object", properties: { url: { type: "string" } }, additionalProperties: false };
    const manifest = { packageName: `@bench/${name}`, name, description: `bench ${name}`, category: "monitoring", version: "1.0.0", author: "bench", entry: "index.js", hooks, configSchema, publishedAt: "2026-11-26T00:00:00.000Z" };
    writeFileSync(join(folder, "plugin.json"), JSON.stringify(manifest));
  }
}

type Server = FlaggedServer;

async function server(name: string): Promise<Server> {
  const dataDir = join(dir, name);
  dropPackages(dataDir);
  return flaggedServer({ binary, dataDir, adminKey: ADMIN_KEY, flags: FLAGS, live });
}

const status = (s: Server, id: string) => api(s.base, "GET", `/v1/projects/default/plugins/${id}/status`);

async function install(s: Server, name: string, config: Record<string, unknown> = {}): Promise<{ id: string; ms: number }> {
  const t0 = performance.now();
  const { id } = await api(s.base, "POST", "/v1/projects/default/plugins", { packageName: `@bench/${name}`, config });
  for (;;) {
    const st = await status(s, id);
    if (st.status !== "installing") {
      if (st.status !== "active") throw new Error(`${name}: ${st.status} ${st.errorMessage}`);
      return { id, ms: performance.now() - t0 };
    }
    await Bun.sleep(2);
  }
}

async function evaluate(s: Server, seconds: number): Promise<WrkResult> {
  const body = JSON.stringify({ flagKey: flagKey(50), context: { userId: "user-4711", plan: "pro" } });
  const r = await runWrk({ url: `${s.base}/v1/evaluate`, seconds, cpu, method: "POST", body, headers: { authorization: `Bearer ${s.evalKey}` } });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} evaluations were not 2xx`);
  return r;
}

const fmt = (r: WrkResult) => `${Math.round(r.rps).toString().padStart(6)} req/s   p99 ${r.p99Ms.toFixed(2)} ms`;

const none = await server("none");
const ten = await server("ten");
let cpu: number | undefined;
for (const s of [none, ten]) cpu = pinServer(s.pid);
if (cpu !== undefined) Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
console.log(`binary: ${binary}; ${FLAGS} flags; ${cpu === undefined ? "one CPU shared" : `servers on CPU 0, wrk and this process on CPU ${cpu}`}`);

// ---- 3 and 4: activation time, RSS per active plugin ----------------------------------------
await Bun.sleep(1000);
Bun.spawnSync(["sync"]);
const rssBefore = rssMb(ten.pid);
const activation: number[] = [];
const counters: string[] = [];
for (let i = 0; i < PLUGINS; i++) {
  const { id, ms } = await install(ten, "counter");
  counters.push(id);
  activation.push(ms);
}
await Bun.sleep(2000);
const rssAfter = rssMb(ten.pid);
console.log(`activation per plugin (install -> active): median ${median(activation).toFixed(1)} ms, max ${Math.max(...activation).toFixed(1)} ms over ${PLUGINS}`);
console.log(`RSS: ${rssBefore.toFixed(1)} MB with none, ${rssAfter.toFixed(1)} MB with ${PLUGINS} active: ${((rssAfter - rssBefore) / PLUGINS).toFixed(2)} MB per plugin (target < 5)`);

// ---- 1: evaluation with 10 onEvaluations plugins against none --------------------------------
await evaluate(none, 2);
await evaluate(ten, 2);
await throughput(`every server thread on CPU 0 (a one-core server: plugins share the request core)`);
// Then as on a machine with a core to spare: the request thread alone on CPU 0, the server's other
// threads (the plugin workers, the background thread) on CPU 1 beside wrk.
if (cpu !== undefined && [none, ten].every((s) => pinRequestThread(s.pid, cpu!))) await throughput(`the request thread alone on CPU 0, the other threads with wrk on CPU ${cpu}`);

async function throughput(where: string): Promise<void> {
  const droppedBefore = await droppedTotal();
  const { a, b, ratio } = await pairedRounds(ROUNDS, () => evaluate(none, SECONDS), () => evaluate(ten, SECONDS));
  console.log(`${where}:`);
  for (let r = 0; r < ROUNDS; r++) console.log(`  round ${r + 1}: none ${fmt(a[r]!)}   ${PLUGINS} plugins ${fmt(b[r]!)}   ${((b[r]!.rps / a[r]!.rps) * 100).toFixed(1)} %`);
  await Bun.sleep(6000); // the last batches, and the drop counters' flush (every 5 s)
  const dropped = (await droppedTotal()) - droppedBefore;
  const evaluated = b.reduce((n, r) => n + r.rps * SECONDS, 0);
  console.log(`  evaluation with ${PLUGINS} plugins on onEvaluations: ${(ratio * 100).toFixed(1)} % of none (median of ${ROUNDS} rounds; target >= 95 %)`);
  console.log(`  records dropped at that load: ${Math.round(dropped)} of ${Math.round(evaluated * PLUGINS)} handed to ${PLUGINS} plugins (${((dropped / (evaluated * PLUGINS)) * 100).toFixed(1)} %)`);
}

async function droppedTotal(): Promise<number> {
  let n = 0;
  for (const id of counters) n += (await status(ten, id)).stats.evaluationsDropped;
  return n;
}

// ---- 2: change -> onEvent ---------------------------------------------------------------------
const arrived = new Map<string, number>();
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const { key } = (await req.json()) as { key: string };
    arrived.set(key, performance.now());
    return new Response("ok");
  },
});
await install(none, "forwarder", { url: `http://127.0.0.1:${receiver.port}/` });
const started = new Map<string, number>();
const latencies: number[] = [];
// Every flag starts enabled: the first pass turns each off, the second on again (each PUT a change).
for (let i = 0; i < 2 * FLAGS; i++) {
  const key = flagKey(i % FLAGS);
  arrived.delete(key);
  started.set(key, performance.now());
  await api(none.base, "PUT", `/v1/projects/default/flags/${key}/states/production`, { enabled: Math.floor(i / FLAGS) % 2 === 1 });
  const deadline = performance.now() + 5000;
  while (!arrived.has(key) && performance.now() < deadline) await Bun.sleep(1);
  if (!arrived.has(key)) throw new Error(`no onEvent for ${key} within 5 s`);
  latencies.push(arrived.get(key)! - started.get(key)!);
  await Bun.sleep(20);
}
receiver.stop(true);
console.log(`change -> onEvent (PUT started -> plugin's request arrived), ${latencies.length} changes: p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms (target p99 < 100)`);

// ---- 5: a memory bomb beside evaluation ------------------------------------------------------
for (const id of counters) await api(ten.base, "PATCH", `/v1/projects/default/plugins/${id}`, { enabled: false });
await Bun.sleep(1500);
// One bomb on an idle server, to its death at the cap.
{
  const base = rssMb(ten.pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(ten.pid))), 10);
  const t0 = performance.now();
  const { id } = await api(ten.base, "POST", "/v1/projects/default/plugins", { packageName: "@bench/bomb", config: {} });
  let st = await status(ten, id);
  while (st.status === "installing") st = await status(ten, (await Bun.sleep(10), id));
  clearInterval(sampler);
  console.log(`memory bomb on an idle server: ${st.status} after ${(performance.now() - t0).toFixed(0)} ms (${st.errorMessage}); RSS base ${base.toFixed(0)} MB, peak ${peak.toFixed(0)} MB (+${(peak - base).toFixed(0)} MB; target <= +64)`);
  await api(ten.base, "DELETE", `/v1/projects/default/plugins/${id}`);
  await Bun.sleep(1000);
}
// Then evaluation beside a plugin running a slow bomb (enabled again each time the cap ends it),
// against evaluation alone, in paired rounds. Its worker is put beside wrk (the request thread keeps
// CPU 0 to itself), so that it really runs while evaluation is loaded.
const slow = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async () => (await Bun.sleep(100), new Response("ok")) });
const base = rssMb(ten.pid);
const { id: bomb } = await api(ten.base, "POST", "/v1/projects/default/plugins", { packageName: "@bench/slow-bomb", config: { url: `http://127.0.0.1:${slow.port}/` } });
await api(ten.base, "PATCH", `/v1/projects/default/plugins/${bomb}`, { enabled: false });
let bombs = 0;
let lastError = "";
let peak = base;
async function besideBomb(): Promise<WrkResult> {
  let bombing = true;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(ten.pid))), 20);
  const beside = async () => {
    await api(ten.base, "PATCH", `/v1/projects/default/plugins/${bomb}`, { enabled: true });
    await Bun.sleep(20); // its worker has started (on the request thread's CPU, as threads it starts do)
    if (cpu !== undefined) pinRequestThread(ten.pid, cpu);
  };
  const rebomb = (async () => {
    await beside();
    while (bombing) {
      const st = await status(ten, bomb);
      if (st.status === "error") {
        bombs++;
        lastError = st.errorMessage;
        await beside();
      }
      await Bun.sleep(50);
    }
    await api(ten.base, "PATCH", `/v1/projects/default/plugins/${bomb}`, { enabled: false });
  })();
  const result = await evaluate(ten, SECONDS);
  bombing = false;
  await rebomb;
  clearInterval(sampler);
  return result;
}
const paired = await pairedRounds(ROUNDS, () => evaluate(ten, SECONDS), besideBomb);
slow.stop(true);
const p99Ratio = median(paired.b.map((r, i) => r.p99Ms / paired.a[i]!.p99Ms));
console.log(`a slow memory bomb beside evaluation, ${ROUNDS} paired rounds: it reached the cap ${bombs} times (${lastError}); server RSS base ${base.toFixed(0)} MB, peak ${peak.toFixed(0)} MB (+${(peak - base).toFixed(0)} MB; target <= +64)`);
console.log(`  evaluation p99 beside it: ${((p99Ratio - 1) * 100).toFixed(1)} % against alone (median of the rounds' ratios; target within 10 %); throughput ${(paired.ratio * 100).toFixed(1)} %`);

// ---- 6: what the record stream costs the request thread, in this process ---------------------
// The real stream and host (10 counters in their workers) over a scratch database: CPU time of
// this thread per record added, with 10 readers against none (one map lookup, nothing added).
{
  const store = openDatabase(join(dir, "stream.db"));
  migrate(store.sqlite);
  const at = new Date().toISOString();
  store.sqlite.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('p', 'p', 'p', ?, ?)", [at, at]);
  const runtime = new SqliteRuntimeStore(store.sqlite);
  const records = new EvaluationRecords();
  const log = createLogger({ level: "warn", format: "json", write: () => {} });
  const leases = new LeaseKeeper({ store: new SqliteLeaseStore(store.sqlite), node: newNodeId(), log });
  const host = new PluginHost({ store: runtime, records, log, clock: systemClock, limits: DEFAULT_LIMITS, outboundAllowedHosts: ["external"], leases });
  const result = { flagKey: "flag-0001", enabled: true, variant: null, reason: "PERCENTAGE_ROLLOUT" as const, ruleId: null, evaluatedAt: at };
  const cpuUs = () => ((u) => u.user + u.system)((process as unknown as { threadCpuUsage(): NodeJS.CpuUsage }).threadCpuUsage());
  const feed = async (project: string) => {
    const t0 = cpuUs();
    for (let n = 0; n < 400; n++) {
      for (let i = 0; i < 500; i++) if (records.wants(project)) records.add(project, "production", result, "user-4711");
      await Bun.sleep(1); // the messages to and from the workers are handled meanwhile, as in the server
    }
    return (cpuUs() - t0) / 200_000;
  };
  const baseline = await feed("nobody");
  for (let i = 0; i < PLUGINS; i++) {
    const id = `plugin_${i}`;
    store.sqlite.run("INSERT INTO plugins (id, project_id, package_name, version, enabled, status, config, installed_at, updated_at) VALUES (?, 'p', '@bench/counter', '1.0.0', 1, 'installing', '{}', ?, ?)", [id, at, at]);
    host.start({ id, projectId: "p", projectSlug: "p", packageName: "@bench/counter", version: "1.0.0", source: PACKAGES.counter!.source, config: {}, secrets: [] });
  }
  while ((store.sqlite.query("SELECT count(*) AS n FROM plugins WHERE status = 'active'").get() as { n: number }).n < PLUGINS) await Bun.sleep(10);
  const withReaders = await feed("p");
  console.log(`request-thread CPU per evaluation record: ${(withReaders - baseline).toFixed(2)} µs with ${PLUGINS} plugins reading (add, batch JSON, hand-over, answers), against ${baseline.toFixed(2)} µs of this loop alone`);
  host.close();
  records.stop();
  store.sqlite.close();
}

process.exit(0);
