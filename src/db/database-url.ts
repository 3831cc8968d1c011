/**
 * `SVC_DATABASE_URL`: which PostgreSQL to use, read the way libpq users write it
 * (`postgres://user:password@host:port/db?sslmode=verify-full&sslrootcert=/etc/ca.pem`), and
 * turned into the options of Bun's `SQL` (docs/scaling.md). Unset: the embedded SQLite.
 *
 * The password is never shown: errors name what is wrong without echoing the URL, and
 * `maskDatabaseUrl` is the only form that may go into a log line.
 */
import { readFileSync } from "node:fs";

/** libpq's `sslmode` values, weakest first. */
export const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] as const;
export type SslMode = (typeof SSL_MODES)[number];
/** libpq's default. */
export const DEFAULT_SSL_MODE: SslMode = "prefer";
export const DEFAULT_POOL_SIZE = 10;

/** A validated `SVC_DATABASE_URL`. */
export interface DatabaseUrl {
  /** The URL given, less `sslmode` and `sslrootcert` (they become `tls`); holds the password. */
  url: string;
  /** `sslmode` from the URL; undefined: not given. */
  sslMode: SslMode | undefined;
  /** `sslrootcert` from the URL, as written (config.ts checks it is a readable PEM file). */
  caFile: string | undefined;
  /** The URL with its password replaced by `***`: the form for logs and health. */
  masked: string;
}

/** What is wrong with a database URL; its message never holds the URL or the password. */
export class DatabaseUrlError extends Error {}

const TLS_PARAMS = new Set(["sslmode", "sslrootcert"]);
/** libpq parameters that Bun's driver does not honour: refused rather than silently ignored. */
const UNSUPPORTED_PARAMS = new Set(["sslcert", "sslkey", "sslpassword", "sslcrl", "sslcrldir", "sslsni", "gssencmode", "krbsrvname", "target_session_attrs"]);

/**
 * The URL with any password (in the user part, or a `password=` parameter) replaced by `***`.
 * Works on text that is not a valid URL too: everything up to the last `@` counts as the user
 * part, so that a password holding an unencoded `@` or `/` is still hidden.
 */
export function maskDatabaseUrl(raw: string): string {
  const scheme = raw.indexOf("://");
  if (scheme < 0) return "***";
  const rest = raw.slice(scheme + 3);
  const at = rest.lastIndexOf("@");
  let shown = rest;
  if (at >= 0) {
    const userInfo = rest.slice(0, at);
    const colon = userInfo.indexOf(":");
    shown = `${colon >= 0 ? `${userInfo.slice(0, colon)}:***` : userInfo}@${rest.slice(at + 1)}`;
  }
  return raw.slice(0, scheme + 3) + shown.replace(/([?&]password=)[^&#]*/gi, "$1***");
}

export function parseDatabaseUrl(raw: string): DatabaseUrl {
  const text = raw.trim();
  if (text === "") throw new DatabaseUrlError("must not be empty (unset it to use the embedded SQLite)");
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (scheme === undefined) throw new DatabaseUrlError("is not a URL such as postgres://user:password@host:5432/flagsvc");
  if (scheme !== "postgres" && scheme !== "postgresql") throw new DatabaseUrlError(`must start with postgres:// or postgresql://, not ${scheme}://`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DatabaseUrlError(`is not a valid URL (${maskDatabaseUrl(text)}); percent-encode special characters of the user and password (@ as %40, / as %2F)`);
  }
  if (url.hostname === "") throw new DatabaseUrlError("names no host (postgres://user:password@HOST:5432/flagsvc)");
  if (url.port === "0") throw new DatabaseUrlError("port 0 is not a port to connect to");
  if (url.pathname.length > 1 && url.pathname.slice(1).includes("/")) throw new DatabaseUrlError("the path must be one database name (/flagsvc)");
  let sslMode: SslMode | undefined;
  let caFile: string | undefined;
  for (const [name, value] of url.searchParams) {
    if (UNSUPPORTED_PARAMS.has(name)) throw new DatabaseUrlError(`the parameter ${name} is not supported (TLS takes sslmode and sslrootcert)`);
    if (name === "sslmode") {
      if (!(SSL_MODES as readonly string[]).includes(value)) throw new DatabaseUrlError(`sslmode ${JSON.stringify(value)} is not one of ${SSL_MODES.join(", ")}`);
      sslMode = value as SslMode;
    } else if (name === "sslrootcert") {
      if (value === "") throw new DatabaseUrlError("sslrootcert must name a PEM file");
      caFile = value;
    }
  }
  for (const name of TLS_PARAMS) url.searchParams.delete(name);
  const stripped = url.toString();
  return { url: stripped, sslMode, caFile, masked: maskDatabaseUrl(stripped) };
}

/** Bun's `SQL` TLS option, a subset of `Bun.SQL.PostgresOrMySQLOptions["tls"]`. */
export type PostgresTls =
  | "disable"
  | "allow"
  | "prefer"
  | "require"
  | { ca?: string; rejectUnauthorized: true; checkServerIdentity?: () => undefined };

/** The database part of the Config (typed here: config.ts imports this module). */
export interface DatabaseConfig {
  databaseUrl: DatabaseUrl | undefined;
  databaseCaFile: string | undefined;
  databasePoolSize: number;
}

/** What `new SQL(options)` needs for the configured database. */
export interface PostgresOptions {
  url: string;
  tls: PostgresTls;
  max: number;
}

/**
 * The sslmode in force: the URL's; else `verify-full` when a CA file is given (a CA is given to
 * be checked), else libpq's default `prefer`. A CA file with `disable`, `allow` or `prefer` is
 * refused by config.ts, since those modes never check a certificate.
 */
export function effectiveSslMode(url: DatabaseUrl, caFile: string | undefined): SslMode {
  return url.sslMode ?? (caFile !== undefined ? "verify-full" : DEFAULT_SSL_MODE);
}

/**
 * The options of Bun's `SQL` for `config.databaseUrl` (which must be set), with libpq's sslmode
 * meanings: `require` encrypts without checking the certificate, unless a CA file is given, which
 * makes it `verify-ca` (as libpq does); `verify-ca` checks the chain (the CA file, else the
 * system's CAs) but not the host name; `verify-full` checks both.
 */
export function postgresOptions(config: DatabaseConfig): PostgresOptions {
  const db = config.databaseUrl;
  if (db === undefined) throw new Error("postgresOptions: SVC_DATABASE_URL is not set");
  const caFile = config.databaseCaFile;
  const mode = effectiveSslMode(db, caFile);
  const ca = caFile === undefined ? {} : { ca: readFileSync(caFile, "utf8") };
  let tls: PostgresTls;
  if (mode === "verify-full") tls = { ...ca, rejectUnauthorized: true };
  else if (mode === "verify-ca" || (mode === "require" && caFile !== undefined)) {
    // Bun raises any mode with a CA or a checkServerIdentity to verify-full; accepting every
    // host name leaves exactly the chain check, which is libpq's verify-ca.
    tls = { ...ca, rejectUnauthorized: true, checkServerIdentity: () => undefined };
  } else tls = mode;
  return { url: db.url, tls, max: config.databasePoolSize };
}
