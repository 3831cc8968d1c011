/**
 * The `flagsvc` command line: serve (default), migrate, backup, admin (create-user,
 * create-key, reset-password), plugins (add, check, list), export, import, healthcheck, version, help.
 * Exit codes: 0 success, 1 failure at run time, 2 bad usage or configuration.
 */
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, describeOptions, isBooleanConfigFlag, isConfigFlag, loadConfig, type Config } from "./config";
import { DB_FILE, openDatabase } from "./db/client";
import { SchemaTooNewError } from "./db/migrate";
import { SqliteMaintenance } from "./db/sqlite-maintenance";
import { ApiError } from "./http/errors";
import { systemClock } from "./lib/clock";
import { OperatorError } from "./lib/errors";
import { adminKeyService, validateNewAdminKey } from "./modules/admin-keys/service";
import { generatePassword, userService, validateNewUser, validatePasswordReset } from "./modules/users/service";
import { createLogger } from "./lib/log";
import { addPackage, checkPackage, listPackages } from "./plugins/cli";
import { StartupError, startServer, type RunningServer } from "./server";
import { createStores, openStore } from "./db/sqlite-backend";
import { SQL } from "bun";
import { postgresOptions } from "./db/database-url";
import { openBackend } from "./db/open";
import { migratePg } from "./db/pg/migrate";
import { PG_BACKUP } from "./db/pg-maintenance";
import { ChangeBus } from "./changes/bus";
import { cliAuthor, type Author } from "./changes/entry";
import { flagService } from "./modules/flags/service";
import { segmentService } from "./modules/segments/service";
import {
  DocumentError,
  exportInstance,
  flagsDocument,
  flagsReportLines,
  formatDocument,
  importFlags,
  importInstance,
  instanceReportLines,
  kindOf,
  parseDocument,
  storedFlagInsights,
  type Format,
} from "./modules/transfer/service";
import { SqliteChangeLog } from "./changes/sqlite";
import type { Stores } from "./context";
import { VERSION } from "./version";

class UsageError extends Error {}

const BOOLEAN_WORDS = new Set(["true", "false", "1", "0", "yes", "no", "on", "off"]);

/** A command's own options (`--email`), each taking a value, beside the configuration flags. */
type Options = ReadonlyMap<string, string>;

interface Command {
  usage: string;
  summary: string;
  /** The configuration options it reads (shown in its --help): all, some (by key), or none. */
  config: "all" | readonly (keyof Config)[] | false;
  /** Its own options: flag -> help text. */
  options?: Record<string, string>;
  /** Its own switches, taking no value (`--dry-run`): flag -> help text. Given: "true" in its options. */
  switches?: Record<string, string>;
  /** Sub-commands (`flagsvc admin create-user`): the command itself only groups them. */
  subcommands?: Record<string, Command>;
  run(args: string[], config: () => Config, options: Options): Promise<number> | number;
}

const ADMIN_COMMANDS: Record<string, Command> = {
  "create-user": {
    usage: "flagsvc admin create-user --email EMAIL --password PASSWORD --role admin|editor|viewer [--data-dir DIR]",
    summary: "Add a login user (works while the server runs; it notices within a second)",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    options: {
      "--email": "Email address (stored lower-case, unique)",
      "--password": "Password, at least 10 characters (mind your shell history)",
      "--role": "admin, editor or viewer",
    },
    run: (args, config, options) => adminCreateUser(args, config(), options),
  },
  "create-key": {
    usage: "flagsvc admin create-key [--name NAME] [--data-dir DIR]",
    summary: "Create an admin key and print it (works while the server runs; it notices within a second)",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    options: { "--name": "A name to recognise the key by (default: cli)" },
    run: (args, config, options) => adminCreateKey(args, config(), options),
  },
  "reset-password": {
    usage: "flagsvc admin reset-password --email EMAIL [--password PASSWORD] [--data-dir DIR]",
    summary: "Set a login user's password and end their login tokens; without --password, generate one and print it (works while the server runs; it notices within a second)",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    options: {
      "--email": "The user's email address (any case)",
      "--password": "The new password, at least 10 characters (mind your shell history); omitted: a generated one is printed, once",
    },
    run: (args, config, options) => adminResetPassword(args, config(), options),
  },
};

