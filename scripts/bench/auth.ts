/**
 * Cost of authentication, rate limiting and authorization per request.
 * Two HTTPS servers built from the same blocks (pipeline, one trivial route, the same kind of
 * TLS certificate): "guarded" resolves an eval key, counts it against the rate limiter and
 * checks the route's access group; "bare" skips all three. Each is its own process, and both
 * run at the same time on one core (CPU 0), each driven by its own wrk (on CPU 1) with the same
 * request: the kernel shares the core evenly between the two busy servers, so their throughputs
 * compare their costs per request, and whatever the VM's neighbours do meanwhile slows both
 * alike. (Run one after the other, rounds on this shared VM differed by up to 40 % and whole
 * runs by several points; side by side, rounds agree within about 2 %.)
 * Each launch starts both servers afresh (JIT and heap layout differ a little between launches),
 * warms them up, then runs `rounds` rounds; the figure is the median of all rounds' ratios.
 * Which variant is started, pinned and loaded first alternates by launch (the second one gains
 * about a point), so an even number of launches weighs both orders alike. Each server's CPU time
 * is read too: the kernel's shares are even over a run but not within a round (±3 %), so the
 * ratio of requests per CPU second is printed alongside.
 * Target: the guarded route keeps at least 90 % of the bare route's throughput.
 * First, in this process, it counts the objects each variant's request leaves to the garbage
 * collector, and prints what the guard adds (see `allocations`).
 * Usage: bun scripts/bench/auth.ts [--launches N] [--rounds N per launch] [--seconds N]
 * With `--login`, it measures instead valid logins while another address hammers the login
 * route, before and after (auth-login.ts).
 */
import { RequestCounts } from "../../src/http/request-counts";
import { rmSync } from "node:fs";
import { heapStats } from "bun:jsc";
import { Elysia } from "elysia";
import { bootstrap } from "../../src/bootstrap";
import { loadConfig } from "../../src/config";
import { accessGuard, admitter, RATE_LIMIT_HEADERS } from "../../src/http/auth";
import { pipeline } from "../../src/http/pipeline";
import { createLogger } from "../../src/lib/log";
import { createContext } from "../../src/server";
import { loadTls } from "../../src/tls";
import { seedApiKey, tempDir } from "../../test/helpers";
import { cpuSeconds, ensureWrk, median, pinServer, runWrk } from "../lib/wrk";
import { loginBench } from "./auth-login";

type Variant = "bare" | "guarded";
const arg = (name: string) => process.argv[process.argv.indexOf(name) + 1];
const num = (name: string, fallback: number) => (process.argv.includes(name) ? Number(arg(name)) : fallback);

