/**
 * A private PostgreSQL for tests: one cluster per test process, in a temp dir, started on first
 * use and stopped when the process exits; `createDatabase()` gives a fresh, empty database's
 * URL on each call. Suites skip when `pgAvailable()` is false (no `initdb` on PATH).
 *
 * `FLAGSVC_TEST_PG_URL` (a superuser's URL, e.g. from CI's own cluster) is used instead of a
 * private cluster when set: the databases are created there.
 *
 * How the cluster is started, and why: initdb refuses to run as root, and tests here (and in CI
 * containers) often run as root. So, as root, initdb and pg_ctl run as the `postgres` user
 * (Debian's package creates it) through `runuser -u postgres --`; when that user does not
 * exist, a dedicated system user `flagsvc-pg` is created once with `useradd --system`. The
 * temp dir is handed to that user (chown). As any other user they run as that user directly.
 * A detached watchdog stops the cluster and removes the dir once the test process is gone.
 * The server listens on 127.0.0.1 on a free port, with its Unix socket in the temp dir (`-k`):
 * nothing of the machine's own PostgreSQL is touched. Authentication: trust (local tests only).
 */
import { spawnSync } from "node:child_process";
import { chownSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { freePort } from "../scripts/lib/proc";

const PG_BIN = "/usr/lib/postgresql/15/bin";

function which(cmd: string): string | null {
  const found = Bun.which(cmd, { PATH: `${process.env.PATH ?? ""}:${PG_BIN}` });
  return found ?? null;
}

/** True when tests can have a PostgreSQL: an external URL is given, or initdb and pg_ctl are installed. */
export function pgAvailable(): boolean {
  return Boolean(process.env.FLAGSVC_TEST_PG_URL) || (which("initdb") !== null && which("pg_ctl") !== null);
}

/** The command prefix that runs a PostgreSQL binary as a non-root user, and that user's uid/gid (null: ourselves). */
function runAs(): { prefix: string[]; uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (user: string) => spawnSync("id", ["-u", user], { encoding: "utf8" });
  let user = "postgres";
  if (id(user).status !== 0) {
    user = "flagsvc-pg";
    if (id(user).status !== 0) {
      const made = spawnSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user], { encoding: "utf8" });
      if (made.status !== 0 && id(user).status !== 0) throw new Error(`test/pg.ts: cannot create user ${user}: ${made.stderr}`);
    }
  }
  const uid = Number(id(user).stdout.trim());
  const gid = Number(spawnSync("id", ["-g", user], { encoding: "utf8" }).stdout.trim());
  return { prefix: ["runuser", "-u", user, "--"], uid, gid };
}

interface Cluster {
  /** A superuser's URL on the `postgres` database. */
  adminUrl: string;
  /** Stops the server (fast: connections are cut), waits `downMs`, starts it again on the same port; absent on an external cluster. */
  restart?: (downMs: number) => Promise<void>;
}

let started: Promise<Cluster> | undefined;
/** The cluster of the tests that restart PostgreSQL: always a private one, never CI's or an external one. */
let restartable: Promise<Cluster> | undefined;

/** The shared cluster (FLAGSVC_TEST_PG_URL's when set), or with `own` a private one that tests may restart. */
function cluster(own = false): Promise<Cluster> {
  return own ? (restartable ??= startCluster(true)) : (started ??= startCluster(false));
}