const PLUGINS_COMMANDS: Record<string, Command> = {
  add: {
    usage: "flagsvc plugins add PATH [--data-dir DIR]",
    summary: "Check a plugin package (a folder or a .tgz) and copy it into DATA_DIR/marketplace/ (unverified); a running server picks it up",
    config: ["dataDir"],
    run: async (args, config) => {
      console.log(await addPackage(onePath(args, "plugins add"), config(), cliLogger()));
      return 0;
    },
  },
  check: {
    usage: "flagsvc plugins check PATH [--config JSON | --config-file FILE] [options]",
    summary: "Check a plugin package and a config for it, then run its activate in the sandbox, printing its log lines",
    config: ["pluginMemoryMb", "outboundAllowedHosts"],
    options: {
      "--config": "The plugin's config as JSON (default {}); secrets in it are masked in the output",
      "--config-file": "A file holding the plugin's config as JSON",
    },
    run: async (args, config, options) => {
      const path = onePath(args, "plugins check");
      await checkPackage(path, pluginConfig(options), config(), (line) => console.log(line));
      return 0;
    },
  },
  list: {
    usage: "flagsvc plugins list [--data-dir DIR]",
    summary: "List the catalog: every package version, built in (verified) and in DATA_DIR/marketplace/ (unverified)",
    config: ["dataDir"],
    run: (args, config) => {
      noPositionals(args);
      for (const line of listPackages(config(), cliLogger())) console.log(line);
      return 0;
    },
  },
};

const COMMANDS: Record<string, Command> = {
  serve: {
    usage: "flagsvc [serve] [options]",
    summary: "Migrate the database, bootstrap on first start, serve HTTPS (the default command)",
    config: "all",
    run: (args, config) => {
      noPositionals(args);
      return serve(config());
    },
  },
  migrate: {
    usage: "flagsvc migrate [--data-dir DIR | --database-url URL]",
    summary: "Apply pending database migrations (SQLite in the data dir, or PostgreSQL), then exit",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    run: async (args, config) => {
      noPositionals(args);
      const applied = await migrateBackend(config());
      console.log(applied > 0 ? `applied ${applied} migration(s); the schema is up to date` : "the schema is up to date");
      return 0;
    },
  },
  backup: {
    usage: "flagsvc backup FILE [--data-dir DIR]",
    summary: "Write a consistent copy of the database to FILE (safe while the server runs)",
    config: ["dataDir"],
    run: (args, config) => backup(args, config()),
  },
  admin: {
    usage: "flagsvc admin SUB-COMMAND [options]",
    summary: "Manage credentials in the data dir: create-user, create-key, reset-password",
    config: false,
    subcommands: ADMIN_COMMANDS,
    run: () => {
      throw new UsageError(`admin needs a sub-command: ${Object.keys(ADMIN_COMMANDS).join(", ")}`);
    },
  },
  plugins: {
    usage: "flagsvc plugins SUB-COMMAND [options]",
    summary: "Plugin packages: add (air-gapped install into DATA_DIR/marketplace/), check (run activate in the sandbox), list",
    config: false,
    subcommands: PLUGINS_COMMANDS,
    run: () => {
      throw new UsageError(`plugins needs a sub-command: ${Object.keys(PLUGINS_COMMANDS).join(", ")}`);
    },
  },
  export: {
    usage: "flagsvc export FILE [--project SLUG] [--format json|yaml] [--data-dir DIR | --database-url URL]",
    summary: "Write the whole instance (or, with --project, that project's flags as code) to FILE (- for stdout); safe while the server runs",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    options: {
      "--project": "Only this project's flags (and the segments they use), readable, without ids or times: flags as code (docs/export-import.md)",
      "--format": "json or yaml (default: from FILE's extension, .yaml/.yml, else json)",
    },
    run: (args, config, options) => exportCommand(args, config(), options),
  },
  import: {
    usage: "flagsvc import FILE [--dry-run] [--prune] [--format json|yaml] [--data-dir DIR | --database-url URL]",
    summary: "Apply an exported document (a whole instance, or a project's flags as code) from FILE (- for stdin) and report what changed",
    config: ["dataDir", "databaseUrl", "databaseCaFile"],
    options: { "--format": "json or yaml (default: from FILE's extension, .yaml/.yml, else json)" },
    switches: {
      "--dry-run": "Report what the import would change; write nothing",
      "--prune": "Flags as code: delete the project's flags the document lacks (reported as deleted)",
    },
    run: (args, config, options) => importCommand(args, config(), options),
  },
  healthcheck: {
    usage: "flagsvc healthcheck [--port PORT] [--host HOST] [--behind-proxy]",
    summary: "Ask the local server's GET /v1/health; exit 0 when it answers 200 (for container health checks)",
    config: ["host", "port", "behindProxy"],
    run: (args, config) => {
      noPositionals(args);
      return healthcheck(config());
    },
  },
  version: {
    usage: "flagsvc version",
    summary: "Print the version",
    config: false,
    run: (args) => {
      noPositionals(args);
      console.log(`flagsvc ${VERSION}`);
      return 0;
    },
  },
  help: {
    usage: "flagsvc help [COMMAND [SUB-COMMAND]]",
    summary: "Show help for flagsvc or one command",
    config: false,
    run: (args) => {
      const [name, sub] = args;
      if (name === undefined) {
        console.log(mainHelp());
        return 0;
      }
      resolveCommand(name, sub, false);
      console.log(commandHelp(name, sub));
      return 0;
    },
  },
};

