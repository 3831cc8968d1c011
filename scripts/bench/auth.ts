/**
 * Cost of authentication, rate limiting and authorization per request.
 * Two HTTPS servers in one process, built from the same blocks (pipeline, one trivial route,
 * the same TLS certificate): "guarded" resolves an eval key, counts it against the rate limiter
 * and checks the route's access group; "bare" skips all three. wrk drives each in turn (which
 * goes first alternates by round), and the figures are compared within the process.
 * The process is launched several times (`--launches`): on this shared VM one launch's figure
 * is steady across its rounds but launches differ by several points (5.3 / 11.1 / 9.1 % seen in
 * a row), so the figure is the median over the rounds of all launches, each launch's shown.
 * Target: the guarded route keeps at least 90 % of the bare route's throughput.
 * Usage: bun scripts/bench/auth.ts [--launches N] [--rounds N per launch] [--seconds N]
 */
import { rmSync } from "node:fs";
import { Elysia } from "elysia";
import { bootstrap } from "../../src/bootstrap";
import { loadConfig } from "../../src/config";
import { accessGuard, admitter, RATE_LIMIT_HEADERS } from "../../src/http/auth";
import { pipeline } from "../../src/http/pipeline";
import { createLogger } from "../../src/lib/log";
import { createContext } from "../../src/server";
import { loadTls } from "../../src/tls";
import { seedApiKey, tempDir } from "../../test/helpers";
import { ensureWrk, median, pairedRounds, pinServer, runWrk } from "../lib/wrk";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const seconds = arg("--seconds", 4);
const rounds = arg("--rounds", 3);
const launches = arg("--launches", 5);

ensureWrk();
if (!process.argv.includes("--child")) {
  const ratios: number[] = [];
  const perLaunch: string[] = [];
  const rps = { bare: [] as number[], guarded: [] as number[] };
  console.log(`${launches} launches of ${rounds} rounds: wrk -t1 -c50 -d${seconds}s each, GET /bench with an eval key`);
  for (let launch = 1; launch <= launches; launch++) {
    const child = Bun.spawn([process.execPath, import.meta.path, "--child", "--rounds", String(rounds), "--seconds", String(seconds)], { stdout: "pipe", stderr: "inherit" });
    const out = await new Response(child.stdout).text();
    if ((await child.exited) !== 0) throw new Error(`launch ${launch} failed:\n${out}`);
    const lines = out.trimEnd().split("\n");
    const result = JSON.parse(lines.pop()!) as { ratios: number[]; bare: number[]; guarded: number[] };
    for (const line of lines) console.log(`  launch ${launch}: ${line}`);
    ratios.push(...result.ratios);
    rps.bare.push(...result.bare);
    rps.guarded.push(...result.guarded);
    perLaunch.push(`${(median(result.ratios) * 100).toFixed(1)} %`);
  }
  const ratio = median(ratios);
  console.log(`bare     median ${Math.round(median(rps.bare))} req/s`);
  console.log(`guarded  median ${Math.round(median(rps.guarded))} req/s`);
  console.log(`guarded / bare by launch: ${perLaunch.join(", ")}`);
  console.log(`guarded / bare, median of all ${ratios.length} rounds' ratios = ${(ratio * 100).toFixed(1)} % (cost ${((1 - ratio) * 100).toFixed(1)} %; target: cost under 10 %: ${ratio >= 0.9 ? "met" : "NOT met"})`);
  process.exit(0);
}

// One launch (a child of the above): both servers, `rounds` paired rounds; the last line is JSON.
const dir = tempDir("flagsvc-bench-auth-");
const config = loadConfig({ SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "warn", SVC_RATE_LIMITS: "eval:100000000" });
const log = createLogger({ level: "warn", format: "json" });
const ctx = createContext(config, { log });
bootstrap(ctx);
const tls = await loadTls(config);
const key = seedApiKey(ctx, "eval").secret;
const body = { ok: true };

const options = { normalize: false } as const;
type Routes = readonly { method: string; path: string }[];
const guardedApp = new Elysia(options);
const guarded = guardedApp
  .use(pipeline({ log, behindProxy: false, routes: (): Routes => guardedApp.routes, admit: admitter(ctx), admitHeaders: RATE_LIMIT_HEADERS }))
  .use(accessGuard())
  .get("/bench", () => body, { access: "evaluate" })
  .listen({ hostname: "127.0.0.1", port: 0, reusePort: false, tls: { cert: tls.cert, key: tls.key } });
const bareApp = new Elysia(options);
const bare = bareApp
  .use(pipeline({ log, behindProxy: false, routes: (): Routes => bareApp.routes, admit: () => undefined, admitHeaders: [] }))
  .get("/bench", () => body)
  .listen({ hostname: "127.0.0.1", port: 0, reusePort: false, tls: { cert: tls.cert, key: tls.key } });

const servers = { bare: bare.server!.port!, guarded: guarded.server!.port! };
const check = await fetch(`https://127.0.0.1:${servers.guarded}/bench`, { headers: { authorization: `Bearer ${key}` }, tls: { rejectUnauthorized: false } });
if (check.status !== 200) throw new Error(`the guarded route answered ${check.status}`);
const refused = await fetch(`https://127.0.0.1:${servers.guarded}/bench`, { tls: { rejectUnauthorized: false } });
if (refused.status !== 401) throw new Error(`the guarded route without a key answered ${refused.status}`);

const cpu = pinServer();
console.log(cpu === undefined ? "server and wrk share the CPUs" : "server on CPU 0, wrk on CPU 1");
const run = (name: keyof typeof servers) => async (round: number) => {
  const r = await runWrk({ url: `https://127.0.0.1:${servers[name]}/bench`, seconds, cpu, headers: { authorization: `Bearer ${key}` } });
  if (r.non2xx > 0) throw new Error(`${name}: ${r.non2xx} non-2xx answers`);
  console.log(`round ${round} ${name.padEnd(7)} ${Math.round(r.rps).toString().padStart(7)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms`);
  return r;
};
// Warm-up, not counted: a fresh process's first seconds (the JIT compiling the shared pipeline
// code) would count against whichever server runs first.
for (const port of [servers.bare, servers.guarded]) {
  await runWrk({ url: `https://127.0.0.1:${port}/bench`, seconds: 2, cpu, headers: { authorization: `Bearer ${key}` } });
}
const { a: bareRuns, b: guardedRuns, ratios } = await pairedRounds(rounds, run("bare"), run("guarded"));
console.log(JSON.stringify({ ratios, bare: bareRuns.map((r) => r.rps), guarded: guardedRuns.map((r) => r.rps) }));

guarded.stop(true);
bare.stop(true);
ctx.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
