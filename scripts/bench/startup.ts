/**
 * Startup time of the binary: exec to the first HTTPS 200 from GET /v1/health.
 *
 * Usage: bun scripts/bench/startup.ts [BINARY] [--runs N]     (also `scripts/bench/startup`)
 *
 * Without BINARY it uses dist/flagsvc, building it first when missing. A data dir is prepared
 * by one first start (migrations, bootstrap, certificate), so the runs measure an ordinary
 * restart. Each run: spawn on a port chosen beforehand, poll /v1/health tightly (connection
 * refused -> ~1 ms pause), record the time, SIGTERM, await the exit. A figure, not a test:
 * the exit code is 0 whether or not the target is met (it is 1 only when the bench itself
 * could not run).
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { benchBinary } from "../lib/binary";
import { baseEnv, freePort } from "../lib/proc";
import { percentile } from "../lib/wrk";

const TARGET_MS = 80;

const argv = process.argv.slice(2);
const runsAt = argv.indexOf("--runs");
const RUNS = runsAt >= 0 ? Number(argv[runsAt + 1]) : 20;
const positional = argv.filter((a, i) => !a.startsWith("--") && (runsAt < 0 || i !== runsAt + 1));
if (!Number.isInteger(RUNS) || RUNS < 1) {
  console.error("startup: --runs needs a positive whole number");
  process.exit(2);
}

const binary = benchBinary(positional[0], "startup");

const dir = mkdtempSync(join(tmpdir(), "flagsvc-bench-"));
const live = new Set<Subprocess>();
const cleanup = () => {
  for (const p of live) {
    try {
      p.kill("SIGKILL");
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
};
process.on("exit", cleanup);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130));

// Only the variables the binary needs; SVC_* from the caller's shell must not steer it.
const env = baseEnv({ SVC_LOG_FORMAT: "json" });
const dataDir = join(dir, "data");

function spawn(port: number) {
  const proc = Bun.spawn([binary, "serve", "--port", String(port), "--data-dir", dataDir], {
    cwd: dir,
    env,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit",
  });
  live.add(proc);
  return proc;
}

async function stop(proc: Subprocess): Promise<number> {
  proc.kill("SIGTERM");
  const code = await Promise.race([proc.exited, Bun.sleep(15_000).then(() => null)]);
  if (code === null) {
    proc.kill("SIGKILL");
    await proc.exited;
    throw new Error("the server did not exit within 15 s of SIGTERM");
  }
  live.delete(proc);
  return code;
}

/** Polls until /v1/health answers 200; returns ms since `t0`. */
async function firstOk(proc: Subprocess, port: number, t0: number, limitMs = 15_000): Promise<number> {
  const url = `https://127.0.0.1:${port}/v1/health`;
  for (;;) {
    try {
      const res = await fetch(url, { tls: { rejectUnauthorized: false }, keepalive: false });
      await res.arrayBuffer();
      if (res.status === 200) return performance.now() - t0;
    } catch {
      // Not listening yet (connection refused, or reset mid-handshake).
    }
    if (proc.exitCode !== null) throw new Error(`the server exited (${proc.exitCode}) before answering`);
    if (performance.now() - t0 > limitMs) throw new Error(`no 200 within ${limitMs} ms`);
    await Bun.sleep(1);
  }
}

const fmt = (ms: number) => ms.toFixed(1);

try {
  // Prepare the data dir: migrations, bootstrap and certificate happen here, not in the runs.
  {
    const port = await freePort();
    const t0 = performance.now();
    const proc = spawn(port);
    const ms = await firstOk(proc, port, t0);
    const code = await stop(proc);
    if (code !== 0) throw new Error(`the first start exited with ${code}`);
    console.log(`binary ${binary}`);
    console.log(`first start (migrate, bootstrap, generate certificate): ${fmt(ms)} ms`);
  }

  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const port = await freePort();
    const t0 = performance.now();
    const proc = spawn(port);
    times.push(await firstOk(proc, port, t0));
    const code = await stop(proc);
    if (code !== 0) throw new Error(`run ${i + 1} exited with ${code} after SIGTERM`);
  }

  console.log(`runs (exec -> first HTTPS 200, ms): ${times.map(fmt).join(" ")}`);
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  const sizeMb = statSync(binary).size / 1024 / 1024;
  console.log(
    `median ${fmt(median)} ms  p90 ${fmt(percentile(sorted, 90))} ms  min ${fmt(sorted[0]!)} ms  max ${fmt(sorted.at(-1)!)} ms  (${RUNS} runs)`,
  );
  console.log(`binary size ${sizeMb.toFixed(1)} MB`);
  console.log(`target median < ${TARGET_MS} ms: ${median < TARGET_MS ? "met" : "NOT met"}`);
} catch (e) {
  console.error(`startup: ${(e as Error).message}`);
  process.exit(1);
}
process.exit(0);
