/**
 * Test fixtures: a real app over a real database (never a mock of our storage): a SQLite file in
 * a temp dir, or with `FLAGSVC_TEST_BACKEND=postgres` a fresh PostgreSQL database (test/pg.ts),
 * a logger whose lines the test can read, and a clock the test moves.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { bootstrap } from "../src/bootstrap";
import { loadConfig } from "../src/config";
import type { AppContext } from "../src/context";
import type { Clock } from "../src/lib/clock";
import { createLogger } from "../src/lib/log";
import type { Role, Scope } from "../src/http/access";
import { iso } from "../src/lib/clock";
import { newId } from "../src/lib/ids";
import { generateSecret } from "../src/lib/secrets";
import type { ChangeLogRow } from "../src/modules/audit/store";
import { describe, spyOn, test } from "bun:test";
import { SQL } from "bun";
import { SYSTEM, type Author, type ChangeDraft, type ChangeEntry } from "../src/changes/entry";
import type { Tx } from "../src/changes/log";
import { migratePg } from "../src/db/pg/migrate";
import { createDatabase, databaseName, dropDatabase } from "./pg";
import { main } from "../src/main";
import { createApp, createContext, createServices, dispatcher, type App, type ContextDeps, type Services } from "../src/server";
import { SqliteChangeLog } from "../src/changes/sqlite";
import { PgChangeLog } from "../src/changes/pg";
import type { Db, Store } from "../src/db/client";
import type { Database } from "bun:sqlite";

export function tempDir(prefix = "flagsvc-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export class TestClock implements Clock {
  constructor(public ms = Date.parse("2026-11-22T10:00:00.000Z")) {}
  now() {
    return this.ms;
  }
  advance(ms: number) {
    this.ms += ms;
  }
}

/** The backend testApp runs on: PostgreSQL with `FLAGSVC_TEST_BACKEND=postgres` (`npm run test:http:pg`), else SQLite. */
export const onPostgres = process.env.FLAGSVC_TEST_BACKEND === "postgres";

/**
 * A test (`sqliteOnly`) or a describe block (`describeSqliteOnly`) that only means something on
 * SQLite (raw rows, its file, its migrations): skipped when the suite runs on PostgreSQL.
 */
export const sqliteOnly = onPostgres ? test.skip : test;
export const describeSqliteOnly = onPostgres ? describe.skip : describe;

let pgTemplate: Promise<string> | undefined;
let pgNext: Promise<string> | undefined;

/**
 * A fresh, migrated PostgreSQL database: a copy of a template migrated once per test process
 * (CREATE DATABASE … TEMPLATE: no migration to run). The next one is created meanwhile, while
 * the test runs (a copy takes a few hundred ms on this machine).
 */
async function pgTestDatabase(): Promise<string> {
  pgTemplate ??= (async () => {
    const url = await createDatabase();
    const sql = new SQL(url, { max: 1 });
    try {
      await migratePg(sql);
    } finally {
      await sql.close();
    }
    return databaseName(url);
  })();
  const template = await pgTemplate;
  const url = await (pgNext ?? createDatabase({ template }));
  pgNext = createDatabase({ template });
  pgNext.catch(() => {}); // a failure surfaces when it is taken
  return url;
}

/** What tests drive: the server's request handler (native routes, else the app). */
export type Handler = { handle(request: Request): Promise<Response> };

