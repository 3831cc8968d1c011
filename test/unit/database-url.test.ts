/**
 * SVC_DATABASE_URL, SVC_DATABASE_CA_FILE and SVC_DATABASE_POOL_SIZE: parsing and validation
 * through loadConfig (as the server reads them), the masking of the password, and the options
 * that postgresOptions hands to Bun's SQL for each libpq sslmode.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config";
import { maskDatabaseUrl, postgresOptions } from "../../src/db/database-url";
import { tempDir } from "../helpers";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CA = join(dir, "ca.pem");
const CA_TEXT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
writeFileSync(CA, CA_TEXT);
const NOT_PEM = join(dir, "not.pem");
writeFileSync(NOT_PEM, "hello");

const PASSWORD = "s3cr3t-Pa55";
const URL_ = `postgres://flagsvc:${PASSWORD}@db.internal:5432/flagsvc`;

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(Object.keys(env))}`);
}

describe("maskDatabaseUrl", () => {
  const cases: [string, string][] = [
    [URL_, "postgres://flagsvc:***@db.internal:5432/flagsvc"],
    ["postgresql://flagsvc@db/flagsvc", "postgresql://flagsvc@db/flagsvc"],
    ["postgres://db:5432/flagsvc", "postgres://db:5432/flagsvc"],
    // an unencoded @ or / in the password: still hidden, up to the last @
    ["postgres://u:p@ss/w0rd@db/x", "postgres://u:***@db/x"],
    ["postgres://u@db/x?password=hunter2&sslmode=require", "postgres://u@db/x?password=***&sslmode=require"],
    ["not a url: hunter2", "***"],
  ];
  for (const [raw, masked] of cases) test(raw, () => expect(maskDatabaseUrl(raw)).toBe(masked));
});

describe("SVC_DATABASE_URL", () => {
  test("unset: SQLite, as before", () => {
    const c = loadConfig({});
    expect(c.databaseUrl).toBeUndefined();
    expect(c.databaseCaFile).toBeUndefined();
    expect(c.databasePoolSize).toBe(10);
  });

  test("postgres:// and postgresql:// with sslmode; sslmode and sslrootcert leave the URL", () => {
    const c = loadConfig({ SVC_DATABASE_URL: `postgresql://flagsvc:${PASSWORD}@db:6432/flags?sslmode=verify-full&sslrootcert=${CA}&application_name=flagsvc` });
    expect(c.databaseUrl).toEqual({
      url: `postgresql://flagsvc:${PASSWORD}@db:6432/flags?application_name=flagsvc`,
      sslMode: "verify-full",
      caFile: CA,
      masked: "postgresql://flagsvc:***@db:6432/flags?application_name=flagsvc",
    });
    expect(c.databaseCaFile).toBe(CA);
  });

  test("--database-url wins over the variable", () => {
    const c = loadConfig({ SVC_DATABASE_URL: "postgres://a@one/x" }, new Map([["--database-url", "postgres://b@two/y"]]));
    expect(c.databaseUrl?.url).toBe("postgres://b@two/y");
  });

  const bad: [string, string][] = [
    ["", "must not be empty"],
    [`mysql://root:${PASSWORD}@db/x`, "must start with postgres:// or postgresql://, not mysql://"],
    [`flagsvc:${PASSWORD}@db`, "is not a URL such as postgres://"],
    ["postgres:///flagsvc", "names no host"],
    [`postgres://flagsvc:${PASSWORD}@:5432/x`, "is not a valid URL (postgres://flagsvc:***@:5432/x)"],
    [`postgres://flagsvc:${PASSWORD}@db:99999/x`, "is not a valid URL (postgres://flagsvc:***@db:99999/x)"],
    [`postgres://flagsvc:${PASSWORD}@db:0/x`, "port 0"],
    [`postgres://flagsvc:${PASSWORD}@db/x/y`, "the path must be one database name"],
    [`postgres://flagsvc:${PASSWORD}@db/x?sslmode=strict`, 'sslmode "strict" is not one of disable, allow, prefer, require, verify-ca, verify-full'],
    [`postgres://flagsvc:${PASSWORD}@db/x?sslcert=/c.pem`, "the parameter sslcert is not supported"],
    [`postgres://flagsvc:${PASSWORD}@db/x?sslmode=verify-ca&sslrootcert=${dir}/missing.pem`, "cannot read"],
    [`postgres://flagsvc:${PASSWORD}@db/x?sslmode=verify-ca&sslrootcert=${NOT_PEM}`, "holds no PEM certificate"],
    [`postgres://flagsvc:${PASSWORD}@db/x?sslmode=prefer&sslrootcert=${CA}`, "sslmode prefer never checks a certificate"],
  ];
  for (const [raw, problem] of bad) {
    test(`refused, naming the variable, never the password: ${maskDatabaseUrl(raw) || "(empty)"}`, () => {
      const e = configError({ SVC_DATABASE_URL: raw });
      expect(e.variable).toBe("SVC_DATABASE_URL");
      expect(e.message).toStartWith("invalid SVC_DATABASE_URL (--database-url): ");
      expect(e.message).toContain(problem);
      expect(e.message).not.toContain(PASSWORD);
    });
  }
});

describe("SVC_DATABASE_CA_FILE and SVC_DATABASE_POOL_SIZE", () => {
  test("the CA file alone, or the same file as the URL's sslrootcert", () => {
    expect(loadConfig({ SVC_DATABASE_URL: URL_, SVC_DATABASE_CA_FILE: CA }).databaseCaFile).toBe(CA);
    expect(loadConfig({ SVC_DATABASE_URL: `${URL_}?sslrootcert=${CA}`, SVC_DATABASE_CA_FILE: CA }).databaseCaFile).toBe(CA);
  });

  test("refused: two different CA files, a CA file without a URL, a file that is no certificate", () => {
    writeFileSync(join(dir, "other.pem"), CA_TEXT);
    expect(configError({ SVC_DATABASE_URL: `${URL_}?sslrootcert=${join(dir, "other.pem")}`, SVC_DATABASE_CA_FILE: CA }).message).toContain("give the CA file once");
    expect(configError({ SVC_DATABASE_CA_FILE: CA }).message).toBe("invalid SVC_DATABASE_CA_FILE (--database-ca-file): is set but SVC_DATABASE_URL is not (the CA file is for PostgreSQL)");
    expect(configError({ SVC_DATABASE_URL: URL_, SVC_DATABASE_CA_FILE: NOT_PEM }).variable).toBe("SVC_DATABASE_CA_FILE");
  });

  test("pool size 1 to 1000", () => {
    expect(loadConfig({ SVC_DATABASE_POOL_SIZE: "1" }).databasePoolSize).toBe(1);
    expect(configError({ SVC_DATABASE_POOL_SIZE: "0" }).message).toBe("invalid SVC_DATABASE_POOL_SIZE (--database-pool-size): 0 is out of range (1 to 1000)");
    expect(configError({ SVC_DATABASE_POOL_SIZE: "ten" }).variable).toBe("SVC_DATABASE_POOL_SIZE");
  });
});

describe("postgresOptions", () => {
  const options = (env: Record<string, string>) => postgresOptions(loadConfig({ SVC_DATABASE_URL: URL_, ...env }));
  const withMode = (mode: string, env: Record<string, string> = {}) => options({ SVC_DATABASE_URL: `${URL_}?sslmode=${mode}`, ...env });

  test("no sslmode: libpq's prefer; the pool size; the URL with its password for the driver", () => {
    expect(options({ SVC_DATABASE_POOL_SIZE: "4" })).toEqual({ url: URL_, tls: "prefer", max: 4 });
  });

  test("disable, allow, prefer and require without a CA are Bun's own modes", () => {
    for (const mode of ["disable", "allow", "prefer", "require"]) expect(withMode(mode).tls).toBe(mode as never);
  });

  test("verify-full checks the chain and the host name, with the CA file when given", () => {
    expect(withMode("verify-full").tls).toEqual({ rejectUnauthorized: true });
    expect(withMode("verify-full", { SVC_DATABASE_CA_FILE: CA }).tls).toEqual({ ca: CA_TEXT, rejectUnauthorized: true });
    // a CA file without an sslmode: it is given to be checked
    expect(options({ SVC_DATABASE_CA_FILE: CA }).tls).toEqual({ ca: CA_TEXT, rejectUnauthorized: true });
  });

  test("verify-ca, and require with a CA file (as libpq), check the chain but accept any host name", () => {
    for (const [mode, env] of [["verify-ca", {}], ["verify-ca", { SVC_DATABASE_CA_FILE: CA }], ["require", { SVC_DATABASE_CA_FILE: CA }]] as const) {
      const tls = withMode(mode, env).tls as Exclude<ReturnType<typeof postgresOptions>["tls"], string>;
      expect(tls.rejectUnauthorized).toBe(true);
      expect(tls.ca).toBe("SVC_DATABASE_CA_FILE" in env ? CA_TEXT : undefined);
      expect(typeof tls.checkServerIdentity).toBe("function");
      expect(tls.checkServerIdentity!()).toBeUndefined();
    }
  });

  test("without SVC_DATABASE_URL there is nothing to connect to", () => {
    expect(() => postgresOptions(loadConfig({}))).toThrow("SVC_DATABASE_URL is not set");
  });
});
