/**
 * The README, pasted in order, then the docs: every runnable block of README.md runs, top to
 * bottom, in one bash session (variables carry over, `set -euo pipefail`) beside a compiled
 * binary started in an empty folder, then every runnable block of docs/*.md (file by file, in
 * name order) in the same session, beside the same server: the docs' examples continue the
 * README's walk-through, with its variables. What each command prints is compared with the
 * output shown under it. The conventions (which blocks run, how output is shown) are in
 * README.md, "Testing"; the parsing and the comparison are in scripts/lib/readme.ts.
 *
 * Usage: bun scripts/readme-check.ts [BINARY [MARKDOWN ...]]   (default dist/flagsvc, then
 *        README.md and docs/*.md; also `scripts/readme-check`). The first file given is the
 *        one with the set-up block.
 *
 * It builds nothing. What differs from a reader's paste, and nothing else:
 * - the first file's first block (install, `npm start`, test) is not run: the check starts
 *   `BINARY serve --port 0` in an empty temporary folder instead, and uses the port it got;
 * - in runnable blocks, `https://localhost:8443` becomes `https://localhost:PORT` (in the
 *   commands and in the output shown under them) and `npm run -s flagsvc --` becomes BINARY;
 * - a `sh server` block (`[VAR=value ...] npm start [-- OPTIONS]`) stops that server and starts
 *   `BINARY serve --port PORT [OPTIONS]` with those variables, in the same folder.
 *
 * Prints `ok - ...` or `not ok - ...` per block and, last, exactly `readme-check: N passed, N failed`.
 * Exit code 0 only when nothing failed. The server, the bash session and whatever it started in
 * the background are always killed, and the temporary folder removed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import type { Subprocess } from "bun";
import { type Block, blockKind, extractBlocks, outputMismatch, SHELL_LANGS, type Step, splitSteps } from "./lib/readme";
import { baseEnv, BANNER_END, drain } from "./lib/proc";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.argv[2] ? resolve(process.argv[2]) : join(ROOT, "dist", "flagsvc");
/** README.md, then the docs in name order: the docs continue the README's walk-through. */
const docs = () =>
  readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => join(ROOT, "docs", f));
const FILES = process.argv.length > 3 ? process.argv.slice(3).map((f) => resolve(f)) : [join(ROOT, "README.md"), ...docs()];
const WHOLE_RUN_LIMIT_MS = 360_000;
const STEP_LIMIT_MS = 30_000;
const START_LIMIT_MS = 15_000;
const STOP_LIMIT_MS = 15_000;

let passed = 0;
let failed = 0;
const began = performance.now();
const dir = mkdtempSync(join(tmpdir(), "flagsvc-readme-"));

function report(ok: boolean, what: string, why?: string) {
  if (ok) passed++;
  else failed++;
  console.log(ok ? `ok - ${what}` : `not ok - ${what}: ${why ?? "failed"}`);
}

function tail(text: string, max = 800): string {
  const t = text.trim();
  return t.length > max ? `...${t.slice(-max)}` : t;
}

// ---- the server ------------------------------------------------------------------------------

let server: Subprocess<"ignore", "pipe", "pipe"> | undefined;
let port = 0;