export interface TestApp {
  app: Handler;
  ctx: AppContext;
  /** The app's SQLite database (`sqliteOf(ctx)`), for tests that seed or read raw rows: SQLite-only (throws on PostgreSQL). */
  readonly sqlite: Database;
  readonly db: Db;
  /** The app's services, for fixtures (write with the `SYSTEM` author of src/changes/entry.ts). */
  services: Services;
  clock: TestClock;
  dir: string;
  /** Every log line written so far, parsed. */
  logs(): Record<string, unknown>[];
  request(method: string, path: string, init?: { body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  /** Closes the app and removes its data dir (and its PostgreSQL database: resolves once dropped). */
  close(): Promise<void>;
}

/** A bootstrapped app on a fresh data dir (and a fresh PostgreSQL database when `onPostgres`). `env` holds SVC_* variables. */
/** `deps`: what else the context is given (`recordsBusy`, say). */
export async function testApp(env: Record<string, string> = {}, extend?: (app: App) => Handler, deps: Pick<ContextDeps, "recordsBusy"> = {}): Promise<TestApp> {
  const dir = tempDir();
  // A small pool: a test makes few concurrent queries, and a run opens hundreds of apps.
  const pg = onPostgres ? { SVC_DATABASE_URL: await pgTestDatabase(), SVC_DATABASE_POOL_SIZE: "4" } : {};
  const config = loadConfig({ SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "info", SVC_LOG_FORMAT: "json", ...pg, ...env });
  let written = "";
  const log = createLogger({ level: config.logLevel, format: "json", write: (chunk) => (written += chunk) });
  const clock = new TestClock();
  const ctx = await createContext(config, { log, clock, ...deps });
  await bootstrap(ctx);
  const services = createServices(ctx);
  const base = createApp(ctx, services);
  // As the listening server dispatches: Bun's native routes first, then the app.
  const app: Handler = { handle: dispatcher(extend ? extend(base) : base) };
  return {
    app,
    ctx,
    get sqlite() {
      return sqliteOf(ctx).sqlite;
    },
    get db() {
      return sqliteOf(ctx).db;
    },
    services,
    clock,
    dir,
    logs() {
      log.flush();
      return written.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    },
    request(method, path, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === "string" ? init.body : JSON.stringify(init.body);
        headers["content-type"] ??= "application/json";
      }
      return app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
    },
    async close() {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
      // The pool closes in the background; FORCE ends what it still holds.
      if (pg.SVC_DATABASE_URL) await dropDatabase(pg.SVC_DATABASE_URL).catch(() => {});
    },
  };
}

/** Waits for the logger's setImmediate flush. */
export const tick = () => new Promise((r) => setImmediate(r));

/**
 * The SQLite database under a context, for the SQLite-only tests (`sqliteOnly`) that seed or read
 * raw rows (production code reaches the database through the stores only; fixtures do too).
 */
export function sqliteOf(ctx: AppContext): Store {
  const log: unknown = ctx.changeLog;
  if (!(log instanceof SqliteChangeLog)) throw new Error("raw SQLite on PostgreSQL: mark this test sqliteOnly (test/helpers.ts), or seed through the stores");
  return { sqlite: log.store.sqlite, db: log.store.db };
}

/**
 * Raw SQL on either backend (a statement both dialects read alike, `?` for each parameter), for
 * what no API or store shows or does (a delivery made to look failed, say): a whole table (what a refused write must leave as it was) or its size. Compare their
 * results on one backend only: the dialects' values differ in shape (booleans, JSON as text or
 * parsed).
 */
export async function rawRows(ctx: AppContext, query: string, params: (string | number | null)[] = []): Promise<Record<string, unknown>[]> {
  const log: unknown = ctx.changeLog;
  let n = 0;
  if (log instanceof PgChangeLog) return [...(await log.store.sql.unsafe(query.replace(/\?/g, () => `$${++n}`), params))];
  return sqliteOf(ctx).sqlite.query(query).all(...params) as Record<string, unknown>[];
}

/** The database's own tables (not the migrator's), by name. */
export const tableNames = async (ctx: AppContext): Promise<string[]> =>
  (
    await rawRows(
      ctx,
      onPostgres ? "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1" : "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
  )
    .map((r) => String(r.name))
    .filter((name) => !name.startsWith("__drizzle"));

/** Every row of `table`, each as JSON, sorted. */
export const tableRows = async (ctx: AppContext, table: string): Promise<string[]> => (await rawRows(ctx, `SELECT * FROM "${table}"`)).map((r) => JSON.stringify(r)).sort();

/** How many rows `table` holds (`table` may end with a WHERE clause). */
export const countRows = async (ctx: AppContext, table: string): Promise<number> => Number((await rawRows(ctx, `SELECT count(*) AS n FROM ${table}`))[0]!.n);

/**
 * Rows written through a store inside a commit that appends no entry (`SYSTEM` as its author),
 * as a fixture seeds: the change log stays as the test left it.
 */
const seed = (ctx: AppContext, write: (tx: Tx) => Promise<void>) => ctx.changeLog.commit(SYSTEM, async (tx) => ({ result: await write(tx), changes: [] }));

/**
 * Appends entries to the change log through its commit (either backend), as `author` wrote them
 * at `at` (the test clock is set there for the commit, then put back), for the audit log's paging,
 * filter and retention edge cases: the positions given, in order.
 */
export async function appendEntries(h: Pick<TestApp, "ctx" | "clock">, drafts: ChangeDraft[], author: Author = SYSTEM, at?: string): Promise<number[]> {
  const mark = await lastPosition(h.ctx);
  const now = h.clock.ms;
  if (at !== undefined) h.clock.ms = Date.parse(at);
  try {
    // Commits of at most 1,000 entries: PostgreSQL takes at most 65,535 parameters a statement.
    for (let i = 0; i < drafts.length; i += 1000) await h.ctx.changeLog.commit(author, async () => ({ result: undefined, changes: drafts.slice(i, i + 1000) }));
  } finally {
    h.clock.ms = now;
  }
  return (await entriesAfter(h.ctx, mark)).map((e) => e.position);
}

/** Stores an admin key (through its store, no entry) and returns its secret, once the registry knows it. */
export async function seedAdminKey(ctx: AppContext, name = "test admin"): Promise<string> {
  const { secret, hash, keyPrefix } = generateSecret("svc_admin_");
  await seed(ctx, (tx) => ctx.stores.adminKeys.insert(tx, { id: newId("key"), name, keyHash: hash, keyPrefix, createdAt: iso(ctx.clock.now()), lastUsedAt: null }));
  await ctx.credentials.reload();
  return secret;
}

/** Stores a project API key (through its store, no entry) and returns its id and secret, once the registry knows it. */
export async function seedApiKey(ctx: AppContext, scope: Scope, projectSlug = "default", environment = "development"): Promise<{ id: string; secret: string }> {
  const project = (await ctx.stores.projects.bySlug(projectSlug))!;
  const env = project.environments.find((e) => e.slug === environment)!;
  const { secret, hash, keyPrefix } = generateSecret(`svc_sk_${scope}_`);
  const id = newId("key");
  await seed(ctx, (tx) => ctx.stores.apiKeys.insert(tx, { id, projectId: project.id, environmentId: env.id, name: `${scope} key`, scope, keyHash: hash, keyPrefix, createdAt: iso(ctx.clock.now()) }));
  await ctx.credentials.reload();
  return { id, secret };
}

/** A Pro app whose integrations may send to loopback (a local receiver), with an admin key and a `full` key of production. */
export async function integrationsApp(adminName?: string): Promise<{ h: TestApp; admin: Record<string, string>; sdk: Record<string, string> }> {
  const h = await testApp({ SVC_EDITION: "pro", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
  return { h, admin: bearer(await seedAdminKey(h.ctx, adminName)), sdk: bearer((await seedApiKey(h.ctx, "full", "default", "production")).secret) };
}

export const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

/** Stores a user (through its store, no entry; `passwordHash`: "x" unless given) and returns its id, once the registry knows it. */
export async function seedUser(ctx: AppContext, role: Role, email?: string, passwordHash = "x"): Promise<string> {
  const id = newId("usr");
  const now = iso(ctx.clock.now());
  await seed(ctx, (tx) => ctx.stores.users.insert(tx, { id, email: email ?? `${id}@example.com`, passwordHash, role, createdAt: now, updatedAt: now, tokensValidAfter: null }));
  await ctx.credentials.reload();
  return id;
}

/** A login token for a new user of this role, as the login route would issue it. */
export async function userToken(ctx: AppContext, role: Role): Promise<Record<string, string>> {
  const id = await seedUser(ctx, role);
  return bearer((await ctx.credentials.issueToken(id, role)).token);
}

/** A chunked request body that never ends before 8 MiB; `pulled()` tells how much was read. */
export function endlessBody(): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled += chunk.byteLength;
      if (pulled > 8 * 1024 * 1024) c.close();
      else c.enqueue(chunk);
    },
  });
  return { stream, pulled: () => pulled };
}