async function startCluster(own: boolean): Promise<Cluster> {
  const external = own ? undefined : process.env.FLAGSVC_TEST_PG_URL;
  if (external) return { adminUrl: external };
  const dir = mkdtempSync(join(tmpdir(), "flagsvc-pg-"));
  const as = runAs();
  if (as) chownSync(dir, as.uid, as.gid);
  const run = (args: string[]) => {
    const [cmd, ...rest] = args;
    const full = [...(as?.prefix ?? []), which(cmd!)!, ...rest];
    const r = spawnSync(full[0]!, full.slice(1), { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`test/pg.ts: ${full.join(" ")} failed: ${r.stderr || r.stdout}`);
  };
  const data = join(dir, "data");
  run(["initdb", "-D", data, "--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  // fsync off: a test cluster is thrown away, durability buys nothing here.
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  run(["pg_ctl", "-D", data, "-o", serverOptions, "-l", join(dir, "log"), "-w", "start"]);
  // Stopped once this process is gone, however it ends: `bun test` does not emit "exit", and a
  // killed run emits nothing. A detached watchdog polls this process and stops the cluster.
  const stop = [...(as?.prefix ?? []), which("pg_ctl")!, "-D", data, "stop", "-m", "immediate"].map((a) => `'${a}'`).join(" ");
  const watchdog = `while kill -0 ${process.pid} 2>/dev/null; do sleep 0.5; done; ${stop} >/dev/null 2>&1; rm -rf '${dir}'`;
  Bun.spawn(["sh", "-c", watchdog], { stdio: ["ignore", "ignore", "ignore"], detached: true }).unref();
  // Asynchronous (not spawnSync): the test's own load keeps running while the server is down.
  const pgCtl = async (...args: string[]) => {
    const proc = Bun.spawn([...(as?.prefix ?? []), which("pg_ctl")!, "-D", data, "-w", ...args], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`test/pg.ts: pg_ctl ${args.join(" ")} failed: ${err || out}`);
  };
  const restart = async (downMs: number) => {
    await pgCtl("stop", "-m", "fast");
    await Bun.sleep(downMs);
    await pgCtl("-o", serverOptions, "-l", join(dir, "log"), "start");
  };
  return { adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`, restart };
}

/** True when tests may restart PostgreSQL: initdb and pg_ctl are installed (a private cluster, whatever FLAGSVC_TEST_PG_URL says). */
export function pgRestartable(): boolean {
  return which("initdb") !== null && which("pg_ctl") !== null;
}

/**
 * Restarts the private cluster of `createDatabase({ restartable: true })`: `pg_ctl stop -m fast`
 * (every connection is cut), down for `downMs`, then `pg_ctl start` (the same port and options).
 */
export async function restartCluster(downMs = 0): Promise<void> {
  const { restart } = await cluster(true);
  await restart!(downMs);
}

let counter = 0;

/** Runs `statement` on a cluster's `postgres` database as its superuser (the shared cluster, or with `own` the restartable one; started on first call). */
async function onCluster(statement: (admin: SQL) => Promise<unknown>, own = false): Promise<URL> {
  const { adminUrl } = await cluster(own);
  const admin = new SQL(adminUrl, { max: 1 });
  try {
    await statement(admin);
  } finally {
    await admin.close();
  }
  return new URL(adminUrl);
}

/**
 * A fresh database on the test cluster (started on first call): its URL. Empty, or a copy of
 * `template` (the name of a database no one is connected to: CREATE DATABASE … TEMPLATE copies
 * its files, much faster than migrating again). `restartable`: on a private cluster of its own,
 * which `restartCluster` may stop and start (see `pgRestartable`).
 */
export async function createDatabase(opts: { template?: string; restartable?: boolean } = {}): Promise<string> {
  const name = `flagsvc_test_${process.pid}_${++counter}`;
  const url = await onCluster((admin) => admin.unsafe(`CREATE DATABASE "${name}"${opts.template ? ` TEMPLATE "${opts.template}"` : ""}`), opts.restartable);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The database name of a URL that createDatabase gave. */
export const databaseName = (url: string): string => decodeURIComponent(new URL(url).pathname.slice(1));

/** Drops a database that createDatabase made (on the shared cluster), ending its connections first (WITH (FORCE), PostgreSQL 13+). */
export async function dropDatabase(url: string): Promise<void> {
  await onCluster((admin) => admin.unsafe(`DROP DATABASE IF EXISTS "${databaseName(url)}" WITH (FORCE)`));
}
