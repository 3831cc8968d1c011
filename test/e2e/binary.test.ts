/**
 * End-to-end tests of the compiled binary: first start, restart, signals, TLS, configuration
 * errors, schema-version refusal, backup, behind-proxy mode, healthcheck and version.
 * Each test drives real processes through test/e2e/binary.ts.
 */
import { test, expect, beforeAll, afterAll } from "bun:test";
import { Database } from "bun:sqlite";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { baseEnv, binaryPath, cleanup, freePort, PACKAGE_VERSION, runBinary, selfSignedPem, startBinary, tempDir } from "./binary";
import { BANNER_END, plainHttpExchange, servedCertificate } from "../../scripts/lib/proc";

const CREATED_PROJECT = 'Created project "default" with environments development, staging, production.';
/** Per test: above the helper's own limits (15 s to start, 15 s to stop), so they report first. */
const T = 30_000;

beforeAll(async () => {
  await binaryPath();
}, 120_000);

afterAll(() => {
  cleanup();
});

const tlsFiles = (cwd: string) => ({
  db: join(cwd, "data", "flagsvc.db"),
  cert: join(cwd, "data", "tls", "cert.pem"),
  key: join(cwd, "data", "tls", "key.pem"),
});

/** Every table's schema and rows, as one comparable value. */
function dumpDatabase(file: string): unknown {
  const db = new Database(file, { readonly: true });
  try {
    const objects = db.query("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").all() as { type: string; name: string }[];
    const rows: Record<string, unknown[]> = {};
    for (const o of objects) if (o.type === "table") rows[o.name] = db.query(`SELECT * FROM "${o.name}" ORDER BY rowid`).all();
    return { objects, rows };
  } finally {
    db.close();
  }
}

// ---- first start, restart, signals ----------------------------------------------------------

let firstDir: string;
let firstCert: string;

test("first start creates the database, a TLS certificate with a 0600 key, and the default project", async () => {
  firstDir = tempDir();
  const files = tlsFiles(firstDir);
  const srv = await startBinary({ cwd: firstDir });
  await srv.waitFor(BANNER_END);

  expect(srv.scheme).toBe("https");
  expect(existsSync(files.db)).toBe(true);
  expect(statSync(files.db).mode & 0o777).toBe(0o600);
  expect(existsSync(files.cert)).toBe(true);
  expect(existsSync(files.key)).toBe(true);
  expect(statSync(files.key).mode & 0o777).toBe(0o600);
  expect(srv.stdout()).toContain(CREATED_PROJECT);

  firstCert = readFileSync(files.cert, "utf8");
  const res = await fetch(`${srv.url}/v1/health`, { tls: { ca: firstCert } });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ status: "ok", version: PACKAGE_VERSION, edition: "ce" });

  expect(await srv.stop("SIGTERM")).toBe(0);
}, T);

test("restart reuses the certificate and does not bootstrap again", async () => {
  const files = tlsFiles(firstDir);
  const srv = await startBinary({ cwd: firstDir });
  await srv.waitFor(BANNER_END);

  expect(readFileSync(files.cert, "utf8")).toBe(firstCert);
  const served = await servedCertificate(srv.port, firstCert);
  expect(served.equals(new X509Certificate(firstCert).raw)).toBe(true);
  expect(srv.stdout()).toContain("is ready");
  expect(srv.stdout()).not.toContain("Created project");
  expect(statSync(files.key).mode & 0o777).toBe(0o600);

  expect(await srv.stop()).toBe(0);
}, T);

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`${signal} stops the server gracefully with exit code 0`, async () => {
    const srv = await startBinary();
    const res = await fetch(`${srv.url}/v1/health`, { tls: { rejectUnauthorized: false } });
    expect(res.status).toBe(200);
    expect(await srv.stop(signal)).toBe(0);
    expect(srv.output()).toContain(`"signal":"${signal}"`);
    expect(srv.output()).toContain('"msg":"stopped"');
  }, T);
}

test("requests sent on open keep-alive connections right before SIGTERM are answered, not reset", async () => {
  const srv = await startBinary();
  const tls = { rejectUnauthorized: false };
  const burst = () => Promise.all(Array.from({ length: 16 }, () => fetch(`${srv.url}/v1/health`, { tls }).then((r) => r.status, (e: Error) => e.message)));
  expect(await burst()).toEqual(Array(16).fill(200)); // 16 connections, kept alive and idle
  const answers = burst();
  const exited = srv.stop("SIGTERM");
  expect(await answers).toEqual(Array(16).fill(200));
  expect(await exited).toBe(0);
}, T);

