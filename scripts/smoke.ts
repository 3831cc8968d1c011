/**
 * Smoke test of a built binary, as an operator would meet it: started in an empty folder,
 * stopped, started again, backed up while running.
 *
 * Usage: bun scripts/smoke.ts [BINARY]        (default dist/flagsvc; also `scripts/smoke`)
 *
 * Prints `ok - <what>` or `not ok - <what>: <why>` per check and, last, exactly
 * `smoke: N passed, N failed`. Exit code 0 only when nothing failed. The children are always
 * killed and the temporary folder always removed.
 */
import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { BANNER_END, drain, plainHttpExchange, servedCertificate } from "./lib/proc";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.argv[2] ? resolve(process.argv[2]) : join(ROOT, "dist", "flagsvc");
const WHOLE_RUN_LIMIT_MS = 30_000;
const START_LIMIT_MS = 10_000;
const STOP_LIMIT_MS = 12_000;
const REQUEST_LIMIT_MS = 5_000;

let passed = 0;
let failed = 0;
const dir = mkdtempSync(join(tmpdir(), "flagsvc-smoke-"));
const children = new Set<Subprocess>();

// The binary's own environment minus every SVC_* variable: the data must go to ./data of the
// temporary folder, whatever the caller's shell says.
const env: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("SVC_")) env[k] = v;
env.SVC_LOG_FORMAT = "json";

function report(ok: boolean, what: string, why?: string) {
  if (ok) passed++;
  else failed++;
  console.log(ok ? `ok - ${what}` : `not ok - ${what}: ${(why ?? "failed").replace(/\s+/g, " ").trim()}`);
}

/** Runs one check: it passes unless `fn` throws. Returns whether it passed. */
async function check(what: string, fn: () => unknown | Promise<unknown>): Promise<boolean> {
  try {
    await fn();
    report(true, what);
    return true;
  } catch (e) {
    report(false, what, e instanceof Error ? e.message : String(e));
    return false;
  }
}

function assert(condition: unknown, why: string): asserts condition {
  if (!condition) throw new Error(why);
}

let finished = false;
function finish(): never {
  if (!finished) {
    finished = true;
    for (const child of children) {
      try {
        child.kill("SIGKILL");
      } catch {}
    }
    rmSync(dir, { recursive: true, force: true });
    console.log(`smoke: ${passed} passed, ${failed} failed`);
  }
  process.exit(failed > 0 ? 1 : 0);
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    report(false, "smoke run", `interrupted by ${signal}`);
    finish();
  });
}
setTimeout(() => {
  report(false, "smoke run", `did not finish within ${WHOLE_RUN_LIMIT_MS / 1000} s`);
  finish();
}, WHOLE_RUN_LIMIT_MS);

// ---- the server under test -------------------------------------------------------------------

interface Server {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  port: number;
  output: () => string;
  waitFor: (pattern: RegExp, limitMs?: number) => Promise<RegExpMatchArray>;
}