/** The parent: launches, rounds, figures. */
async function measure(launches: number, rounds: number, seconds: number): Promise<void> {
  ensureWrk();
  const ratios: number[] = [];
  const perCpuRatios: number[] = [];
  const rps = { bare: [] as number[], guarded: [] as number[] };
  const perLaunch: string[] = [];
  console.log(
    `${launches} launches of ${rounds} rounds: both servers at once on CPU 0, each driven by wrk -t1 -c50 -d${seconds}s on CPU 1, GET /bench with an eval key; the variant started first alternates by launch`,
  );
  for (let launch = 1; launch <= launches; launch++) {
    // The process started (pinned, loaded) second does about 1 % better than the first, the same
    // code against itself: each variant goes first in every other launch.
    const order = launch % 2 === 1 ? (["bare", "guarded"] as const) : (["guarded", "bare"] as const);
    const servers = await Promise.all(order.map(start));
    const [bare, guarded] = order[0] === "bare" ? (servers as [Server, Server]) : ([servers[1], servers[0]] as [Server, Server]);
    try {
      const cpu = servers.every((s) => pinServer(s.pid) !== undefined) ? 1 : undefined;
      const both = async (s: number) => {
        const [first, second] = await Promise.all(servers.map((srv) => load(srv, guarded.key, s, cpu)));
        return order[0] === "bare" ? [first!, second!] : [second!, first!];
      };
      await both(2); // warm-up, not counted: the JIT compiling the route in each fresh process
      const launchRatios: number[] = [];
      for (let round = 1; round <= rounds; round++) {
        const cpuBefore = [cpuSeconds(bare.pid), cpuSeconds(guarded.pid)];
        const [b, g] = await both(seconds);
        const [cpuB, cpuG] = [cpuSeconds(bare.pid) - cpuBefore[0]!, cpuSeconds(guarded.pid) - cpuBefore[1]!];
        const perCpu = (g!.rps / cpuG) / (b!.rps / cpuB);
        launchRatios.push(g!.rps / b!.rps);
        perCpuRatios.push(perCpu);
        rps.bare.push(b!.rps);
        rps.guarded.push(g!.rps);
        console.log(
          `  launch ${launch} round ${round}: bare ${fmt(b!.rps)} req/s (CPU ${cpuB.toFixed(2)} s), guarded ${fmt(g!.rps)} req/s (CPU ${cpuG.toFixed(2)} s): ${pct(g!.rps / b!.rps)}, per CPU second ${pct(perCpu)}`,
        );
      }
      ratios.push(...launchRatios);
      perLaunch.push(pct(median(launchRatios)));
    } finally {
      for (const s of servers) s.proc.kill();
      await Promise.all(servers.map((s) => s.proc.exited));
    }
  }
  const ratio = median(ratios);
  console.log(`bare     median ${fmt(median(rps.bare))} req/s (half a core)`);
  console.log(`guarded  median ${fmt(median(rps.guarded))} req/s (half a core)`);
  console.log(`guarded / bare by launch: ${perLaunch.join(", ")}`);
  console.log(`guarded / bare in requests per CPU second of each server (uneven shares of the core corrected): median ${pct(median(perCpuRatios))}`);
  console.log(
    `guarded / bare, median of all ${ratios.length} rounds' ratios = ${pct(ratio)} (cost ${((1 - ratio) * 100).toFixed(1)} %; target: cost under 10 %: ${ratio >= 0.9 ? "met" : "NOT met"})`,
  );
}

interface Server {
  proc: Bun.Subprocess<"ignore", "pipe", "inherit">;
  pid: number;
  port: number;
  key: string;
}