/** The body of a response expected to have `status` (the body text is in the error otherwise); `{}` when empty. */
export async function json(res: Response, status: number): Promise<Record<string, any>> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return text === "" ? {} : (JSON.parse(text) as Record<string, any>);
}

/** A timestamp as the API writes it: ISO 8601 UTC with milliseconds (decisions §2). */
export const ISO_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

export interface ServerAnswer {
  status: number;
  headers: Headers;
  body: any;
}

/**
 * A JSON request to a listening server (the binary, or startServer) over HTTPS with a
 * self-signed certificate: status, headers and the parsed body, whatever the status.
 */
export async function callServer(
  url: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<ServerAnswer> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(opts.key !== undefined ? { authorization: `Bearer ${opts.key}` } : {}),
      ...(opts.body !== undefined ? { "content-type": "application/json" } : {}),
      ...opts.headers,
    },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    tls: { rejectUnauthorized: false },
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** The change log's last position (0 when empty). */
export const lastPosition = (ctx: AppContext): Promise<number> => ctx.stores.audit.position();

/** An entry as its `change_log` row reads (`changes` as JSON text). */
const rowOf = (e: ChangeEntry): ChangeLogRow => ({
  position: e.position,
  id: e.id,
  at: e.at,
  actor_type: e.actor.type,
  actor_id: e.actor.id,
  actor_label: e.actor.label,
  request_id: e.requestId,
  project_id: e.project?.id ?? null,
  project_slug: e.project?.slug ?? null,
  environment: e.environment,
  resource_type: e.resource.type,
  resource_id: e.resource.id,
  resource_key: e.resource.key,
  action: e.action,
  changes: JSON.stringify(e.changes),
});

