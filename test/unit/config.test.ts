import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, DEFAULT_RATE_LIMITS, OPTIONS, loadConfig } from "../../src/config";
import { parseArgs } from "../../src/main";
import { tempDir } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CERT = join(dir, "cert.pem");
const KEY = join(dir, "key.pem");
writeFileSync(CERT, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
writeFileSync(KEY, "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");

const ADMIN_KEY = `svc_admin_${"A1b2".repeat(8)}`;

describe("defaults", () => {
  test("every option has its documented default", () => {
    const c = loadConfig({});
    expect(c).toEqual({
      dataDir: resolve("./data"),
      databaseUrl: undefined,
      databaseCaFile: undefined,
      databasePoolSize: 10,
      host: "0.0.0.0",
      port: 8443,
      tlsCert: undefined,
      tlsKey: undefined,
      behindProxy: false,
      edition: "ce",
      adminEmail: "admin@localhost",
      adminPassword: undefined,
      adminKey: undefined,
      jwtSecret: undefined,
      webhookRetryDelays: [60, 300, 1800, 7200],
      webhookTimeoutMs: 10000,
      outboundAllowedHosts: ["external"],
      corsOrigins: [],
      pluginMemoryMb: 64,
      auditRetentionDays: 365,
      insightsFlushSeconds: 10,
      rateLimits: { ...DEFAULT_RATE_LIMITS },
      metricsToken: undefined,
      metricsPublic: false,
      shutdownDelaySeconds: 0,
      logLevel: "info",
      logFormat: "json",
    });
    expect(DEFAULT_RATE_LIMITS).toEqual({ eval: 10000, test: 1000, mgmt: 500, full: 500, client: 10000, admin: 1000, user: 1000, anonymous: 300 });
  });

  test("log format is pretty on a terminal", () => {
    expect(loadConfig({}, new Map(), true).logFormat).toBe("pretty");
  });
});

describe("every variable is parsed", () => {
  const cases: [string, string, Partial<Record<string, unknown>>][] = [
    ["SVC_DATA_DIR", "/var/lib/flagsvc", { dataDir: "/var/lib/flagsvc" }],
    ["SVC_HOST", "127.0.0.1", { host: "127.0.0.1" }],
    ["SVC_HOST", "[::1]", { host: "::1" }],
    ["SVC_PORT", "0", { port: 0 }],
    ["SVC_PORT", "65535", { port: 65535 }],
    ["SVC_BEHIND_PROXY", "true", { behindProxy: true }],
    ["SVC_BEHIND_PROXY", "0", { behindProxy: false }],
    ["SVC_EDITION", "pro", { edition: "pro" }],
    ["SVC_EDITION", "CE", { edition: "ce" }],
    ["SVC_ADMIN_EMAIL", "Ops@Example.com", { adminEmail: "ops@example.com" }],
    ["SVC_ADMIN_PASSWORD", "correct horse battery", { adminPassword: "correct horse battery" }],
    ["SVC_ADMIN_KEY", ADMIN_KEY, { adminKey: ADMIN_KEY }],
    ["SVC_JWT_SECRET", "s".repeat(32), { jwtSecret: "s".repeat(32) }],
    ["SVC_WEBHOOK_RETRY_DELAYS", "1, 2,3 ,4", { webhookRetryDelays: [1, 2, 3, 4] }],
    ["SVC_WEBHOOK_TIMEOUT_MS", "250", { webhookTimeoutMs: 250 }],
    ["SVC_PLUGIN_MEMORY_MB", "17", { pluginMemoryMb: 17 }],
    ["SVC_AUDIT_RETENTION_DAYS", "30", { auditRetentionDays: 30 }],
    ["SVC_AUDIT_RETENTION_DAYS", "0", { auditRetentionDays: 0 }],
    ["SVC_INSIGHTS_FLUSH_SECONDS", "60", { insightsFlushSeconds: 60 }],
    ["SVC_OUTBOUND_ALLOWED_HOSTS", "loopback, *.Example.com,10.0.0.0/8,fd00::/8,[::1],hooks.internal", { outboundAllowedHosts: ["loopback", "*.example.com", "10.0.0.0/8", "fd00::/8", "::1", "hooks.internal"] }],
    ["SVC_RATE_LIMITS", "eval:50000,anonymous:100", { rateLimits: { ...DEFAULT_RATE_LIMITS, eval: 50000, anonymous: 100 } }],
    ["SVC_CORS_ORIGINS", "https://app.example.com, http://localhost:5173/", { corsOrigins: ["https://app.example.com", "http://localhost:5173"] }],
    ["SVC_CORS_ORIGINS", "*", { corsOrigins: ["*"] }],
    ["SVC_METRICS_TOKEN", "m".repeat(40), { metricsToken: "m".repeat(40) }],
    ["SVC_METRICS_PUBLIC", "true", { metricsPublic: true }],
    ["SVC_SHUTDOWN_DELAY_SECONDS", "5", { shutdownDelaySeconds: 5 }],
    ["SVC_LOG_LEVEL", "debug", { logLevel: "debug" }],
    ["SVC_LOG_FORMAT", "pretty", { logFormat: "pretty" }],
    ["SVC_DATABASE_URL", "postgres://flagsvc:pw@db:5432/flagsvc", { databaseUrl: { url: "postgres://flagsvc:pw@db:5432/flagsvc", sslMode: undefined, caFile: undefined, masked: "postgres://flagsvc:***@db:5432/flagsvc" } }],
    ["SVC_DATABASE_POOL_SIZE", "25", { databasePoolSize: 25 }],
  ];
  for (const [name, value, expected] of cases) {
    test(`${name}=${value}`, () => {
      expect(loadConfig({ [name]: value })).toMatchObject(expected);
    });
  }

  test("SVC_TLS_CERT and SVC_TLS_KEY", () => {
    expect(loadConfig({ SVC_TLS_CERT: CERT, SVC_TLS_KEY: KEY })).toMatchObject({ tlsCert: CERT, tlsKey: KEY });
  });

  test("the cases above cover every option", () => {
    // SVC_DATABASE_CA_FILE: test/unit/database-url.test.ts.
    const covered = new Set([...cases.map((c) => c[0]), "SVC_TLS_CERT", "SVC_TLS_KEY", "SVC_DATABASE_CA_FILE"]);
    expect(OPTIONS.map((o) => o.env).filter((e) => !covered.has(e))).toEqual([]);
  });
});

describe("flags", () => {
  test("each variable has a flag, and a flag wins over its variable", () => {
    for (const o of OPTIONS) expect(o.flag).toBe(`--${o.env.slice(4).toLowerCase().replace(/_/g, "-")}`);
    const c = loadConfig({ SVC_PORT: "1000", SVC_EDITION: "ce" }, new Map([["--port", "2000"]]));
    expect(c.port).toBe(2000);
    expect(c.edition).toBe("ce");
  });

  test("parseArgs: command, positionals, --flag value, --flag=value, bare boolean", () => {
    const p = parseArgs(["backup", "out.db", "--data-dir", "/d", "--port=9", "--behind-proxy"]);
    expect(p.command).toBe("backup");
    expect(p.args).toEqual(["out.db"]);
    expect([...p.flags]).toEqual([["--data-dir", "/d"], ["--port", "9"], ["--behind-proxy", true]]);
    expect(loadConfig({}, p.flags).behindProxy).toBe(true);
    expect(parseArgs([]).command).toBe("serve");
    expect(parseArgs(["--port", "1"]).command).toBe("serve");
    expect(parseArgs(["migrate", "--help"]).help).toBe(true);
    expect(loadConfig({}, parseArgs(["--behind-proxy", "false", "--port", "1"]).flags)).toMatchObject({ behindProxy: false, port: 1 });
    expect(parseArgs(["--behind-proxy", "migrate"])).toMatchObject({ command: "migrate", flags: new Map([["--behind-proxy", true]]) });
  });

  test("parseArgs refuses unknown commands and options, and a flag without its value", () => {
    expect(() => parseArgs(["frobnicate"])).toThrow('unknown command "frobnicate"');
    expect(() => parseArgs(["--prot", "1"])).toThrow("unknown option --prot");
    expect(() => parseArgs(["-x"])).toThrow("unknown option -x");
    expect(() => parseArgs(["--port"])).toThrow("option --port needs a value");
  });
});

describe("bad values stop start-up naming the variable", () => {
  const unreadable = join(dir, "unreadable.pem");
  writeFileSync(unreadable, "x");
  chmodSync(unreadable, 0o000);
  const notPem = join(dir, "not.pem");
  writeFileSync(notPem, "hello");

  const cases: [Record<string, string>, string, RegExp][] = [
    [{ SVC_PORT: "abc" }, "SVC_PORT", /"abc" is not a port number/],
    [{ SVC_PORT: "70000" }, "SVC_PORT", /out of range/],
    [{ SVC_PORT: "-1" }, "SVC_PORT", /not a port number/],
    [{ SVC_PORT: "80.5" }, "SVC_PORT", /not a port number/],
    [{ SVC_HOST: "bad host" }, "SVC_HOST", /not an IP address or host name/],
    [{ SVC_HOST: "999.1.1.1" }, "SVC_HOST", /"999.1.1.1" is not an IP address or host name/],
    [{ SVC_TLS_CERT: "", SVC_TLS_KEY: KEY }, "SVC_TLS_CERT", /must not be empty/],
    [{ SVC_DATA_DIR: " " }, "SVC_DATA_DIR", /must not be empty/],
    [{ SVC_EDITION: "gold" }, "SVC_EDITION", /"gold" is not one of ce, pro/],
    [{ SVC_BEHIND_PROXY: "maybe" }, "SVC_BEHIND_PROXY", /not true or false/],
    [{ SVC_TLS_CERT: join(dir, "missing.pem"), SVC_TLS_KEY: KEY }, "SVC_TLS_CERT", /cannot read .*ENOENT/],
    [{ SVC_TLS_CERT: notPem, SVC_TLS_KEY: KEY }, "SVC_TLS_CERT", /holds no PEM certificate/],
    [{ SVC_TLS_CERT: CERT, SVC_TLS_KEY: CERT }, "SVC_TLS_KEY", /holds no PEM private key/],
    [{ SVC_TLS_CERT: CERT }, "SVC_TLS_KEY", /must be set together/],
    [{ SVC_TLS_KEY: KEY }, "SVC_TLS_CERT", /must be set together/],
    [{ SVC_ADMIN_EMAIL: "nobody" }, "SVC_ADMIN_EMAIL", /not an email address/],
    [{ SVC_ADMIN_PASSWORD: "short" }, "SVC_ADMIN_PASSWORD", /at least 10 characters/],
    [{ SVC_ADMIN_KEY: "svc_admin_tooShort" }, "SVC_ADMIN_KEY", /must match svc_admin_/],
    [{ SVC_JWT_SECRET: "short" }, "SVC_JWT_SECRET", /at least 32 characters/],
    [{ SVC_METRICS_TOKEN: "short" }, "SVC_METRICS_TOKEN", /32 to 256 characters/],
    [{ SVC_SHUTDOWN_DELAY_SECONDS: "301" }, "SVC_SHUTDOWN_DELAY_SECONDS", /out of range/],
    [{ SVC_WEBHOOK_RETRY_DELAYS: "1,2,3" }, "SVC_WEBHOOK_RETRY_DELAYS", /expected 4/],
    [{ SVC_WEBHOOK_RETRY_DELAYS: "1,2,x,4" }, "SVC_WEBHOOK_RETRY_DELAYS", /"x" is not a whole number/],
    [{ SVC_WEBHOOK_TIMEOUT_MS: "0" }, "SVC_WEBHOOK_TIMEOUT_MS", /out of range/],
    [{ SVC_PLUGIN_MEMORY_MB: "16" }, "SVC_PLUGIN_MEMORY_MB", /out of range \(17 to 4096\)/],
    [{ SVC_AUDIT_RETENTION_DAYS: "-1" }, "SVC_AUDIT_RETENTION_DAYS", /"-1" is not a whole number of days/],
    [{ SVC_AUDIT_RETENTION_DAYS: "1.5" }, "SVC_AUDIT_RETENTION_DAYS", /"1.5" is not a whole number of days/],
    [{ SVC_AUDIT_RETENTION_DAYS: "36501" }, "SVC_AUDIT_RETENTION_DAYS", /out of range/],
    [{ SVC_OUTBOUND_ALLOWED_HOSTS: "10.0.0.0/33" }, "SVC_OUTBOUND_ALLOWED_HOSTS", /not a valid CIDR/],
    [{ SVC_OUTBOUND_ALLOWED_HOSTS: "exa mple" }, "SVC_OUTBOUND_ALLOWED_HOSTS", /host glob or a CIDR/],
    [{ SVC_OUTBOUND_ALLOWED_HOSTS: " , " }, "SVC_OUTBOUND_ALLOWED_HOSTS", /at least one/],
    [{ SVC_CORS_ORIGINS: "app.example.com" }, "SVC_CORS_ORIGINS", /not an origin such as https:\/\/app.example.com/],
    [{ SVC_CORS_ORIGINS: "https://app.example.com/path" }, "SVC_CORS_ORIGINS", /not an origin \(scheme:\/\/host\[:port\], no path\)/],
    [{ SVC_CORS_ORIGINS: "ftp://files.example.com" }, "SVC_CORS_ORIGINS", /not an origin/],
    [{ SVC_RATE_LIMITS: "eval=5" }, "SVC_RATE_LIMITS", /not name:number/],
    [{ SVC_RATE_LIMITS: "bogus:5" }, "SVC_RATE_LIMITS", /not one of eval, test/],
    [{ SVC_RATE_LIMITS: "eval:0" }, "SVC_RATE_LIMITS", /out of range/],
    [{ SVC_RATE_LIMITS: "eval:7,EVAL:9" }, "SVC_RATE_LIMITS", /eval is given twice/],
    [{ SVC_LOG_LEVEL: "loud" }, "SVC_LOG_LEVEL", /not one of debug/],
    [{ SVC_LOG_FORMAT: "xml" }, "SVC_LOG_FORMAT", /not one of pretty, json/],
  ];
  if (process.getuid?.() !== 0) cases.push([{ SVC_TLS_CERT: unreadable, SVC_TLS_KEY: KEY }, "SVC_TLS_CERT", /cannot read .*EACCES/]);

  for (const [env, variable, problem] of cases) {
    test(`${JSON.stringify(env)} -> ${variable}`, () => {
      let error: unknown;
      try {
        loadConfig(env);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      const e = error as ConfigError;
      expect(e.variable).toBe(variable);
      expect(e.message).toStartWith(`invalid ${variable} (--`);
      expect(e.message).toMatch(problem);
      expect(e.message).not.toContain("\n");
    });
  }

  test("a bad flag value names the variable and the flag", () => {
    expect(() => loadConfig({}, new Map([["--port", "x"]]))).toThrow('invalid SVC_PORT (--port): "x" is not a port number (0-65535)');
  });

  test("secrets are not echoed back in the error", () => {
    try {
      loadConfig({ SVC_ADMIN_PASSWORD: "hunter2" });
      throw new Error("expected a ConfigError");
    } catch (e) {
      expect((e as Error).message).not.toContain("hunter2");
    }
  });
});

test("the README's configuration table names every variable", () => {
  const readme = readFileSync(join(import.meta.dir, "../../README.md"), "utf8");
  expect(OPTIONS.map((o) => o.env).filter((v) => !readme.includes(`\`${v}\``))).toEqual([]);
});