/** One server process (`--serve`); resolves once it listens. */
async function start(variant: Variant): Promise<Server> {
  const proc = Bun.spawn([process.execPath, import.meta.path, "--serve", variant], { stdin: "ignore", stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the ${variant} server exited before listening`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const { port, key } = JSON.parse(out.slice(0, out.indexOf("\n"))) as { port: number; key: string };
  return { proc, pid: proc.pid, port, key };
}

async function load(server: Server, key: string, seconds: number, cpu: number | undefined) {
  const r = await runWrk({ url: `https://127.0.0.1:${server.port}/bench`, seconds, cpu, headers: { authorization: `Bearer ${key}` } });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} non-2xx answers from port ${server.port}`);
  return r;
}

const fmt = (n: number) => Math.round(n).toString().padStart(6);
const pct = (r: number) => `${(r * 100).toFixed(1)} %`;

/** The state a variant's app runs on: a fresh data dir, database and eval key. */
async function setUp() {
  const dir = tempDir("flagsvc-bench-auth-");
  const config = loadConfig({ SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "warn", SVC_RATE_LIMITS: "eval:100000000" });
  const log = createLogger({ level: "warn", format: "json" });
  const ctx = await createContext(config, { log });
  await bootstrap(ctx);
  const key = (await seedApiKey(ctx, "eval")).secret;
  const tearDown = () => {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { config, log, ctx, key, tearDown };
}

/** The trivial route, with admission and the access guard or with neither (same pipeline). */
function appOf(variant: Variant, { ctx, log }: Pick<Awaited<ReturnType<typeof setUp>>, "ctx" | "log">) {
  const body = { ok: true };
  type Routes = readonly { method: string; path: string }[];
  const app = new Elysia({ normalize: false });
  return variant === "guarded"
    ? app
        .use(pipeline({ log, behindProxy: false, routes: (): Routes => app.routes, admit: admitter(ctx), admitHeaders: RATE_LIMIT_HEADERS, requests: new RequestCounts() }))
        .use(accessGuard())
        .get("/bench", () => body, { access: "evaluate" })
    : app
        .use(pipeline({ log, behindProxy: false, routes: (): Routes => app.routes, admit: () => undefined, admitHeaders: [], requests: new RequestCounts() }))
        .get("/bench", () => body);
}

/** A server process: one variant of the route; prints `{ port, key }` and serves until killed. */
async function serve(variant: Variant): Promise<void> {
  const state = await setUp();
  const { key } = state;
  const tls = await loadTls(state.config);
  const server = appOf(variant, state).listen({ hostname: "127.0.0.1", port: 0, reusePort: false, tls: { cert: tls.cert, key: tls.key } });
  const url = `https://127.0.0.1:${server.server!.port}/bench`;
  const tlsOff = { rejectUnauthorized: false };
  const ok = await fetch(url, { headers: { authorization: `Bearer ${key}` }, tls: tlsOff });
  if (ok.status !== 200) throw new Error(`the ${variant} route answered ${ok.status}`);
  if (variant === "guarded") {
    const refused = await fetch(url, { tls: tlsOff });
    if (refused.status !== 401) throw new Error(`the guarded route without a key answered ${refused.status}`);
  }
  const stop = () => {
    server.stop(true);
    state.tearDown();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  console.log(JSON.stringify({ port: server.server!.port, key }));
}

/**
 * Objects each request leaves to the garbage collector, by kind, in one process through
 * `app.handle` (the harness's own Request is counted for both variants alike): under load, each
 * costs more than its allocation (the collector's marking and sweeping, cache misses), so what
 * the guard adds here shows up in the throughput. Counted over batches of 10 requests during
 * which no collection ran (no count fell); the median of 30 such batches.
 */
async function allocations(): Promise<void> {
  const state = await setUp();
  const perRequest = async (variant: Variant) => {
    const app = appOf(variant, state).compile();
    const request = () => new Request("http://localhost/bench", { headers: { authorization: `Bearer ${state.key}` } });
    const batch = async () => {
      for (let i = 0; i < 10; i++) if ((await app.handle(request())).status !== 200) throw new Error(`the ${variant} route refused`);
    };
    for (let i = 0; i < 300; i++) await batch(); // warm-up: JIT, caches, the window's first count
    Bun.gc(true);
    const batches: Record<string, number>[] = [];
    for (let tries = 0; batches.length < 30 && tries < 1000; tries++) {
      const before = heapStats().objectTypeCounts as Record<string, number>;
      await batch();
      const after = heapStats().objectTypeCounts as Record<string, number>;
      const added: Record<string, number> = {};
      let clean = true;
      for (const kind of new Set([...Object.keys(before), ...Object.keys(after)])) {
        added[kind] = (after[kind] ?? 0) - (before[kind] ?? 0);
        if (added[kind] < 0) clean = false;
      }
      if (clean) batches.push(added);
    }
    const kinds = new Set(batches.flatMap(Object.keys));
    return Object.fromEntries([...kinds].map((kind) => [kind, median(batches.map((b) => b[kind] ?? 0)) / 10]));
  };
  const bare = await perRequest("bare");
  const guarded = await perRequest("guarded");
  state.tearDown();
  const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
  const added = Object.keys({ ...bare, ...guarded })
    .map((kind) => [kind, (guarded[kind] ?? 0) - (bare[kind] ?? 0)] as const)
    .filter(([, n]) => Math.abs(n) >= 0.5)
    .map(([kind, n]) => `${n > 0 ? "+" : ""}${n} ${kind}`);
  console.log(
    `objects left to the garbage collector per request (app.handle, one process): bare ${total(bare).toFixed(1)}, guarded ${total(guarded).toFixed(1)}; the guard adds: ${added.join(", ") || "none"}`,
  );
}

if (process.argv.includes("--serve")) await serve(arg("--serve") as Variant);
else if (process.argv.includes("--login")) await loginBench(process.argv);
else {
  await allocations();
  await measure(num("--launches", 6), num("--rounds", 4), num("--seconds", 4));
}