function noPositionals(args: string[]) {
  if (args.length > 0) throw new UsageError(`unexpected argument "${args[0]}"`);
}

function onePath(args: string[], command: string): string {
  if (args.length !== 1 || args[0]!.trim() === "") throw new UsageError(`${command} needs exactly one PATH argument (a package folder or .tgz)`);
  return args[0]!;
}

/** Warnings of a CLI command (a skipped catalog folder) on stderr, as text. */
const cliLogger = () => createLogger({ level: "warn", format: "pretty", write: (chunk) => process.stderr.write(chunk) });

/** `--config JSON` or `--config-file FILE` (default {}): not JSON is a usage error. */
function pluginConfig(options: Options): unknown {
  const inline = options.get("--config");
  const file = options.get("--config-file");
  if (inline !== undefined && file !== undefined) throw new UsageError("give --config or --config-file, not both");
  let text = inline ?? "{}";
  if (file !== undefined) {
    try {
      text = readFileSync(resolve(file), "utf8");
    } catch (e) {
      throw new UsageError(`--config-file: cannot read ${resolve(file)}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file !== undefined ? "--config-file" : "--config"}: not valid JSON (${(e as Error).message})`);
  }
}

function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    `flagsvc ${VERSION}: self-hosted feature-flag service`,
    "",
    "Usage: flagsvc [COMMAND] [options]",
    "",
    "Commands:",
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    "",
    "Run `flagsvc COMMAND --help` for a command's options. Every option is also an environment",
    "variable; a flag wins over its variable.",
  ].join("\n");
}

function commandHelp(name: string, sub?: string): string {
  const c = sub === undefined ? COMMANDS[name]! : COMMANDS[name]!.subcommands![sub]!;
  const own = [...Object.entries(c.options ?? {}).map(([f, d]) => [`${f} VALUE`, d]), ...Object.entries(c.switches ?? {})];
  const width = Math.max(0, ...own.map(([f]) => f!.length));
  const subs = Object.entries(c.subcommands ?? {});
  const subWidth = Math.max(0, ...subs.map(([n]) => n.length));
  return [
    `Usage: ${c.usage}`,
    "",
    c.summary,
    ...(subs.length > 0
      ? ["", "Sub-commands:", ...subs.map(([n, s]) => `  ${n.padEnd(subWidth)}  ${s.summary}`), "", `Run \`flagsvc ${name} SUB-COMMAND --help\` for its options.`]
      : []),
    ...(own.length > 0 ? ["", "Options:", ...own.map(([f, d]) => `  ${f!.padEnd(width)}  ${d}`)] : []),
    ...(c.config ? ["", "Configuration options (flag, variable, meaning):", describeOptions(c.config === "all" ? undefined : c.config)] : []),
  ].join("\n");
}

/** Every command's own options (`options`: they take a value; `switches`: they take none), across sub-commands. */
function ownOptionNames(kind: "options" | "switches", commands: Record<string, Command> = COMMANDS, into = new Set<string>()): Set<string> {
  for (const c of Object.values(commands)) {
    for (const f of Object.keys(c[kind] ?? {})) into.add(f);
    if (c.subcommands) ownOptionNames(kind, c.subcommands, into);
  }
  return into;
}

