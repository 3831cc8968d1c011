/** The binary a bench measures: the path given, else dist/flagsvc, built first when missing. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { apiClient, pool } from "./api";
import { baseEnv, freePort } from "./proc";

export const ROOT = resolve(import.meta.dir, "..", "..");

export function benchBinary(given: string | undefined, bench: string): string {
  if (given) {
    const binary = resolve(given);
    if (!existsSync(binary)) {
      console.error(`${bench}: no binary at ${binary}`);
      process.exit(1);
    }
    return binary;
  }
  const binary = join(ROOT, "dist", "flagsvc");
  if (!existsSync(binary)) {
    console.log("dist/flagsvc is missing: building it");
    const build = Bun.spawnSync([process.execPath, join(ROOT, "scripts", "build.ts")], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (build.exitCode !== 0) process.exit(1);
  }
  return binary;
}

/**
 * Starts `binary serve` on a free port of 127.0.0.1 with `dataDir` and the SVC_* variables of
 * `env` (over a minimal base), and waits for its health check (15 s at most).
 */
export async function launchBinary(binary: string, dataDir: string, env: Record<string, string>): Promise<{ proc: Subprocess; base: string }> {
  const port = await freePort();
  const proc = Bun.spawn([binary, "serve", "--port", String(port), "--data-dir", dataDir], {
    env: baseEnv(env),
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit",
  });
  const base = `https://127.0.0.1:${port}`;
  for (let waited = 0; ; waited += 50) {
    try {
      if ((await fetch(`${base}/v1/health`, { tls: { rejectUnauthorized: false } })).status === 200) break;
    } catch {}
    if (proc.exitCode !== null || waited > 15_000) {
      proc.kill("SIGKILL");
      throw new Error("the binary did not start");
    }
    await Bun.sleep(50);
  }
  return { proc, base };
}

/**
 * A bench's scratch folder, removed when the process exits (Ctrl-C included), with every
 * process added to `live` killed first.
 */
export function benchWorkspace(name: string): { dir: string; live: Set<Subprocess> } {
  const dir = mkdtempSync(join(tmpdir(), `flagsvc-bench-${name}-`));
  const live = new Set<Subprocess>();
  process.on("exit", () => {
    for (const p of live) p.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130));
  return { dir, live };
}

/** A running binary a bench evaluates against: its pid, base URL and an eval key of production. */
export interface FlaggedServer {
  pid: number;
  base: string;
  evalKey: string;
}

/** `flag-0042`: the keys of the flags `flaggedServer` makes. */
export const flagKey = (i: number) => `flag-${String(i).padStart(4, "0")}`;

/**
 * `launchBinary` with what every evaluation bench wants (warn logs, `adminKey`, no rate limits,
 * loopback allowed outbound, plus `env`), then `flags` flags on in production at a 50 % rollout
 * and an eval key; the process is added to `live`.
 */
export async function flaggedServer(opts: { binary: string; dataDir: string; adminKey: string; flags: number; live: Set<Subprocess>; env?: Record<string, string> }): Promise<FlaggedServer> {
  const { proc, base } = await launchBinary(opts.binary, opts.dataDir, {
    SVC_LOG_LEVEL: "warn",
    SVC_ADMIN_KEY: opts.adminKey,
    SVC_RATE_LIMITS: "eval:100000000,admin:100000000",
    SVC_OUTBOUND_ALLOWED_HOSTS: "loopback",
    ...opts.env,
  });
  opts.live.add(proc);
  const api = apiClient(opts.adminKey);
  await pool(opts.flags, 8, async (i) => {
    await api(base, "POST", "/v1/projects/default/flags", { key: flagKey(i), name: `Flag ${i}` });
    await api(base, "PUT", `/v1/projects/default/flags/${flagKey(i)}/states/production`, { enabled: true, rolloutPercentage: 50 });
  });
  const { key } = await api(base, "POST", "/v1/projects/default/api-keys", { name: "bench", scope: "eval", environment: "production" });
  return { pid: proc.pid, base, evalKey: key };
}

/** A process's resident memory now, in MB (Linux). */
export const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