async function start(): Promise<Server> {
  const proc = Bun.spawn([binary, "serve", "--port", "0"], { cwd: dir, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  children.add(proc);
  let all = "";
  void drain(proc.stdout, (t) => (all += t));
  void drain(proc.stderr, (t) => (all += t));
  const waitFor = async (pattern: RegExp, limitMs = START_LIMIT_MS) => {
    const deadline = performance.now() + limitMs;
    for (;;) {
      const m = all.match(pattern);
      if (m) return m;
      if (proc.exitCode !== null || proc.signalCode !== null) {
        await Bun.sleep(50);
        const late = all.match(pattern);
        if (late) return late;
        throw new Error(`exited (${proc.exitCode ?? proc.signalCode}) before printing ${pattern}; output: ${tail(all)}`);
      }
      if (performance.now() > deadline) throw new Error(`no ${pattern} within ${limitMs} ms; output: ${tail(all)}`);
      await Bun.sleep(10);
    }
  };
  const m = await waitFor(/"msg":"listening on https:\/\/[^"]*:(\d+)"/);
  return { proc, port: Number(m[1]), output: () => all, waitFor };
}

async function stop(server: Server): Promise<number | null> {
  server.proc.kill("SIGTERM");
  const code = await Promise.race([server.proc.exited, Bun.sleep(STOP_LIMIT_MS).then(() => "timeout" as const)]);
  if (code === "timeout") {
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    throw new Error(`still running ${STOP_LIMIT_MS / 1000} s after SIGTERM`);
  }
  children.delete(server.proc);
  return code;
}

function tail(text: string, max = 600): string {
  return text.length > max ? `...${text.slice(-max)}` : text;
}

const get = (url: string, init: BunFetchRequestInit = {}) => fetch(url, { signal: AbortSignal.timeout(REQUEST_LIMIT_MS), ...init });

// ---- the checks ------------------------------------------------------------------------------

const certFile = join(dir, "data", "tls", "cert.pem");
const dbFile = join(dir, "data", "flagsvc.db");

async function run() {
  const usable = await check(`binary ${binary} exists and is executable`, () => {
    assert(existsSync(binary), "no such file (build it: bun scripts/build.ts)");
    assert((statSync(binary).mode & 0o111) !== 0, "not executable");
  });
  if (!usable) return;

  // First start.
  let server: Server | undefined;
  await check("first start in an empty folder logs `listening on https://HOST:PORT`", async () => {
    server = await start();
  });
  if (!server) return;
  const base = `https://127.0.0.1:${server.port}`;
  let certPem = "";
  let firstServed: Buffer | undefined;

  await check("first start prints the Created-project line", async () => {
    await server!.waitFor(/Created project "default"/, 3_000);
  });
  await check("data/tls/cert.pem was generated", () => {
    certPem = readFileSync(certFile, "utf8");
    assert(certPem.includes("-----BEGIN CERTIFICATE-----"), "not a PEM certificate");
  });
  for (const host of ["127.0.0.1", "localhost"]) {
    await check(`HTTPS GET https://${host}:PORT/v1/health verifies against cert.pem and answers 200 ok`, async () => {
      const res = await get(`https://${host}:${server!.port}/v1/health`, { tls: { ca: certPem } });
      assert(res.status === 200, `status ${res.status}`);
      const body = (await res.json()) as { status?: string };
      assert(body.status === "ok", `body ${JSON.stringify(body)}`);
    });
  }
  await check("the served certificate is data/tls/cert.pem", async () => {
    firstServed = await servedCertificate(server!.port, certPem);
    assert(firstServed.equals(new X509Certificate(certPem).raw), "a different certificate is served");
  });
  await check("plain HTTP to the same port gets no HTTP answer", async () => {
    const reply = await plainHttpExchange(server!.port);
    assert(!reply.startsWith("HTTP/"), `answered: ${JSON.stringify(reply.slice(0, 80))}`);
  });
  await check("GET /v1/openapi.json is JSON with an `openapi` field", async () => {
    const res = await get(`${base}/v1/openapi.json`, { tls: { ca: certPem } });
    assert(res.status === 200, `status ${res.status}`);
    const doc = (await res.json()) as { openapi?: unknown };
    assert(typeof doc.openapi === "string", "no openapi field");
  });
  await check("GET /v1/docs loads only local scripts and styles", async () => {
    const res = await get(`${base}/v1/docs`, { tls: { ca: certPem } });
    assert(res.status === 200, `status ${res.status}`);
    const html = await res.text();
    const srcs = [...html.matchAll(/<script\b[^>]*\bsrc\s*=\s*["']?([^"'\s>]+)/gi)].map((m) => m[1]!);
    assert(srcs.length > 0, "no <script src> at all");
    const links = [...html.matchAll(/<link\b[^>]*\bhref\s*=\s*["']?([^"'\s>]+)/gi)].map((m) => m[1]!);
    const imports = [...html.matchAll(/@import\s+(?:url\()?["']?([^"')\s;]+)/gi)].map((m) => m[1]!);
    const remote = [...srcs, ...links, ...imports].filter((u) => /^(https?:)?\/\//i.test(u));
    assert(remote.length === 0, `remote references: ${remote.join(", ")}`);
    assert(srcs.includes("/v1/docs/scalar.js"), `scripts are ${srcs.join(", ")}`);
  });
  await check("GET /v1/docs/scalar.js is served", async () => {
    const res = await get(`${base}/v1/docs/scalar.js`, { tls: { ca: certPem } });
    assert(res.status === 200, `status ${res.status}`);
    assert(/javascript/.test(res.headers.get("content-type") ?? ""), `content-type ${res.headers.get("content-type")}`);
    const size = (await res.arrayBuffer()).byteLength;
    assert(size > 10_000, `only ${size} bytes`);
  });
  await check("an unknown route gives 404 {error:NOT_FOUND} with x-request-id", async () => {
    const res = await get(`${base}/v1/no-such-route`, { tls: { ca: certPem } });
    assert(res.status === 404, `status ${res.status}`);
    assert(/application\/json/.test(res.headers.get("content-type") ?? ""), `content-type ${res.headers.get("content-type")}`);
    const body = (await res.json()) as { error?: string };
    assert(body.error === "NOT_FOUND", `body ${JSON.stringify(body)}`);
    assert(res.headers.get("x-request-id"), "no x-request-id header");
  });
  const stopped = await check("SIGTERM stops the first run with exit code 0", async () => {
    const code = await stop(server!);
    assert(code === 0, `exit code ${code}`);
  });
  if (!stopped) return;

  // Restart in the same folder.
  const certBytes = readFileSync(certFile);
  let again: Server | undefined;
  await check("restart in the same folder starts", async () => {
    again = await start();
  });
  if (!again) return;
  await check("restart: cert.pem bytes unchanged", () => {
    assert(readFileSync(certFile).equals(certBytes), "cert.pem was rewritten");
  });
  await check("restart: the served certificate is unchanged", async () => {
    const served = await servedCertificate(again!.port, certPem);
    assert(firstServed !== undefined && served.equals(firstServed), "a different certificate is served");
  });
  await check("restart: the banner has no Created-project line", async () => {
    await again!.waitFor(BANNER_END, 3_000);
    assert(!again!.output().includes("Created project"), "the project was created again");
  });
  await check("restart: data/flagsvc.db is still there", () => {
    assert(existsSync(dbFile) && statSync(dbFile).size > 0, "missing or empty");
  });
  await check("`flagsvc backup FILE` while running writes a SQLite file", async () => {
    const target = join(dir, "backup.db");
    const proc = Bun.spawn([binary, "backup", target], { cwd: dir, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    children.add(proc);
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    children.delete(proc);
    assert(code === 0, `exit code ${code}: ${(err || out).trim()}`);
    assert(existsSync(target), "no file written");
    const header = readFileSync(target).subarray(0, 16).toString("latin1");
    assert(header === "SQLite format 3\0", "not a SQLite file");
  });
  await check("SIGTERM stops the second run with exit code 0", async () => {
    const code = await stop(again!);
    assert(code === 0, `exit code ${code}`);
  });
}

try {
  await run();
} catch (e) {
  report(false, "smoke run", `unexpected error: ${e instanceof Error ? e.message : String(e)}`);
}
finish();