/** Starts the binary in the temporary folder; resolves once its banner is out (first start done). */
async function startServer(env: Record<string, string>, options: string[]): Promise<void> {
  const proc = Bun.spawn([binary, "serve", "--port", String(port), ...options], {
    cwd: dir,
    env: baseEnv({ SVC_LOG_FORMAT: "json", ...env }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  server = proc;
  let all = "";
  void drain(proc.stdout, (t) => (all += t));
  void drain(proc.stderr, (t) => (all += t));
  const deadline = performance.now() + START_LIMIT_MS;
  for (;;) {
    const listening = /"msg":"listening on https:\/\/[^"]*:(\d+)"/.exec(all);
    if (listening && BANNER_END.test(all)) {
      port = Number(listening[1]);
      return;
    }
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`exited (${proc.exitCode ?? proc.signalCode}): ${tail(all)}`);
    if (performance.now() > deadline) throw new Error(`not ready within ${START_LIMIT_MS / 1000} s: ${tail(all)}`);
    await Bun.sleep(20);
  }
}

async function stopServer(): Promise<void> {
  if (!server) return;
  const proc = server;
  server = undefined;
  proc.kill("SIGTERM");
  const code = await Promise.race([proc.exited, Bun.sleep(STOP_LIMIT_MS).then(() => "timeout" as const)]);
  if (code === "timeout") {
    proc.kill("SIGKILL");
    throw new Error(`still running ${STOP_LIMIT_MS / 1000} s after SIGTERM`);
  }
  if (code !== 0) throw new Error(`stopped with exit code ${code}`);
}

/** A `sh server` block: `[VAR=value ...] npm start [-- OPTIONS]`, the only line that is not a comment. */
function serverCommand(block: Block): { env: Record<string, string>; options: string[] } {
  const lines = block.lines.map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  const m = lines.length === 1 ? /^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)npm start(?:\s+--\s+(.+))?$/.exec(lines[0]!) : null;
  if (!m) throw new Error("a `sh server` block holds one line: [VAR=value ...] npm start [-- OPTIONS]");
  const env: Record<string, string> = {};
  for (const assignment of m[1]!.trim().split(/\s+/).filter(Boolean)) {
    const eq = assignment.indexOf("=");
    env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
  }
  return { env, options: m[2] ? m[2].trim().split(/\s+/) : [] };
}

// ---- the reader's second terminal: one bash session -----------------------------------------

const MARK = `__readme_check_${crypto.randomUUID().replaceAll("-", "")}__`;
// Steps arrive on stdin separated by NUL bytes; each runs in this shell (eval), with stdin from
// /dev/null so that no command can swallow the steps after it; a mark line follows its output.
// Output goes through a pipe of the shell's own (cat): the spawn's stdio are sockets, which
// `/dev/stderr` cannot be opened on (curl -D /dev/stderr), as it can be on a terminal.
const LOOP = `exec > >(cat) 2>&1
set -euo pipefail
while IFS= read -r -d '' __readme_step; do
  eval "$__readme_step" </dev/null
  printf '\\n%s\\n' ${MARK}
done`;

let shell: ChildProcess | undefined;
let shellOutput = "";
let shellExit: number | string | null = null;

function startShell(): void {
  shell = spawn("bash", ["--noprofile", "--norc", "-c", LOOP], {
    cwd: dir,
    env: baseEnv({ LC_ALL: "C.UTF-8" }),
    stdio: ["pipe", "pipe", "pipe"],
    detached: true, // its own process group: background jobs of the README go with it
  });
  shell.stdout!.on("data", (d: Buffer) => (shellOutput += d.toString("utf8")));
  shell.stderr!.on("data", (d: Buffer) => (shellOutput += d.toString("utf8")));
  shell.on("exit", (code, signal) => (shellExit = code ?? signal ?? "?"));
}

function killShell(): void {
  if (!shell?.pid) return;
  try {
    process.kill(-shell.pid, "SIGKILL");
  } catch {}
}

/** The README's address of the server, as the check's server has it: commands and shown output alike. */
function local(text: string): string {
  return text.replaceAll("https://localhost:8443", `https://localhost:${port}`);
}

