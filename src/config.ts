/**
 * One typed Config, built in one place from environment variables and command-line flags
 * (decisions §1). Every option is a row of OPTIONS: its variable, its flag, its default and
 * its parser. Flags win over variables. A bad value throws ConfigError, which the CLI turns
 * into exit code 2 and one line naming the variable and what is wrong.
 */
import { accessSync, constants, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { resolve } from "node:path";
import { DEFAULT_POOL_SIZE, DatabaseUrlError, parseDatabaseUrl, type DatabaseUrl } from "./db/database-url";
import type { LogFormat, LogLevel } from "./lib/log";

export type Edition = "ce" | "pro";
export const RATE_LIMIT_KINDS = ["eval", "test", "mgmt", "full", "client", "admin", "user", "anonymous"] as const;
export type RateLimitKind = (typeof RATE_LIMIT_KINDS)[number];
/** Requests a minute per credential (spec "Limits", decisions §13). */
export const DEFAULT_RATE_LIMITS: Readonly<Record<RateLimitKind, number>> = {
  eval: 10_000,
  test: 1_000,
  mgmt: 500,
  full: 500,
  /** The web pages' key: as many as eval's. */
  client: 10_000,
  admin: 1_000,
  user: 1_000,
  anonymous: 300,
};

export interface Config {
  dataDir: string;
  /** PostgreSQL to use instead of the SQLite file in dataDir (docs/scaling.md); unset: SQLite. */
  databaseUrl: DatabaseUrl | undefined;
  /** The CA file that checks the PostgreSQL server's certificate: SVC_DATABASE_CA_FILE or the URL's `sslrootcert`. */
  databaseCaFile: string | undefined;
  /** Most connections one node opens to PostgreSQL. */
  databasePoolSize: number;
  host: string;
  port: number;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  behindProxy: boolean;
  edition: Edition;
  adminEmail: string;
  adminPassword: string | undefined;
  adminKey: string | undefined;
  jwtSecret: string | undefined;
  /** Seconds before retry 1..4. */
  webhookRetryDelays: number[];
  webhookTimeoutMs: number;
  outboundAllowedHosts: string[];
  /** Web origins allowed to call the evaluation and OFREP routes from a browser (`*`: any); empty: none. */
  corsOrigins: string[];
  /** The memory cap of each plugin's sandbox (its whole WebAssembly memory), in MiB. */
  pluginMemoryMb: number;
  /** Days an audit-log entry is kept; 0: forever. */
  auditRetentionDays: number;
  /** Seconds between two flushes of the evaluation counts to the database (docs/insights.md). */
  insightsFlushSeconds: number;
  rateLimits: Record<RateLimitKind, number>;
  /** The bearer token that may read `/metrics` (besides admin keys); unset: admin keys only. */
  metricsToken: string | undefined;
  /** `/metrics` without any credential. */
  metricsPublic: boolean;
  /** Seconds a stopping server keeps serving with `/readyz` at 503 before it stops listening. */
  shutdownDelaySeconds: number;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly flag: string,
    readonly problem: string,
  ) {
    super(`invalid ${variable} (${flag}): ${problem}`);
  }
}

interface OptionSpec<K extends keyof Config = keyof Config> {
  key: K;
  env: string;
  flag: string;
  /** Shown in --help and the README; `undefined` defaults are "unset". */
  defaultText: string;
  description: string;
  /** A flag that may stand alone (`--behind-proxy` means true). */
  boolean?: boolean;
  /** Never echo the value back in an error line. */
  secret?: boolean;
  fallback: (isTTY: boolean) => Config[K];
  parse: (raw: string) => Config[K];
}

const opt = <K extends keyof Config>(spec: OptionSpec<K>): OptionSpec<K> => spec;

/** A problem with a value; the caller adds which option it was. */
class Invalid extends Error {}