/** The command (or sub-command) to run; throws UsageError for an unknown one. */
function resolveCommand(name: string, sub: string | undefined, needSub: boolean): Command {
  const c = COMMANDS[name];
  if (c === undefined) throw new UsageError(`unknown command "${name}"`);
  if (!c.subcommands) return c;
  if (sub === undefined) {
    if (needSub) throw new UsageError(`${name} needs a sub-command: ${Object.keys(c.subcommands).join(", ")} (see flagsvc ${name} --help)`);
    return c;
  }
  const s = c.subcommands[sub];
  if (s === undefined) throw new UsageError(`unknown ${name} sub-command "${sub}" (expected ${Object.keys(c.subcommands).join(" or ")})`);
  return s;
}

/**
 * Splits argv into command (and sub-command), positionals, config flags, the command's own
 * options and --help.
 */
export function parseArgs(argv: string[]) {
  const flags = new Map<string, string | true>();
  const options = new Map<string, string>();
  const own = ownOptionNames("options");
  const switches = ownOptionNames("switches");
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") {
      help = true;
    } else if (arg === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    } else if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq >= 0 ? arg.slice(0, eq) : arg;
      if (switches.has(name) && eq < 0) {
        options.set(name, "true");
        continue;
      }
      if (own.has(name)) {
        if (eq >= 0) options.set(name, arg.slice(eq + 1));
        else if (i + 1 < argv.length) options.set(name, argv[++i]!);
        else throw new UsageError(`option ${name} needs a value`);
        continue;
      }
      if (!isConfigFlag(name)) throw new UsageError(`unknown option ${name}`);
      if (eq >= 0) flags.set(name, arg.slice(eq + 1));
      else if (isBooleanConfigFlag(name)) {
        // `--behind-proxy` alone is true; `--behind-proxy false` takes the value.
        const next = argv[i + 1]?.toLowerCase();
        flags.set(name, next !== undefined && BOOLEAN_WORDS.has(next) ? argv[++i]! : true);
      }
      else if (i + 1 < argv.length) flags.set(name, argv[++i]!);
      else throw new UsageError(`option ${name} needs a value`);
    } else if (arg.startsWith("-") && arg !== "-") {
      throw new UsageError(`unknown option ${arg}`);
    } else {
      positionals.push(arg);
    }
  }
  const first = positionals[0];
  const command = first === undefined ? "serve" : first;
  const grouped = COMMANDS[command]?.subcommands !== undefined;
  const sub = grouped ? positionals[1] : undefined;
  const target = resolveCommand(command, sub, !help);
  for (const name of options.keys()) {
    if (!(target.options && name in target.options) && !(target.switches && name in target.switches)) {
      throw new UsageError(`unknown option ${name} for flagsvc ${command}${sub ? ` ${sub}` : ""}`);
    }
  }
  return { command, sub, explicit: first !== undefined, args: positionals.slice(grouped && sub !== undefined ? 2 : 1), flags, options, help };
}

async function serve(config: Config): Promise<number> {
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  // Signal handlers come first: a SIGTERM during start-up, or right after the banner, must
  // still shut down cleanly rather than meet the runtime's default (exit 143).
  let server: RunningServer | undefined;
  let stopRequested = false;
  let signals = 0;
  let finish!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  const stop = () =>
    server!.stop().then(
      () => finish(0),
      (e) => {
        log.error("shutdown failed", { error: String(e) });
        log.flush();
        finish(1);
      },
    );
  const onSignal = (signal: string) => {
    if (++signals > 1) {
      log.warn("second signal: exiting now", { signal });
      log.flush();
      process.exit(1);
    }
    log.info("shutting down", { signal });
    if (server) void stop();
    else stopRequested = true;
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));

  try {
    server = await startServer(config, { log });
  } catch (e) {
    log.flush();
    throw e;
  }
  if (stopRequested) void stop();
  else printBanner(server);
  return finished;
}

