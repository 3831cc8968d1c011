/**
 * Helpers for end-to-end tests of the compiled `flagsvc` binary.
 *
 * The binary is built once per test process (a module-level promise, so several test files
 * share one build) into a temporary folder, unless FLAGSVC_E2E_BINARY names an existing binary
 * to test instead (e.g. the artifact CI is about to ship).
 *
 * Children get an environment built from a minimal base (PATH, HOME) plus what the test passes,
 * so a developer's SVC_* variables never leak in. Everything started here is killed and every
 * temporary folder removed when the test process exits, whatever happened.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { baseEnv, drain } from "../../scripts/lib/proc";

export { baseEnv, freePort } from "../../scripts/lib/proc";

export const ROOT = resolve(import.meta.dir, "..", "..");
export const PACKAGE_VERSION: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;

const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 15_000;
const RUN_TIMEOUT_MS = 20_000;

// ---- temporary folders and leftovers --------------------------------------------------------

const tempDirs: string[] = [];
const running = new Set<Subprocess>();

/** A fresh empty folder, removed when the test process exits. */
export function tempDir(prefix = "flagsvc-e2e-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Kills every child still running (SIGKILL) and removes the temporary folders. */
export function cleanup(): void {
  for (const proc of running) {
    try {
      proc.kill("SIGKILL");
    } catch {}
  }
  running.clear();
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** The build is shared by every e2e file of the run: removed only when the test process exits. */
let buildDir: string | undefined;
process.on("exit", () => {
  cleanup();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

// ---- the binary -----------------------------------------------------------------------------

let built: Promise<string> | undefined;

/** Path of the binary under test, building it on first use. */
export function binaryPath(): Promise<string> {
  return (built ??= (async () => {
    const given = process.env.FLAGSVC_E2E_BINARY;
    if (given) return resolve(given);
    buildDir = mkdtempSync(join(tmpdir(), "flagsvc-e2e-build-"));
    const outfile = join(buildDir, "flagsvc");
    const proc = Bun.spawn([process.execPath, "scripts/build.ts", "--outfile", outfile], {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
      env: baseEnv(),
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`building the binary failed (exit ${code}):\n${out}${err}`);
    return outfile;
  })());
}

// ---- a running server -----------------------------------------------------------------------

export interface StartOptions {
  /** Working folder; default a fresh temporary one (data then goes to its ./data). */
  cwd?: string;
  /** Passed as --data-dir. */
  dataDir?: string;
  /** Added to the minimal base environment. */
  env?: Record<string, string | undefined>;
  /** Command-line arguments; `--port 0` is added unless a port is given by flag or SVC_PORT. */
  args?: string[];
}

export interface RunningBinary {
  port: number;
  /** `https://127.0.0.1:PORT` (or `http://` behind a proxy), reachable from here. */
  url: string;
  scheme: "http" | "https";
  cwd: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Standard output and standard error so far, interleaved as read. */
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Resolves once the output matches `pattern`; throws (with the output) after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends `signal` and resolves to the exit code; SIGKILLs and throws after 15 s. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

const LISTENING = /listening on (https?):\/\/(\[[^\]]+\]|[^\s"/:]+):(\d+)/;

export async function startBinary(opts: StartOptions = {}): Promise<RunningBinary> {
  const binary = await binaryPath();
  const cwd = opts.cwd ?? tempDir();
  const args = [...(opts.args ?? [])];
  if (opts.dataDir !== undefined) args.push("--data-dir", opts.dataDir);
  const hasPort = args.some((a) => a === "--port" || a.startsWith("--port=")) || opts.env?.SVC_PORT !== undefined;
  if (!hasPort) args.push("--port", "0");

  const proc = Bun.spawn([binary, ...args], { cwd, env: baseEnv(opts.env), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  running.add(proc);
  void proc.exited.then(() => running.delete(proc));

  let all = "";
  let out = "";
  let err = "";
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const w of waiters) w();
  };
  void drain(proc.stdout, (t) => {
    out += t;
    all += t;
    changed();
  });
  void drain(proc.stderr, (t) => {
    err += t;
    all += t;
    changed();
  });
  void proc.exited.then(changed);

  const waitFor = (pattern: RegExp, timeoutMs = START_TIMEOUT_MS) =>
    new Promise<RegExpMatchArray>((done, fail) => {
      const check = () => {
        const m = all.match(pattern);
        if (m) return finish(() => done(m));
        if (proc.exitCode !== null || proc.signalCode !== null) {
          // Give the pipes a moment: the last chunk may arrive after the exit.
          setTimeout(() => {
            const late = all.match(pattern);
            finish(() =>
              late ? done(late) : fail(new Error(`flagsvc exited (${proc.exitCode ?? proc.signalCode}) before printing ${pattern}; output:\n${all}`)),
            );
          }, 50);
        }
      };
      const timer = setTimeout(() => finish(() => fail(new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${all}`))), timeoutMs);
      const finish = (f: () => void) => {
        clearTimeout(timer);
        waiters.delete(check);
        f();
      };
      waiters.add(check);
      check();
    });

  let match: RegExpMatchArray;
  try {
    match = await waitFor(LISTENING);
  } catch (e) {
    proc.kill("SIGKILL");
    await proc.exited;
    throw new Error(`flagsvc ${args.join(" ")} did not start: ${(e as Error).message}`);
  }
  const scheme = match[1] as "http" | "https";
  const host = match[2]!;
  const port = Number(match[3]);
  const reachable = host === "0.0.0.0" ? "127.0.0.1" : host === "[::]" ? "[::1]" : host;

  return {
    port,
    url: `${scheme}://${reachable}:${port}`,
    scheme,
    cwd,
    proc,
    output: () => all,
    stdout: () => out,
    stderr: () => err,
    waitFor,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timeout = Bun.sleep(STOP_TIMEOUT_MS).then(() => "timeout" as const);
      const result = await Promise.race([proc.exited, timeout]);
      if (result === "timeout") {
        proc.kill("SIGKILL");
        await proc.exited;
        throw new Error(`flagsvc did not exit within ${STOP_TIMEOUT_MS} ms of ${signal}; output:\n${all}`);
      }
      return result;
    },
  };
}

// ---- fixtures -------------------------------------------------------------------------------

/** A self-signed ECDSA certificate and its PKCS#8 key, as PEM, made in-process (no binary needed). */
export async function selfSignedPem(): Promise<{ cert: string; key: string }> {
  await import("reflect-metadata"); // @peculiar/x509 needs it first
  const x509 = await import("@peculiar/x509");
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=localhost",
    notBefore: new Date(Date.now() - 3_600_000),
    notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: alg,
    keys,
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey)).toString("base64");
  const key = `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
  return { cert: cert.toString("pem"), key };
}

// ---- one-shot commands ----------------------------------------------------------------------

export interface RunResult {
  /** null when it had to be killed after the time limit. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export async function runBinary(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  const binary = await binaryPath();
  const proc = Bun.spawn([binary, ...args], {
    cwd: opts.cwd ?? tempDir(),
    env: baseEnv(opts.env),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  running.add(proc);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, opts.timeoutMs ?? RUN_TIMEOUT_MS);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  running.delete(proc);
  return { exitCode: timedOut ? null : code, stdout, stderr };
}