function integer(raw: string, min: number, max: number, what: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new Invalid(`${JSON.stringify(raw)} is not ${what}`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new Invalid(`${n} is out of range (${min} to ${max})`);
  return n;
}

function oneOf<T extends string>(raw: string, values: readonly T[]): T {
  const v = raw.trim().toLowerCase();
  if (!(values as readonly string[]).includes(v)) {
    throw new Invalid(`${JSON.stringify(raw)} is not one of ${values.join(", ")}`);
  }
  return v as T;
}

function bool(raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off", ""].includes(v)) return false;
  throw new Invalid(`${JSON.stringify(raw)} is not true or false`);
}

function readablePemFile(raw: string, kind: "CERTIFICATE" | "PRIVATE KEY"): string {
  if (raw.trim() === "") throw new Invalid("must not be empty (unset it to use the generated certificate)");
  const path = resolve(raw);
  let text: string;
  try {
    accessSync(path, constants.R_OK);
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new Invalid(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const marker = kind === "CERTIFICATE" ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
  if (!marker.test(text)) throw new Invalid(`${path} holds no PEM ${kind.toLowerCase()}`);
  return path;
}

const HOST_PATTERN = /^(\*|\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9*]([a-z0-9-]*[a-z0-9])?)*\.?$/;

function outboundEntry(entry: string): string {
  const e = entry.trim().toLowerCase();
  if (["external", "private", "loopback", "*"].includes(e)) return e;
  const slash = e.indexOf("/");
  if (slash >= 0) {
    const ip = e.slice(0, slash);
    const family = isIP(ip);
    const bits = e.slice(slash + 1);
    const max = family === 4 ? 32 : 128;
    if (family === 0 || !/^\d+$/.test(bits) || Number(bits) > max) throw new Invalid(`${JSON.stringify(entry)} is not a valid CIDR`);
    return e;
  }
  if (isIP(e.replace(/^\[|\]$/g, ""))) return e.replace(/^\[|\]$/g, "");
  if (!HOST_PATTERN.test(e)) throw new Invalid(`${JSON.stringify(entry)} is not external, private, loopback, *, a host glob or a CIDR`);
  return e;
}

export const OPTIONS = [
  opt({
    key: "dataDir", env: "SVC_DATA_DIR", flag: "--data-dir", defaultText: "./data",
    description: "Database `flagsvc.db` and generated TLS files `tls/`",
    fallback: () => resolve("./data"),
    parse: (raw) => {
      if (raw.trim() === "") throw new Invalid("must not be empty");
      return resolve(raw);
    },
  }),
  opt({
    key: "databaseUrl", env: "SVC_DATABASE_URL", flag: "--database-url", defaultText: "unset (SQLite in the data dir)", secret: true,
    description: "`postgres://user:password@host:5432/db` (or `postgresql://`): PostgreSQL for several nodes (docs/scaling.md says what is available yet); TLS as libpq: `?sslmode=` disable, allow, prefer (default), require, verify-ca, verify-full, and `&sslrootcert=FILE`",
    fallback: () => undefined,
    parse: (raw) => {
      let url: DatabaseUrl;
      try {
        url = parseDatabaseUrl(raw);
      } catch (e) {
        if (e instanceof DatabaseUrlError) throw new Invalid(e.message);
        throw e;
      }
      return url.caFile === undefined ? url : { ...url, caFile: readablePemFile(url.caFile, "CERTIFICATE") };
    },
  }),
  opt({
    key: "databaseCaFile", env: "SVC_DATABASE_CA_FILE", flag: "--database-ca-file", defaultText: "unset",
    description: "PEM file of the CA(s) that check the PostgreSQL server's certificate (like `sslrootcert=` in the URL); without an sslmode it means `verify-full`",
    fallback: () => undefined,
    parse: (raw) => readablePemFile(raw, "CERTIFICATE"),
  }),
  opt({
    key: "databasePoolSize", env: "SVC_DATABASE_POOL_SIZE", flag: "--database-pool-size", defaultText: String(DEFAULT_POOL_SIZE),
    description: "Most connections each node opens to PostgreSQL, 1 to 1000 (plus one for LISTEN)",
    fallback: () => DEFAULT_POOL_SIZE,
    parse: (raw) => integer(raw, 1, 1000, "a whole number of connections"),
  }),
  opt({
    key: "host", env: "SVC_HOST", flag: "--host", defaultText: "0.0.0.0",
    description: "Listen address",
    fallback: () => "0.0.0.0",
    parse: (raw) => {
      const v = raw.trim().replace(/^\[|\]$/g, "");
      // Digits and dots only is meant as an IPv4 address (999.1.1.1 is not one, nor a name).
      if (isIP(v) === 0 && (!HOST_PATTERN.test(v.toLowerCase()) || /^[0-9.]+$/.test(v))) throw new Invalid(`${JSON.stringify(raw)} is not an IP address or host name`);
      return v;
    },
  }),
  opt({
    key: "port", env: "SVC_PORT", flag: "--port", defaultText: "8443",
    description: "Listen port; `0` picks a free port and the log line `listening on https://HOST:PORT` says which",
    fallback: () => 8443,
    parse: (raw) => integer(raw, 0, 65535, "a port number (0-65535)"),
  }),
  opt({
    key: "tlsCert", env: "SVC_TLS_CERT", flag: "--tls-cert", defaultText: "unset",
    description: "PEM certificate file (with `SVC_TLS_KEY`); unset: a self-signed certificate is generated once into `DATA_DIR/tls/`",
    fallback: () => undefined,
    parse: (raw) => readablePemFile(raw, "CERTIFICATE"),
  }),
  opt({
    key: "tlsKey", env: "SVC_TLS_KEY", flag: "--tls-key", defaultText: "unset",
    description: "PEM private key file for `SVC_TLS_CERT`",
    fallback: () => undefined,
    parse: (raw) => readablePemFile(raw, "PRIVATE KEY"),
  }),
  opt({
    key: "behindProxy", env: "SVC_BEHIND_PROXY", flag: "--behind-proxy", defaultText: "false", boolean: true,
    description: "`true`: plain HTTP for a TLS-terminating proxy; requests without `X-Forwarded-Proto: https` get 403 `HTTPS_REQUIRED`",
    fallback: () => false,
    parse: bool,
  }),
  opt({
    key: "edition", env: "SVC_EDITION", flag: "--edition", defaultText: "ce",
    description: "`ce` or `pro`",
    fallback: () => "ce" as Edition,
    parse: (raw) => oneOf(raw, ["ce", "pro"] as const),
  }),
  opt({
    key: "adminEmail", env: "SVC_ADMIN_EMAIL", flag: "--admin-email", defaultText: "admin@localhost",
    description: "First login user (role `admin`), created only when no user exists",
    fallback: () => "admin@localhost",
    parse: (raw) => {
      const v = raw.trim().toLowerCase();
      if (!/^[^\s@]+@[^\s@]+$/.test(v)) throw new Invalid(`${JSON.stringify(raw)} is not an email address`);
      return v;
    },
  }),
  opt({
    key: "adminPassword", env: "SVC_ADMIN_PASSWORD", flag: "--admin-password", defaultText: "generated", secret: true,
    description: "Password of the first login user (at least 10 characters); generated and printed once when unset",
    fallback: () => undefined,
    parse: (raw) => {
      if (raw.length < 10) throw new Invalid("must be at least 10 characters");
      return raw;
    },
  }),
  opt({
    key: "adminKey", env: "SVC_ADMIN_KEY", flag: "--admin-key", defaultText: "generated", secret: true,
    description: "First admin key, created only when none exists; must match `svc_admin_[A-Za-z0-9]{32,}`; generated and printed once when unset",
    fallback: () => undefined,
    parse: (raw) => {
      if (!/^svc_admin_[A-Za-z0-9]{32,}$/.test(raw)) throw new Invalid("must match svc_admin_[A-Za-z0-9]{32,}");
      return raw;
    },
  }),
  opt({
    key: "jwtSecret", env: "SVC_JWT_SECRET", flag: "--jwt-secret", defaultText: "generated, stored in the database", secret: true,
    description: "HMAC secret for login tokens (at least 32 characters)",
    fallback: () => undefined,
    parse: (raw) => {
      if (raw.length < 32) throw new Invalid("must be at least 32 characters");
      return raw;
    },
  }),
  opt({
    key: "webhookRetryDelays", env: "SVC_WEBHOOK_RETRY_DELAYS", flag: "--webhook-retry-delays", defaultText: "60,300,1800,7200",
    description: "Seconds before webhook retry 1..4 (four whole numbers)",
    fallback: () => [60, 300, 1800, 7200],
    parse: (raw) => {
      const parts = raw.split(",");
      if (parts.length !== 4) throw new Invalid(`expected 4 comma-separated numbers of seconds, got ${parts.length}`);
      return parts.map((p) => integer(p, 0, 604_800, "a whole number of seconds"));
    },
  }),
  opt({
    key: "webhookTimeoutMs", env: "SVC_WEBHOOK_TIMEOUT_MS", flag: "--webhook-timeout-ms", defaultText: "10000",
    description: "Time limit of one webhook delivery attempt, in milliseconds",
    fallback: () => 10_000,
    parse: (raw) => integer(raw, 1, 300_000, "a number of milliseconds"),
  }),
  opt({
    key: "auditRetentionDays", env: "SVC_AUDIT_RETENTION_DAYS", flag: "--audit-retention-days", defaultText: "365",
    description: "Days an audit-log entry is kept (removed daily, in small batches); 0 keeps every entry",
    fallback: () => 365,
    parse: (raw) => integer(raw, 0, 36_500, "a whole number of days"),
  }),
  opt({
    key: "insightsFlushSeconds", env: "SVC_INSIGHTS_FLUSH_SECONDS", flag: "--insights-flush-seconds", defaultText: "10",
    description: "Seconds between two writes of the evaluation counts (insights) to the database; a crash (kill -9) loses at most this much",
    fallback: () => 10,
    parse: (raw) => integer(raw, 1, 3600, "a whole number of seconds"),
  }),
  opt({
    key: "outboundAllowedHosts", env: "SVC_OUTBOUND_ALLOWED_HOSTS", flag: "--outbound-allowed-hosts", defaultText: "external",
    description: "Where webhooks, integrations and plugins may send: `external`, `private`, `loopback`, `*`, host globs and CIDRs, comma-separated",
    fallback: () => ["external"],
    parse: (raw) => {
      const entries = raw.split(",").map((s) => s.trim()).filter(Boolean);
      if (entries.length === 0) throw new Invalid("must name at least one entry");
      return entries.map(outboundEntry);
    },
  }),
  opt({
    key: "corsOrigins", env: "SVC_CORS_ORIGINS", flag: "--cors-origins", defaultText: "none",
    description: "Web origins (`https://app.example.com`, comma-separated; `*` for any) whose pages may call the evaluation and OFREP routes and the OFREP change stream; never the management routes or the definitions",
    fallback: () => [],
    parse: (raw) => raw.split(",").map((s) => s.trim()).filter(Boolean).map(corsOrigin),
  }),
  opt({
    key: "pluginMemoryMb", env: "SVC_PLUGIN_MEMORY_MB", flag: "--plugin-memory-mb", defaultText: "64",
    description: "Memory cap of each active plugin's sandbox, in MiB (its whole QuickJS WebAssembly memory; 17 to 4096)",
    fallback: () => 64,
    parse: (raw) => integer(raw, 17, 4096, "a whole number of MiB"),
  }),
  opt({
    key: "rateLimits", env: "SVC_RATE_LIMITS", flag: "--rate-limits",
    defaultText: Object.entries(DEFAULT_RATE_LIMITS).map(([k, v]) => `${k}:${v}`).join(","),
    description: "Per-minute limits by credential kind, e.g. `eval:50000,anonymous:100` (eval, test, mgmt, full, client, admin, user, anonymous)",
    fallback: () => ({ ...DEFAULT_RATE_LIMITS }),
    parse: (raw) => {
      const limits = { ...DEFAULT_RATE_LIMITS };
      const seen = new Set<RateLimitKind>();
      for (const part of raw.split(",").map((s) => s.trim()).filter(Boolean)) {
        const [name, value, extra] = part.split(":");
        if (value === undefined || extra !== undefined) throw new Invalid(`${JSON.stringify(part)} is not name:number`);
        const kind = oneOf(name!, RATE_LIMIT_KINDS);
        // Two values for one kind: one of them is a typo, and which was meant cannot be told.
        if (seen.has(kind)) throw new Invalid(`${kind} is given twice`);
        seen.add(kind);
        limits[kind] = integer(value, 1, 100_000_000, "a whole number of requests");
      }
      return limits;
    },
  }),
  opt({
    key: "metricsToken", env: "SVC_METRICS_TOKEN", flag: "--metrics-token", defaultText: "unset", secret: true,
    description: "Bearer token that may read `/metrics` (besides admin keys): 32 to 256 characters of `A-Za-z0-9._~+/=-`",
    fallback: () => undefined,
    parse: (raw) => {
      if (!/^[A-Za-z0-9._~+/=-]{32,256}$/.test(raw)) throw new Invalid("must be 32 to 256 characters of A-Za-z0-9._~+/=-");
      return raw;
    },
  }),
  opt({
    key: "metricsPublic", env: "SVC_METRICS_PUBLIC", flag: "--metrics-public", defaultText: "false", boolean: true,
    description: "`true`: `/metrics` needs no credential (for a scraper on a private network only)",
    fallback: () => false,
    parse: bool,
  }),
  opt({
    key: "shutdownDelaySeconds", env: "SVC_SHUTDOWN_DELAY_SECONDS", flag: "--shutdown-delay-seconds", defaultText: "0",
    description: "On SIGTERM, seconds to keep serving with `/readyz` answering 503 (so that load balancers stop sending) before the drain, 0 to 300",
    fallback: () => 0,
    parse: (raw) => integer(raw, 0, 300, "a whole number of seconds"),
  }),
  opt({
    key: "logLevel", env: "SVC_LOG_LEVEL", flag: "--log-level", defaultText: "info",
    description: "`debug`, `info`, `warn` or `error`",
    fallback: () => "info" as LogLevel,
    parse: (raw) => oneOf(raw, ["debug", "info", "warn", "error"] as const),
  }),
  opt({
    key: "logFormat", env: "SVC_LOG_FORMAT", flag: "--log-format", defaultText: "`pretty` on a TTY, else `json`",
    description: "`pretty` or `json`",
    fallback: (isTTY) => (isTTY ? "pretty" : "json") as LogFormat,
    parse: (raw) => oneOf(raw, ["pretty", "json"] as const),
  }),
] as const satisfies readonly OptionSpec<any>[];

/** An origin as browsers send it in `Origin`: scheme, host and port only, no path; or `*`. */
function corsOrigin(entry: string): string {
  if (entry === "*") return entry;
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    throw new Invalid(`${JSON.stringify(entry)} is not an origin such as https://app.example.com`);
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== entry.replace(/\/$/, "")) {
    throw new Invalid(`${JSON.stringify(entry)} is not an origin (scheme://host[:port], no path)`);
  }
  return url.origin;
}

const BY_FLAG = new Map<string, { boolean?: boolean }>(OPTIONS.map((o) => [o.flag, o]));

export function isConfigFlag(flag: string): boolean {
  return BY_FLAG.has(flag);
}

export function isBooleanConfigFlag(flag: string): boolean {
  return BY_FLAG.get(flag)?.boolean === true;
}

/**
 * Builds the Config. `flags` maps a flag (`--port`) to its raw value (`true` for a bare
 * boolean flag); unknown flags are the caller's business.
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  flags: ReadonlyMap<string, string | true> = new Map(),
  isTTY = false,
): Config {
  const config = {} as Record<keyof Config, unknown>;
  for (const o of OPTIONS as readonly OptionSpec<keyof Config>[]) {
    const fromFlag = flags.get(o.flag);
    const raw = fromFlag === true ? "true" : (fromFlag ?? env[o.env]);
    if (raw === undefined) {
      config[o.key] = o.fallback(isTTY);
      continue;
    }
    try {
      config[o.key] = o.parse(raw);
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      throw new ConfigError(o.env, o.flag, o.secret ? e.message.replace(JSON.stringify(raw), "the value") : e.message);
    }
  }
  const c = config as unknown as Config;
  if ((c.tlsCert === undefined) !== (c.tlsKey === undefined)) {
    const missing = OPTIONS.find((o) => o.key === (c.tlsCert === undefined ? "tlsCert" : "tlsKey"))!;
    throw new ConfigError(missing.env, missing.flag, "SVC_TLS_CERT and SVC_TLS_KEY must be set together");
  }
  checkDatabase(c);
  return c;
}

/**
 * The CA file comes from SVC_DATABASE_CA_FILE or the URL's `sslrootcert` (one of them, or both
 * naming the same file) and only with an sslmode that checks certificates.
 */
function checkDatabase(c: Config): void {
  const fail = (key: "databaseUrl" | "databaseCaFile", problem: string): never => {
    const o = OPTIONS.find((x) => x.key === key)!;
    throw new ConfigError(o.env, o.flag, problem);
  };
  const url = c.databaseUrl;
  if (url === undefined) {
    if (c.databaseCaFile !== undefined) fail("databaseCaFile", "is set but SVC_DATABASE_URL is not (the CA file is for PostgreSQL)");
    return;
  }
  if (url.caFile !== undefined && c.databaseCaFile !== undefined && url.caFile !== c.databaseCaFile) {
    fail("databaseCaFile", `names ${c.databaseCaFile} but the URL's sslrootcert names ${url.caFile}: give the CA file once`);
  }
  c.databaseCaFile ??= url.caFile;
  if (c.databaseCaFile !== undefined && (url.sslMode === "disable" || url.sslMode === "allow" || url.sslMode === "prefer")) {
    fail("databaseUrl", `sslmode ${url.sslMode} never checks a certificate, so a CA file is pointless: use sslmode require, verify-ca or verify-full, or drop the CA file`);
  }
}

/** The options (all, or those of `keys`) as rows of text, for `--help`. */
export function describeOptions(keys?: readonly (keyof Config)[]): string {
  const rows = OPTIONS.filter((o) => keys === undefined || keys.includes(o.key)).map((o) => [`${o.flag}${o.boolean ? "" : " VALUE"}`, o.env, o.defaultText.replace(/`/g, ""), o.description.replace(/`/g, "")]);
  const w0 = Math.max(...rows.map((r) => r[0]!.length));
  const w1 = Math.max(...rows.map((r) => r[1]!.length));
  return rows
    .map(([flag, env, def, desc]) => `  ${flag!.padEnd(w0)}  ${env!.padEnd(w1)}  ${desc} (default: ${def})`)
    .join("\n");
}