function printBanner(server: RunningServer) {
  server.ctx.log.flush();
  const { config } = server.ctx;
  const shownHost = config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host;
  const base = `${server.tls ? "https" : "http"}://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${server.port}`;
  const lines = [
    `flagsvc ${VERSION} (${config.edition}) is ready`,
    `  API    ${base}/v1`,
    `  Docs   ${base}/v1/docs`,
    `  Data   ${config.dataDir}`,
    ...(server.tls?.source === "configured" ? [] : server.tls ? [`  TLS    self-signed certificate ${server.tls.certFile} (curl --cacert it, or -k)`] : []),
    ...(server.bannerLines.length > 0 ? ["", ...server.bannerLines.map((l) => `  ${l}`)] : []),
  ];
  const rule = "-".repeat(Math.min(100, Math.max(...lines.map((l) => l.length))));
  process.stdout.write([rule, ...lines, rule, ""].join("\n"));
}

/** SQLite: the data dir's file, locked, migrated. PostgreSQL: the migrations under their advisory lock (nodes may run). */
async function migrateBackend(config: Config): Promise<number> {
  if (config.databaseUrl === undefined) {
    const store = openStore(config);
    store.close();
    return store.applied;
  }
  const { url, ...options } = postgresOptions(config);
  const sql = new SQL(url, options);
  try {
    return await migratePg(sql);
  } finally {
    await sql.close();
  }
}