/** The change-log rows appended after `position`, in commit order (read through the audit store). */
export async function entriesAfter(ctx: AppContext, position: number): Promise<ChangeLogRow[]> {
  const rows: ChangeLogRow[] = [];
  for (let after: number | null = position; after !== null; ) {
    const page = await ctx.stores.audit.after({}, after, 1000);
    rows.push(...page.entries.map(rowOf));
    after = page.scannedTo;
  }
  return rows;
}

/**
 * Runs `flagsvc ARGS --data-dir DIR` in this process, as the CLI runs beside a server on the same
 * data dir: its exit code and what it printed on each stream.
 */
export async function runCli(dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const log = spyOn(console, "log").mockImplementation((...a: unknown[]) => void (stdout += `${a.join(" ")}\n`));
  const error = spyOn(console, "error").mockImplementation((...a: unknown[]) => void (stderr += `${a.join(" ")}\n`));
  try {
    return { code: await main([...args, "--data-dir", dataDir]), stdout, stderr };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

/** `runCli` beside a test app: on its data dir, and on its PostgreSQL database (`--database-url`) when it has one. */
export function runCliBeside(h: Pick<TestApp, "ctx" | "dir">, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const url = h.ctx.config.databaseUrl?.url;
  return runCli(h.dir, ...args, ...(url === undefined ? [] : ["--database-url", url]));
}

/**
 * Whether the app has taken in a change another process (the CLI) made to credentials since the
 * last call: its poll (the credentials-reload job) finds it, or on PostgreSQL the change feed
 * brought the entry first (a reload since the last call: then the poll has nothing left).
 */
export function externalChanges(ctx: AppContext): () => Promise<boolean> {
  let reloads = 0;
  ctx.credentials.onReload(() => reloads++);
  return async () => {
    const polled = await ctx.credentials.pollExternalChanges();
    const fed = reloads > 0;
    reloads = 0;
    return polled || (onPostgres && fed);
  };
}

/**
 * Polls `probe` (every 20 ms) until it gives a value other than undefined or false, and resolves
 * to it; throws "timed out waiting for WHAT" after `timeoutMs`.
 */
export async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

// ---- plugin packages that reach outside their folder (decisions §11) -------------------------

const ECHO_FIXTURE = join(import.meta.dir, "fixtures/plugins/echo-1.0.0");

/**
 * The echo fixture package copied to `dir`, plugin.json's `fields` changed, and each of `links`
 * (a path inside the package -> its target) made a symbolic link.
 */
export function linkedPackage(dir: string, fields: Record<string, unknown>, links: Record<string, string>): string {
  cpSync(ECHO_FIXTURE, dir, { recursive: true });
  writeFileSync(join(dir, "plugin.json"), JSON.stringify({ ...JSON.parse(readFileSync(join(ECHO_FIXTURE, "plugin.json"), "utf8")), ...fields }));
  for (const [path, target] of Object.entries(links)) {
    rmSync(join(dir, path), { force: true });
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    symlinkSync(target, join(dir, path));
  }
  return dir;
}

/** One `NAME=value` of this process's own /proc/self/environ (what a server run in-process would show). */
export const ownEnviron = (): string => readFileSync("/proc/self/environ", "utf8").split("\0").find((e) => e.startsWith("PATH="))!;

/**
 * What the probes pointed a package's README.md at, each with text of it that must never be
 * served: the process's environment (`environSecret`, a value in it), the data dir's TLS key and
 * its database (a fake one of each is written when there is none). The links to the data dir are
 * relative, as from a package folder two levels below it (DATA_DIR/marketplace/NAME).
 */
export function leakTargets(dataDir: string, environSecret: string): { name: string; link: string; secret: string }[] {
  const key = join(dataDir, "tls", "key.pem");
  const db = join(dataDir, "flagsvc.db");
  mkdirSync(dirname(key), { recursive: true });
  if (!existsSync(key)) writeFileSync(key, "-----BEGIN PRIVATE KEY-----\nFAKE-TLS-KEY-never-served\n-----END PRIVATE KEY-----\n");
  if (!existsSync(db)) writeFileSync(db, "SQLite format 3\0fake database");
  return [
    { name: "environ", link: "/proc/self/environ", secret: environSecret },
    { name: "tls-key", link: "../../tls/key.pem", secret: readFileSync(key, "utf8").split("\n")[1]! },
    { name: "database", link: "../../flagsvc.db", secret: "SQLite format 3" },
  ];
}