test("plain HTTP to the HTTPS port gets no HTTP answer, and the server keeps serving", async () => {
  const srv = await startBinary();
  const reply = await plainHttpExchange(srv.port);
  expect(reply.startsWith("HTTP/")).toBe(false);
  expect(reply).not.toContain("HTTP/1.1 ");
  let fetchFailed = false;
  try {
    await fetch(`http://127.0.0.1:${srv.port}/v1/health`, { signal: AbortSignal.timeout(3_000) });
  } catch {
    fetchFailed = true;
  }
  expect(fetchFailed).toBe(true);
  const ca = readFileSync(tlsFiles(srv.cwd).cert, "utf8");
  const res = await fetch(`${srv.url}/v1/health`, { tls: { ca } });
  expect(res.status).toBe(200);
  expect(await srv.stop()).toBe(0);
}, T);

// ---- configuration errors -------------------------------------------------------------------

interface BadConfig {
  name: string;
  args?: string[];
  env?: (dir: string) => Record<string, string>;
  /** Every string the single stderr line must contain. */
  names: string[];
}

const BAD_CONFIGS: BadConfig[] = [
  { name: "SVC_PORT=abc", env: () => ({ SVC_PORT: "abc" }), names: ["SVC_PORT", "--port", '"abc"'] },
  { name: "--port 70000", args: ["--port", "70000"], names: ["SVC_PORT", "--port", "70000"] },
  { name: "SVC_EDITION=gold", env: () => ({ SVC_EDITION: "gold" }), names: ["SVC_EDITION", "--edition", "gold"] },
  {
    name: "unreadable SVC_TLS_CERT (missing file) with SVC_TLS_KEY",
    env: (dir) => ({ SVC_TLS_CERT: join(dir, "no-such-cert.pem"), SVC_TLS_KEY: join(dir, "key.pem") }),
    names: ["SVC_TLS_CERT", "--tls-cert", "no-such-cert.pem"],
  },
  {
    name: "unreadable SVC_TLS_CERT (a folder) with SVC_TLS_KEY",
    env: (dir) => ({ SVC_TLS_CERT: join(dir, "a-folder"), SVC_TLS_KEY: join(dir, "key.pem") }),
    names: ["SVC_TLS_CERT", "--tls-cert", "a-folder"],
  },
  {
    name: "SVC_TLS_CERT without SVC_TLS_KEY",
    env: (dir) => ({ SVC_TLS_CERT: join(dir, "cert.pem") }),
    names: ["SVC_TLS_KEY", "--tls-key", "SVC_TLS_CERT"],
  },
  {
    name: "SVC_TLS_KEY of another certificate",
    env: (dir) => ({ SVC_TLS_CERT: join(dir, "cert.pem"), SVC_TLS_KEY: join(dir, "other-key.pem") }),
    names: ["SVC_TLS_KEY", "--tls-key", "other-key.pem", "is not the private key of the certificate"],
  },
  { name: "SVC_HOST=999.1.1.1", env: () => ({ SVC_HOST: "999.1.1.1" }), names: ["SVC_HOST", "--host", "999.1.1.1"] },
  { name: "an unknown flag", args: ["--no-such-flag", "1"], names: ["--no-such-flag"] },
];

for (const bad of BAD_CONFIGS) {
  test(`bad configuration (${bad.name}): exit 2, one stderr line naming it, no data dir`, async () => {
    const dir = tempDir();
    // Valid PEM files next to the bad value, so only the value under test is wrong.
    const pem = await selfSignedPem();
    writeFileSync(join(dir, "cert.pem"), pem.cert);
    writeFileSync(join(dir, "key.pem"), pem.key, { mode: 0o600 });
    writeFileSync(join(dir, "other-key.pem"), (await selfSignedPem()).key, { mode: 0o600 });
    mkdirSync(join(dir, "a-folder"));
    // SVC_PORT=0 so that, should a bad value be accepted, the server starts somewhere harmless
    // (and the test fails on its exit code); a case's own SVC_PORT or --port wins over it.
    const r = await runBinary(bad.args ?? [], { cwd: dir, env: { SVC_PORT: "0", ...bad.env?.(dir) }, timeoutMs: 10_000 });
    expect(r.exitCode).toBe(2);
    const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.startsWith("flagsvc: ")).toBe(true);
    for (const name of bad.names) expect(lines[0]).toContain(name);
    expect(r.stdout).not.toContain("listening on");
    expect(existsSync(join(dir, "data"))).toBe(false); // refused before the data dir is touched
  }, T);
}