/** The shell code of a step as the check runs it: the README's, with the two substitutions. */
function runnable(code: string[]): string {
  return local(code.join("\n")).replaceAll("npm run -s flagsvc --", `'${binary.replaceAll("'", `'\\''`)}'`);
}

/** Runs one step; resolves to what it printed, or throws when the shell exits (a command failed) or it hangs. */
async function runStep(step: Step): Promise<string> {
  shell!.stdin!.write(`${runnable(step.code)}\n\0`);
  const deadline = performance.now() + STEP_LIMIT_MS;
  const end = `\n${MARK}\n`;
  for (;;) {
    const at = shellOutput.indexOf(end);
    if (at >= 0) {
      const printed = shellOutput.slice(0, at);
      shellOutput = shellOutput.slice(at + end.length);
      return printed;
    }
    if (shellExit !== null) throw new Error(`a command failed (bash exited ${shellExit}); printed: ${tail(shellOutput) || "nothing"}`);
    if (performance.now() > deadline) throw new Error(`no end within ${STEP_LIMIT_MS / 1000} s; printed: ${tail(shellOutput) || "nothing"}`);
    await Bun.sleep(5);
  }
}

// ---- the run ---------------------------------------------------------------------------------

/** A block of one of the files, named by the file's path from the repository (`docs/audit.md`). */
interface FileBlock extends Block {
  file: string;
}

function label(block: FileBlock): string {
  const first = block.lines.find((l) => l.trim() !== "" && !l.trimStart().startsWith("#"))?.trim() ?? "";
  return `${block.file}:${block.line} (${block.heading}) ${first.length > 60 ? `${first.slice(0, 57)}...` : first}`;
}

async function runBlock(block: FileBlock): Promise<void> {
  if (blockKind(block) === "server") {
    const { env, options } = serverCommand(block);
    await stopServer();
    await startServer(env, options);
    return;
  }
  // After a mismatch the block's later steps still run, as they would for a reader: what
  // follows finds the state it expects, and only the first difference is reported.
  let first: string | undefined;
  for (const step of splitSteps(block)) {
    const printed = await runStep(step).catch((e: Error) => {
      throw new Error(`line ${block.line + step.line}: ${e.message}`);
    });
    const why = step.shown.length > 0 ? outputMismatch(step.shown.map(local), printed) : null;
    if (why) first ??= `line ${block.line + step.line}: ${why}; printed: ${tail(printed, 600)}`;
  }
  if (first) throw new Error(first);
}

async function run(): Promise<void> {
  if (!existsSync(binary) || (statSync(binary).mode & 0o111) === 0) {
    report(false, `binary ${binary}`, "missing or not executable (build it: npm run build)");
    return;
  }
  const [first, ...others] = FILES.map((path) => extractBlocks(readFileSync(path, "utf8")).map((b): FileBlock => ({ ...b, file: relative(ROOT, path) })));
  const [setup, ...rest] = first!;
  if (!setup || !setup.lines.some((l) => /\bnpm start\b/.test(l))) {
    report(false, `${relative(ROOT, FILES[0]!)} starts with the set-up block`, "its first block has no `npm start`");
    return;
  }
  const all = [...rest, ...others.flat()];
  const toRun = all.filter((b) => blockKind(b) !== "skip");
  try {
    await startServer({}, []);
    report(true, `${binary} serve in an empty folder, on port ${port} (the README's \`npm start\`)`);
  } catch (e) {
    report(false, "the server starts in an empty folder", (e as Error).message);
    return;
  }
  startShell();
  let broken: string | undefined;
  for (const block of toRun) {
    if (broken) {
      report(false, label(block), `not run: ${broken}`);
      continue;
    }
    try {
      await runBlock(block);
      report(true, label(block));
    } catch (e) {
      report(false, label(block), (e as Error).message.replace(/\s*\n\s*/g, " | "));
      // A failed command ends the session (set -e), and what follows depends on it.
      if (shellExit !== null || !server) broken = `${block.file}:${block.line} failed`;
    }
  }
  const perFile = new Map<string, number>();
  for (const b of toRun) perFile.set(b.file, (perFile.get(b.file) ?? 0) + 1);
  const files = [...perFile].map(([file, n]) => `${file} ${n}`).join(", ");
  const skipped = all.filter((b) => blockKind(b) === "skip" && SHELL_LANGS.includes(b.lang)).length;
  console.log(`# ${toRun.length} runnable blocks (${files}); ${skipped} shell blocks marked unchecked; ${((performance.now() - began) / 1000).toFixed(1)} s`);
}

let finished = false;
async function finish(): Promise<never> {
  if (!finished) {
    finished = true;
    shell?.stdin?.end();
    killShell();
    server?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    console.log(`readme-check: ${passed} passed, ${failed} failed`);
  }
  process.exit(failed > 0 ? 1 : 0);
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    report(false, "readme-check run", `interrupted by ${signal}`);
    void finish();
  });
}
setTimeout(() => {
  report(false, "readme-check run", `did not finish within ${WHOLE_RUN_LIMIT_MS / 1000} s`);
  void finish();
}, WHOLE_RUN_LIMIT_MS);

try {
  await run();
} catch (e) {
  report(false, "readme-check run", `unexpected error: ${e instanceof Error ? e.message : String(e)}`);
}
await finish();
