/** Runs wrk (Debian package `wrk`) and reads its figures. Only 127.0.0.1 is a legal target. */
import { readFileSync } from "node:fs";

export function ensureWrk(): void {
  if (Bun.which("wrk")) return;
  console.log("wrk is missing: installing the Debian package");
  const install = Bun.spawnSync(["bash", "-c", "apt-get update -qq && apt-get install -y -qq wrk"], { stdout: "inherit", stderr: "inherit" });
  if (install.exitCode !== 0 || !Bun.which("wrk")) throw new Error("cannot install wrk (apt-get install wrk)");
}

/**
 * On a machine with two or more cores, keeps the server (this process and its threads) on
 * CPU 0 and hands CPU 1 to wrk: load generator and server then do not take turns on the same
 * cores, and repeated runs agree within about 1 % instead of 5-10 %. Returns wrk's CPU.
 */
export function pinServer(pid = process.pid): number | undefined {
  if (navigator.hardwareConcurrency < 2 || !Bun.which("taskset")) return undefined;
  const pinned = Bun.spawnSync(["taskset", "-a", "-cp", "0", String(pid)], { stdout: "ignore", stderr: "ignore" });
  return pinned.exitCode === 0 ? 1 : undefined;
}

/**
 * After `pinServer`: every thread of `pid` but its main one (the thread id equal to the pid,
 * which answers requests) goes to `cpu`; the main thread stays on CPU 0. For a server whose
 * background work (a worker, the fetch client, JIT and GC helpers) must not be measured on
 * the request core. Returns whether it worked.
 */
export function pinRequestThread(pid: number, cpu: number): boolean {
  const taskset = (args: string[]) => Bun.spawnSync(["taskset", ...args], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
  return taskset(["-a", "-cp", String(cpu), String(pid)]) && taskset(["-cp", "0", String(pid)]);
}

const pinnedTo = (cpu: number | undefined): string[] => (cpu === undefined ? [] : ["taskset", "-c", String(cpu)]);

export interface WrkResult {
  rps: number;
  /** Requests completed. */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

const LUA_BODY = `
wrk.method = os.getenv("WRK_METHOD") or "GET"
local body = os.getenv("WRK_BODY")
if body and body ~= "" then wrk.body = body; wrk.headers["Content-Type"] = "application/json" end
`;

export async function runWrk(opts: {
  url: string;
  seconds: number;
  connections?: number;
  headers?: Record<string, string>;
  method?: string;
  body?: string;
  /** Runs wrk on this CPU only (see `pinServer`). */
  cpu?: number;
  /** Each connection waits this long before each request (wrk's `delay()`): a paced load, not the most it can. */
  delayMs?: number;
}): Promise<WrkResult> {
  if (!new URL(opts.url).hostname.startsWith("127.0.0.1")) throw new Error("load tests target 127.0.0.1 only");
  const script = `/tmp/flagsvc-wrk-${process.pid}.lua`;
  await Bun.write(script, opts.delayMs === undefined ? LUA_BODY : `${LUA_BODY}\nfunction delay() return ${opts.delayMs} end\n`);
  const args = [...pinnedTo(opts.cpu), "wrk", "-t1", `-c${opts.connections ?? 50}`, `-d${opts.seconds}s`, "--latency", "-s", script];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push("-H", `${k}: ${v}`);
  args.push(opts.url);
  const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe", env: { ...process.env, WRK_METHOD: opts.method ?? "GET", WRK_BODY: opts.body ?? "" } });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`wrk failed (${code}): ${err || out}`);
  const ms = (label: string) => {
    const m = out.match(new RegExp(`^\\s*${label}\\s+([\\d.]+)(us|ms|s)`, "m"));
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v;
  };
  return {
    rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1] ?? NaN),
    requests: Number(out.match(/(\d+) requests in/)?.[1] ?? NaN),
    p50Ms: ms("50%"),
    p99Ms: ms("99%"),
    non2xx: Number(out.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0),
  };
}

/** User plus system CPU time of a process so far, every thread, in seconds (Linux; 10 ms ticks). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The middle value (the upper one of an even count). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** The `p`-th percentile (0-100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * Two runs back to back in each round, which goes first alternating by round (whichever runs
 * second meets a slightly different machine: caches, the collector, the VM's drift). The
 * figure is the median of the rounds' ratios `b / a`: within a round the drift cancels.
 */
export async function pairedRounds(
  rounds: number,
  runA: (round: number) => Promise<WrkResult>,
  runB: (round: number) => Promise<WrkResult>,
): Promise<{ a: WrkResult[]; b: WrkResult[]; ratio: number }> {
  const a: WrkResult[] = [];
  const b: WrkResult[] = [];
  for (let round = 1; round <= rounds; round++) {
    const pair = [async () => a.push(await runA(round)), async () => b.push(await runB(round))];
    for (const run of round % 2 === 1 ? pair : pair.reverse()) await run();
  }
  return { a, b, ratio: median(b.map((r, i) => r.rps / a[i]!.rps)) };
}
