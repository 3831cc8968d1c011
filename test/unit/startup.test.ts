/** Bootstrap, TLS material, identifiers and the scheduler, on real files. */
import { afterAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bootstrap } from "../../src/bootstrap";
import { DataDirLockedError } from "../../src/db/lock";
import { createContext } from "../../src/server";
import { ConfigError, loadConfig } from "../../src/config";
import { newId, randomBase62 } from "../../src/lib/ids";
import { createLogger } from "../../src/lib/log";
import { Scheduler } from "../../src/lib/scheduler";
import { loadTls, tlsPaths } from "../../src/tls";
import { tempDir, testApp } from "../helpers";

describe("bootstrap", () => {
  test("first start creates project default with three environments; the next start creates nothing", async () => {
    const h = await testApp();
    try {
      const project = (await h.ctx.stores.projects.bySlug("default"))!;
      expect(project.id).toMatch(/^proj_[A-Za-z0-9]{22}$/);
      expect(project.environments.map((e) => e.slug)).toEqual(["development", "staging", "production"]);
      for (const e of project.environments) expect(e.id).toMatch(/^env_[A-Za-z0-9]{22}$/);
      expect(project.createdAt).toBe("2026-11-22T10:00:00.000Z");

      const again = await bootstrap(h.ctx);
      // The second start prints nothing (no secret, nothing created).
      expect(again).toEqual({ firstStart: false, lines: [] });
      expect(h.sqlite.query("SELECT COUNT(*) AS n FROM projects").get()).toEqual({ n: 1 });
    } finally {
      h.close();
    }
  });

  test("a deleted default project is not brought back", async () => {
    const h = await testApp();
    try {
      h.sqlite.run("DELETE FROM projects");
      expect(await bootstrap(h.ctx)).toEqual({ firstStart: false, lines: [] });
      expect(h.sqlite.query("SELECT COUNT(*) AS n FROM projects").get()).toEqual({ n: 0 });
    } finally {
      h.close();
    }
  });
});

describe("data-dir lock", () => {
  test("a second context on a data dir in use is refused until the first closes", async () => {
    const h = await testApp();
    try {
      await expect(createContext(h.ctx.config)).rejects.toThrow(DataDirLockedError);
      h.ctx.close();
      const second = await createContext(h.ctx.config);
      second.close();
    } finally {
      h.close();
    }
  });
});

describe("TLS", () => {
  const dir = tempDir();
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const config = loadConfig({ SVC_DATA_DIR: dir });
  const now = Date.parse("2026-11-22T10:00:00.000Z");

  test("generates a self-signed ECDSA certificate for localhost and loopback, key 0600", async () => {
    const tls = await loadTls(config, now);
    expect(tls.source).toBe("generated");
    const cert = new X509Certificate(tls.cert);
    expect(cert.subjectAltName).toContain("DNS:localhost");
    expect(cert.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(cert.subjectAltName).toMatch(/IP Address:(::1|0:0:0:0:0:0:0:1)/);
    expect(cert.publicKey.asymmetricKeyType).toBe("ec");
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.ca).toBe(false); // a leaf: trusting it trusts nothing it could sign
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(now + 365 * 86_400_000);
    const paths = tlsPaths(dir);
    expect(statSync(paths.key).mode & 0o777).toBe(0o600);
    expect(statSync(paths.dir).mode & 0o777).toBe(0o700);
    expect(readFileSync(paths.cert, "utf8")).toBe(tls.cert);
  });

  test("reuses it on the next start", async () => {
    const first = readFileSync(tlsPaths(dir).cert, "utf8");
    const tls = await loadTls(config, now + 86_400_000);
    expect(tls.source).toBe("reused");
    expect(tls.cert).toBe(first);
  });

  test("renews it within 30 days of expiry", async () => {
    const first = readFileSync(tlsPaths(dir).cert, "utf8");
    const expires = new Date(new X509Certificate(first).validTo).getTime();
    const tls = await loadTls(config, expires - 10 * 86_400_000);
    expect(tls.source).toBe("generated");
    expect(tls.cert).not.toBe(first);
  });

  test("configured files win", async () => {
    const own = loadConfig({ SVC_DATA_DIR: dir, SVC_TLS_CERT: tlsPaths(dir).cert, SVC_TLS_KEY: tlsPaths(dir).key });
    const tls = await loadTls(own, now);
    expect(tls.source).toBe("configured");
    expect(tls.certFile).toBe(tlsPaths(dir).cert);
  });

  test("a configured key that is not the certificate's, or a file that does not parse: a configuration error", async () => {
    const other = tempDir();
    try {
      const foreign = await loadTls(loadConfig({ SVC_DATA_DIR: other }), now); // another generated pair
      writeFileSync(join(other, "foreign.key"), foreign.key);
      writeFileSync(join(other, "broken.pem"), "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
      const cases: [Record<string, string>, RegExp][] = [
        [{ SVC_TLS_CERT: tlsPaths(dir).cert, SVC_TLS_KEY: join(other, "foreign.key") }, /^invalid SVC_TLS_KEY \(--tls-key\): .*foreign\.key is not the private key of the certificate in /],
        [{ SVC_TLS_CERT: join(other, "broken.pem"), SVC_TLS_KEY: tlsPaths(dir).key }, /^invalid SVC_TLS_CERT \(--tls-cert\): .*broken\.pem is not a valid PEM certificate/],
      ];
      for (const [env, message] of cases) {
        const error = await loadTls(loadConfig({ SVC_DATA_DIR: dir, ...env }), now).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message).toMatch(message);
      }
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});

describe("identifiers", () => {
  test("prefix, 22 base62 characters (>128 bits), no repeats", () => {
    const ids = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const id = newId("flag");
      expect(id).toMatch(/^flag_[0-9A-Za-z]{22}$/);
      ids.add(id);
    }
    expect(ids.size).toBe(10_000);
    expect(22 * Math.log2(62)).toBeGreaterThan(128);
  });

  test("every base62 character is used, roughly evenly", () => {
    const counts = new Map<string, number>();
    for (const ch of randomBase62(62_000)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect(counts.size).toBe(62);
    for (const c of counts.values()) expect(c).toBeGreaterThan(700);
  });
});

describe("scheduler", () => {
  test("runs a job, survives its throw, and stops all", async () => {
    let written = "";
    const scheduler = new Scheduler(createLogger({ level: "error", format: "json", write: (c) => (written += c) }));
    let runs = 0;
    scheduler.every("tick", "* * * * * *", () => {
      runs++;
      throw new Error("boom");
    });
    expect(() => scheduler.every("tick", "* * * * * *", () => {})).toThrow("already scheduled");
    await Bun.sleep(1100);
    expect(runs).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setImmediate(r));
    expect(written).toContain('"job":"tick"');
    scheduler.stopAll();
    const after = runs;
    await Bun.sleep(1100);
    expect(runs).toBe(after);
    expect(scheduler.names()).toEqual([]);
  });
});