async function backup(args: string[], config: Config): Promise<number> {
  if (config.databaseUrl !== undefined) throw new OperatorError(PG_BACKUP);
  if (args.length !== 1 || args[0]!.trim() === "") throw new UsageError("backup needs exactly one FILE argument");
  const target = resolve(args[0]!);
  if (existsSync(target)) throw new UsageError(`${target} already exists; choose a new file`);
  const source = join(config.dataDir, DB_FILE);
  if (!existsSync(source)) throw new StartupError(`no database at ${source}`);
  try {
    // Owner-only like the database itself; VACUUM INTO accepts an empty existing file.
    closeSync(openSync(target, "wx", 0o600));
  } catch (e) {
    throw new StartupError(`cannot create ${target}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const store = openDatabase(source);
  try {
    await new SqliteMaintenance(store, source).backup(target);
  } catch (e) {
    rmSync(target, { force: true });
    throw new StartupError(`backup failed: ${(e as Error).message}`);
  } finally {
    store.sqlite.close();
  }
  const copy = openDatabase(target, { readonly: true });
  try {
    const check = await new SqliteMaintenance(copy, target).integrityCheck();
    if (check !== "ok") {
      rmSync(target, { force: true });
      throw new StartupError(`the copy failed its integrity check (${check}); nothing was kept`);
    }
  } finally {
    copy.sqlite.close();
  }
  console.log(`backup written to ${target} (${statSync(target).size} bytes)`);
  return 0;
}

// ---- admin: credentials written beside a running server ---------------------------------------

/**
 * Opens the database without the data-dir lock (the running server holds it) and without
 * migrating: the schema must be exactly this version's. Writes go through the modules' stores
 * with their change-log entries (no subscriber here): the server notices a credential entry
 * within a second (SQLite's data_version, then the change log).
 */
async function withDatabase<T>(config: Config, fn: (stores: Stores) => Promise<T> | T, locked = false): Promise<T> {
  if (locked && config.databaseUrl === undefined) {
    // Writes a running server would not hear (`import`): the data dir's lock, as `migrate` takes
    // it (a running server refuses it), creating and migrating the database as needed.
    const store = openStore(config);
    try {
      return await fn(createStores(new SqliteChangeLog(store, new ChangeBus(), systemClock)));
    } finally {
      store.close();
    }
  }
  if (config.databaseUrl !== undefined) {
    // PostgreSQL: the nodes hear these writes through the change log's notifications.
    const backend = await openBackend(config, new ChangeBus(), systemClock);
    try {
      return await fn(backend.stores);
    } finally {
      await backend.close();
    }
  }
  const file = join(config.dataDir, DB_FILE);
  if (!existsSync(file)) throw new OperatorError(`no database at ${file}: run flagsvc migrate first (or start flagsvc serve once)`);
  const store = openDatabase(file);
  try {
    const status = await new SqliteMaintenance(store, file).schemaStatus();
    if (status.unknown > 0) throw new SchemaTooNewError(status.unknown);
    if (status.pending > 0) throw new OperatorError(`the database schema is not up to date (${status.pending} pending migration(s)): run flagsvc migrate first`);
    return await fn(createStores(new SqliteChangeLog(store, new ChangeBus(), systemClock)));
  } finally {
    store.sqlite.close();
  }
}

/** A service's refusal as one CLI line: 400 -> usage (exit 2, naming the options), else exit 1. */
function cliError(e: unknown): unknown {
  if (!(e instanceof ApiError)) return e;
  if (e.status === 400) {
    const problems = (e.details ?? []).map((d) => `${d.path.replace(/^body\.?/, "--") || "input"}: ${d.message}`);
    return new UsageError(problems.length > 0 ? problems.join("; ") : e.message);
  }
  return new OperatorError(e.message);
}

function requireOptions(options: Options, names: string[], what: string): void {
  const missing = names.filter((n) => !options.has(n));
  if (missing.length > 0) throw new UsageError(`${what} needs ${missing.join(", ")}`);
}

async function adminCreateUser(args: string[], config: Config, options: Options): Promise<number> {
  noPositionals(args);
  requireOptions(options, ["--email", "--password", "--role"], "admin create-user");
  const input = { email: options.get("--email")!, password: options.get("--password")!, role: options.get("--role")! };
  try {
    validateNewUser(input); // bad values are usage errors, before the database is touched
    const user = await withDatabase(config, ({ users }) => userService({ users, clock: systemClock }).create(cliAuthor(), input));
    console.log(`created user ${user.id} ${user.email} (${user.role})`);
    return 0;
  } catch (e) {
    throw cliError(e);
  }
}

async function adminCreateKey(args: string[], config: Config, options: Options): Promise<number> {
  noPositionals(args);
  const input = { name: options.get("--name") ?? "cli" };
  try {
    validateNewAdminKey(input);
    const created = await withDatabase(config, ({ adminKeys }) => adminKeyService({ adminKeys, clock: systemClock }).create(cliAuthor(), input));
    // The key alone on stdout (KEY=$(flagsvc admin create-key)); the note on stderr.
    console.log(created.key);
    console.error(`created admin key ${created.id} "${created.name}"; it is shown only this once`);
    return 0;
  } catch (e) {
    throw cliError(e);
  }
}

async function adminResetPassword(args: string[], config: Config, options: Options): Promise<number> {
  noPositionals(args);
  requireOptions(options, ["--email"], "admin reset-password");
  const generated = !options.has("--password");
  const input = { email: options.get("--email")!, password: options.get("--password") ?? generatePassword() };
  try {
    validatePasswordReset(input);
    const user = await withDatabase(config, ({ users }) => userService({ users, clock: systemClock }).resetPassword(cliAuthor(), input));
    const note = `password of user ${user.id} ${user.email} reset; the login tokens issued before are refused (a running server notices within a second)`;
    if (!generated) {
      console.log(note);
      return 0;
    }
    // The password alone on stdout (P=$(flagsvc admin reset-password --email E)); the note on stderr.
    console.log(input.password);
    console.error(`${note}; the generated password is shown only this once`);
    return 0;
  } catch (e) {
    throw cliError(e);
  }
}

// ---- export / import (src/modules/transfer/, docs/export-import.md) -------------------------------

/** Who an import's changes are by, in the change log and the audit log. */
const IMPORT_AUTHOR: Author = { actor: { type: "cli", id: "cli:import", label: "import" }, requestId: null };

function oneFile(args: string[], command: string): string {
  if (args.length !== 1 || args[0]!.trim() === "") throw new UsageError(`${command} needs exactly one FILE argument (- for ${command === "export" ? "stdout" : "stdin"})`);
  return args[0]!;
}

/** `--format`, else FILE's extension (.yaml/.yml), else JSON. */
function formatOf(file: string, options: Options): Format {
  const given = options.get("--format");
  if (given !== undefined) {
    if (given !== "json" && given !== "yaml") throw new UsageError(`--format: must be json or yaml, not "${given}"`);
    return given;
  }
  return /\.ya?ml$/i.test(file) ? "yaml" : "json";
}

async function exportCommand(args: string[], config: Config, options: Options): Promise<number> {
  const file = oneFile(args, "export");
  const format = formatOf(file, options);
  const slug = options.get("--project");
  let doc: unknown;
  try {
    doc = await withDatabase(config, async ({ transfer }) =>
      slug === undefined ? exportInstance(transfer, systemClock, config.databaseUrl === undefined ? "sqlite" : "postgres") : flagsDocument(await transfer.snapshot(), slug),
    );
  } catch (e) {
    if (e instanceof DocumentError) throw new OperatorError(e.message);
    throw e;
  }
  const text = formatDocument(doc, format);
  if (file === "-") {
    process.stdout.write(text);
    return 0;
  }
  const target = resolve(file);
  try {
    // A whole instance holds hashes and secrets: owner-only, as the database itself.
    writeFileSync(target, text, { mode: slug === undefined ? 0o600 : 0o644 });
  } catch (e) {
    throw new OperatorError(`cannot write ${target}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  console.error(slug === undefined ? `instance exported to ${target}` : `project ${slug}: ${(doc as { flags: unknown[] }).flags.length} flag(s) exported to ${target}`);
  return 0;
}

async function importCommand(args: string[], config: Config, options: Options): Promise<number> {
  const file = oneFile(args, "import");
  const dryRun = options.has("--dry-run");
  const prune = options.has("--prune");
  let text: string;
  try {
    text = file === "-" ? await Bun.stdin.text() : readFileSync(resolve(file), "utf8");
  } catch (e) {
    throw new UsageError(`cannot read ${resolve(file)}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  try {
    const doc = parseDocument(text, formatOf(file, options));
    if (kindOf(doc) === "instance") {
      if (prune) throw new UsageError("--prune applies to a flags document, not to a whole instance");
      const report = await withDatabase(config, ({ transfer }) => importInstance(transfer, IMPORT_AUTHOR, doc, dryRun), !dryRun).catch((e: unknown) => {
        // The database refused a row (a reference to a row that is not there, a taken key): one transaction, nothing changed.
        if (e instanceof DocumentError || e instanceof OperatorError || e instanceof ConfigError) throw e;
        throw new OperatorError(`import failed, nothing changed: ${(e as Error).message}`);
      });
      for (const line of instanceReportLines(report, dryRun)) console.log(line);
      return 0;
    }
    const apply = (dry: boolean) => (stores: Stores) =>
      importFlags(
        {
          flags: flagService({ flags: stores.flags, projects: stores.projects, clock: systemClock, insights: storedFlagInsights(stores.insights), history: stores.audit }),
          segments: segmentService({ segments: stores.segments, projects: stores.projects, clock: systemClock, history: stores.audit }),
          snapshot: () => stores.transfer.snapshot(),
        },
        IMPORT_AUTHOR,
        doc,
        { dryRun: dry, prune },
      );
    // Planned first, beside a running server: a document that changes nothing needs no lock.
    let report = await withDatabase(config, apply(true));
    const changes = [...report.flags, ...report.segments].some((r) => r.outcome !== "unchanged");
    if (!dryRun && changes) report = await withDatabase(config, apply(false), true);
    for (const line of flagsReportLines(report, dryRun)) console.log(line);
    return 0;
  } catch (e) {
    if (e instanceof DocumentError) throw new UsageError(e.message);
    throw cliError(e);
  }
}

async function healthcheck(config: Config): Promise<number> {
  if (config.port === 0) throw new UsageError("healthcheck needs the server's port: set --port or SVC_PORT (0 means any free port)");
  const host = config.host === "0.0.0.0" ? "127.0.0.1" : config.host === "::" ? "[::1]" : config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `${config.behindProxy ? "http" : "https"}://${host}:${config.port}/v1/health`;
  try {
    const res = await fetch(url, {
      headers: config.behindProxy ? { "x-forwarded-proto": "https" } : {},
      tls: { rejectUnauthorized: false },
      signal: AbortSignal.timeout(5_000),
    });
    console.log(`${res.status} ${await res.text()}`);
    return res.status === 200 ? 0 : 1;
  } catch (e) {
    console.error(`flagsvc: ${url}: ${(e as Error).message}`);
    return 1;
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    const { command, sub, explicit, args, flags, options, help } = parseArgs(argv);
    if (help) {
      console.log(explicit && command !== "help" ? commandHelp(command, sub) : mainHelp());
      return 0;
    }
    const target = resolveCommand(command, sub, true);
    return await target.run(args, () => loadConfig(process.env, flags, Boolean(process.stdout.isTTY)), options);
  } catch (e) {
    if (e instanceof ConfigError || e instanceof UsageError) {
      console.error(`flagsvc: ${e.message}`);
      return 2;
    }
    if (e instanceof OperatorError) {
      console.error(`flagsvc: ${e.message}`);
      return 1;
    }
    console.error(`flagsvc: unexpected failure: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return 1;
  }
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