// ---- a database from a newer version --------------------------------------------------------

test("a database holding an unknown migration is refused by serve and migrate, and left unchanged", async () => {
  const dir = tempDir();
  const created = await runBinary(["migrate"], { cwd: dir });
  expect(created.exitCode).toBe(0);
  const file = join(dir, "data", "flagsvc.db");

  const db = new Database(file);
  db.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)", ["f".repeat(64), 4_102_444_800_000]);
  db.close();
  const before = dumpDatabase(file);
  const bytesBefore = readFileSync(file);
  expect(JSON.stringify(before)).toContain("f".repeat(64));

  for (const args of [["serve", "--port", "0"], ["migrate"]]) {
    const r = await runBinary(args, { cwd: dir, timeoutMs: 10_000 });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("newer flagsvc");
    expect(r.stdout).not.toContain("listening on");
    expect(dumpDatabase(file)).toEqual(before);
    expect(readFileSync(file).equals(bytesBefore)).toBe(true);
  }
}, T);

// ---- backup ---------------------------------------------------------------------------------

test("backup while the server runs writes a SQLite copy holding the default project", async () => {
  const dir = tempDir();
  const srv = await startBinary({ cwd: dir });
  await srv.waitFor(BANNER_END);

  const r = await runBinary(["backup", "copy.db"], { cwd: dir });
  expect(r.exitCode).toBe(0);
  const copy = join(dir, "copy.db");
  expect(existsSync(copy)).toBe(true);
  expect(statSync(copy).mode & 0o777).toBe(0o600); // like the database: it holds secrets

  const db = new Database(copy, { readonly: true });
  try {
    expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    const tables = (db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
    expect(tables).toContain("projects");
    const projects = db.query("SELECT slug FROM projects").all() as { slug: string }[];
    expect(projects.map((p) => p.slug)).toContain("default");
    const envs = db.query("SELECT e.slug FROM environments e JOIN projects p ON p.id = e.project_id WHERE p.slug = 'default' ORDER BY e.slug").all();
    expect(envs).toEqual([{ slug: "development" }, { slug: "production" }, { slug: "staging" }]);
  } finally {
    db.close();
  }

  // It never overwrites.
  const again = await runBinary(["backup", "copy.db"], { cwd: dir });
  expect(again.exitCode).not.toBe(0);

  // A folder that does not exist: one line, exit 1, no stack trace.
  const nowhere = await runBinary(["backup", join(dir, "missing", "x.db")], { cwd: dir });
  expect(nowhere.exitCode).toBe(1);
  expect(nowhere.stderr.trim().split("\n")).toHaveLength(1);
  expect(nowhere.stderr).toMatch(/^flagsvc: cannot create .*ENOENT/);

  // The server is unaffected.
  const res = await fetch(`${srv.url}/v1/health`, { tls: { rejectUnauthorized: false } });
  expect(res.status).toBe(200);
  expect(await srv.stop()).toBe(0);
}, T);

// ---- behind a proxy, healthcheck ------------------------------------------------------------

test("behind a proxy: plain HTTP, 403 HTTPS_REQUIRED without X-Forwarded-Proto, 200 with it; healthcheck exits 0", async () => {
  const dir = tempDir();
  const srv = await startBinary({ cwd: dir, args: ["--behind-proxy"] });
  expect(srv.scheme).toBe("http");
  expect(existsSync(join(dir, "data", "tls"))).toBe(false);

  const denied = await fetch(`${srv.url}/v1/health`);
  expect(denied.status).toBe(403);
  expect(((await denied.json()) as { error: string }).error).toBe("HTTPS_REQUIRED");

  const allowed = await fetch(`${srv.url}/v1/health`, { headers: { "X-Forwarded-Proto": "https" } });
  expect(allowed.status).toBe(200);
  expect(((await allowed.json()) as { status: string }).status).toBe("ok");

  const viaEnv = await runBinary(["healthcheck", "--port", String(srv.port)], { cwd: dir, env: { SVC_BEHIND_PROXY: "true" } });
  expect(viaEnv.exitCode).toBe(0);
  const viaFlag = await runBinary(["healthcheck", "--port", String(srv.port), "--behind-proxy"], { cwd: dir });
  expect(viaFlag.exitCode).toBe(0);

  expect(await srv.stop()).toBe(0);
}, T);

test("healthcheck exits 0 against the TLS server and 1 when nothing listens", async () => {
  const srv = await startBinary();
  const up = await runBinary(["healthcheck", "--port", String(srv.port)], { cwd: srv.cwd });
  expect(up.exitCode).toBe(0);
  expect(up.stdout).toContain("200");
  expect(await srv.stop()).toBe(0);

  const port = await freePort();
  const down = await runBinary(["healthcheck", "--port", String(port)], { timeoutMs: 10_000 });
  expect(down.exitCode).toBe(1);
  const downProxy = await runBinary(["healthcheck", "--port", String(port), "--behind-proxy"], { timeoutMs: 10_000 });
  expect(downProxy.exitCode).toBe(1);
}, T);

// ---- version --------------------------------------------------------------------------------

// ---- one process per data dir, one per port ----------------------------------------------------

test("a second server or a migrate on a data dir in use is refused; a crash leaves no stale lock", async () => {
  const dir = tempDir();
  const first = await startBinary({ cwd: dir });
  await first.waitFor(BANNER_END);

  const second = await runBinary(["serve", "--port", "0"], { cwd: dir });
  expect(second.exitCode).toBe(1);
  expect(second.stderr.trim()).toMatch(/^flagsvc: another flagsvc process is using .*data.*; stop it first$/);
  const migrating = await runBinary(["migrate"], { cwd: dir });
  expect(migrating.exitCode).toBe(1);
  expect(migrating.stderr).toContain("another flagsvc process is using");
  // backup reads a consistent snapshot and needs no lock
  expect((await runBinary(["backup", "b.db"], { cwd: dir })).exitCode).toBe(0);

  // kill -9: the kernel drops the lock with the process
  first.proc.kill("SIGKILL");
  await first.proc.exited;
  const again = await startBinary({ cwd: dir });
  await again.waitFor(BANNER_END);
  expect(again.output()).not.toContain(CREATED_PROJECT);
  expect(await again.stop()).toBe(0);
  expect((await runBinary(["migrate"], { cwd: dir })).exitCode).toBe(0);
}, T);

test("a port already in use stops the second server with exit 1; a first start that fails so creates no credentials, so the next start shows them", async () => {
  const first = await startBinary({});
  const cwd = tempDir();
  const second = await runBinary(["serve", "--port", String(first.port)], { cwd });
  expect(second.exitCode).toBe(1);
  expect(second.stderr).toContain(`cannot listen on 0.0.0.0:${first.port}`);
  // The same data dir on a free port: this is the first start that runs, and its banner has them.
  const retried = await startBinary({ cwd });
  await retried.waitFor(BANNER_END);
  expect(retried.output()).toMatch(/^\s*Admin login: +\S+ \/ \S+\s*$/m);
  expect(retried.output()).toMatch(/^\s*Admin key: +svc_admin_[A-Za-z0-9]{32,}\s*$/m);
  expect(await retried.stop()).toBe(0);
  const res = await fetch(`${first.url}/v1/health`, { tls: { rejectUnauthorized: false } });
  expect(res.status).toBe(200);
  expect(await first.stop()).toBe(0);
}, T);

test("a body declared far over 1 MiB gets the JSON 413 with a request id, unread", async () => {
  const srv = await startBinary({});
  const answer = await new Promise<string>((done, fail) => {
    let received = "";
    const socket = tlsConnect({ host: "127.0.0.1", port: srv.port, rejectUnauthorized: false }, () => {
      socket.write(
        "POST /v1/health HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200000000\r\n\r\n{\"a\":",
      );
    });
    socket.on("data", (d) => {
      received += d.toString("latin1");
      if (received.includes("\r\n\r\n") && received.includes("}")) {
        socket.destroy();
        done(received);
      }
    });
    socket.on("error", fail);
    setTimeout(() => done(received), 5_000);
  });
  expect(answer).toStartWith("HTTP/1.1 413");
  expect(answer.toLowerCase()).toContain("x-request-id:");
  expect(answer).toContain('"error":"PAYLOAD_TOO_LARGE"');
  expect(await srv.stop()).toBe(0);
}, T);

test("TLS: 1.3, or 1.2 with forward-secret AEAD suites only (CBC-SHA1 suites and TLS 1.1 refused)", async () => {
  const srv = await startBinary({});
  const handshake = (options: { ciphers?: string; minVersion?: "TLSv1.1" | "TLSv1.2" | "TLSv1.3"; maxVersion?: "TLSv1.1" | "TLSv1.2" | "TLSv1.3" }) =>
    new Promise<string>((done) => {
      const socket = tlsConnect({ host: "127.0.0.1", port: srv.port, rejectUnauthorized: false, ...options }, () => {
        done(`${socket.getProtocol()} ${socket.getCipher().name}`);
        socket.destroy();
      });
      socket.on("error", () => done("refused"));
    });
  expect(await handshake({ maxVersion: "TLSv1.2", ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256" })).toBe("TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256");
  expect(await handshake({ maxVersion: "TLSv1.2", ciphers: "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA" })).toBe("refused");
  expect(await handshake({ minVersion: "TLSv1.1", maxVersion: "TLSv1.1" })).toBe("refused");
  expect(await handshake({})).toStartWith("TLSv1.3 ");
  expect(await srv.stop()).toBe(0);
}, T);

test("healthcheck without a real port is a usage error", async () => {
  const r = await runBinary(["healthcheck", "--port", "0"]);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("healthcheck needs the server's port");
}, T);

test("version prints flagsvc and the package.json version", async () => {
  const r = await runBinary(["version"]);
  expect(r.exitCode).toBe(0);
  expect(r.stdout).toBe(`flagsvc ${PACKAGE_VERSION}\n`);
  expect(r.stderr).toBe("");
}, T);

test("a closed standard output (flagsvc serve | head) does not stop the server nor print a trace", async () => {
  const dir = tempDir();
  const proc = Bun.spawn([await binaryPath(), "serve", "--data-dir", join(dir, "data"), "--port", "0", "--host", "127.0.0.1"], {
    env: baseEnv(),
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    const reader = proc.stdout.getReader();
    let out = "";
    let port: string | undefined;
    while (port === undefined) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`stdout ended before the server listened: ${out}`);
      out += new TextDecoder().decode(value);
      port = /listening on https:\/\/[^:]+:(\d+)/.exec(out)?.[1];
    }
    await reader.cancel(); // the reader is gone: every later write to stdout fails with EPIPE
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`https://127.0.0.1:${port}/v1/health`, { tls: { rejectUnauthorized: false } });
      expect(res.status).toBe(200); // each request logs a line at info
      await Bun.sleep(20);
    }
  } finally {
    proc.kill("SIGTERM");
  }
  expect(await proc.exited).toBe(0);
  expect(await new Response(proc.stderr).text()).toBe("");
}, T);

test("each command's --help lists the configuration options it reads, with their defaults", async () => {
  const optionsOf = (text: string) => [...text.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
  const health = await runBinary(["healthcheck", "--help"]);
  expect(health.exitCode).toBe(0);
  expect(health.stdout).toContain("Usage: flagsvc healthcheck [--port PORT] [--host HOST] [--behind-proxy]");
  expect(optionsOf(health.stdout)).toEqual(["--host", "--port", "--behind-proxy"]);
  const migrate = await runBinary(["migrate", "--help"]);
  expect(optionsOf(migrate.stdout)).toEqual(["--data-dir", "--database-url", "--database-ca-file"]);
  const serve = await runBinary(["serve", "--help"]);
  expect(optionsOf(serve.stdout)).toContain("--tls-cert");
  expect(serve.stdout).toContain("(default: eval:10000,test:1000,mgmt:500,full:500,client:10000,admin:1000,user:1000,anonymous:300)");
  expect(serve.stdout).not.toContain("installed plugins"); // not built yet
}, T);
