/**
 * TLS material for the listener. Configured files (SVC_TLS_CERT/SVC_TLS_KEY) win; otherwise a
 * self-signed ECDSA P-256 certificate for localhost, 127.0.0.1, ::1 and the host name is made
 * in-process once (no openssl binary) and kept in DATA_DIR/tls/ (key mode 0600), then reused.
 * It is made anew when it is within 30 days of expiry. The x509 library is loaded only to
 * generate, so an ordinary start does not pay for it.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { ConfigError, type Config } from "./config";

export interface TlsMaterial {
  cert: string;
  key: string;
  source: "configured" | "generated" | "reused";
  /** Where the certificate lives, for the banner. */
  certFile: string;
  expiresAt: Date;
}

/**
 * TLS 1.2 cipher suites offered (TLS 1.3 has only strong ones): Mozilla's "intermediate"
 * profile without the DHE suites (no DH parameters here): forward secrecy and AEAD only, for
 * ECDSA (the generated certificate) and RSA certificates alike. TLS 1.0 and 1.1 are off in Bun.
 */
export const TLS12_CIPHERS = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
].join(":");

const VALID_DAYS = 397;
const RENEW_DAYS = 30;
const DAY_MS = 86_400_000;

export function tlsPaths(dataDir: string) {
  const dir = join(dataDir, "tls");
  return { dir, cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
}

export async function loadTls(config: Config, now = Date.now()): Promise<TlsMaterial> {
  const configured = configuredTls(config);
  if (configured) return configured;
  const paths = tlsPaths(config.dataDir);
  if (existsSync(paths.cert) && existsSync(paths.key)) {
    const cert = readFileSync(paths.cert, "utf8");
    const expiresAt = expiry(cert);
    if (expiresAt.getTime() - now > RENEW_DAYS * DAY_MS) {
      return { cert, key: readFileSync(paths.key, "utf8"), source: "reused", certFile: paths.cert, expiresAt };
    }
  }
  const generated = await generateSelfSigned(now);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  writeAtomically(paths.key, generated.key, 0o600);
  writeAtomically(paths.cert, generated.cert, 0o644);
  return { ...generated, source: "generated", certFile: paths.cert };
}

/**
 * SVC_TLS_CERT and SVC_TLS_KEY, checked (a ConfigError when they do not parse or do not belong
 * together), or null when they are not set. The server calls it before it touches the data dir.
 */
export function configuredTls(config: Config): TlsMaterial | null {
  if (!config.tlsCert || !config.tlsKey) return null;
  const cert = readFileSync(config.tlsCert, "utf8");
  const key = readFileSync(config.tlsKey, "utf8");
  return { cert, key, source: "configured", certFile: config.tlsCert, expiresAt: checkPair(cert, key, config.tlsCert, config.tlsKey) };
}

/**
 * A configured certificate and key must parse and belong together: a configuration error (exit
 * 2, which the systemd unit does not restart), not a failure to listen. Returns the expiry.
 */
function checkPair(cert: string, key: string, certFile: string, keyFile: string): Date {
  let parsed: X509Certificate;
  try {
    parsed = new X509Certificate(cert);
  } catch (e) {
    throw new ConfigError("SVC_TLS_CERT", "--tls-cert", `${certFile} is not a valid PEM certificate (${(e as Error).message})`);
  }
  let matches: boolean;
  try {
    matches = parsed.checkPrivateKey(createPrivateKey(key));
  } catch (e) {
    throw new ConfigError("SVC_TLS_KEY", "--tls-key", `${keyFile} is not a valid PEM private key (${(e as Error).message})`);
  }
  if (!matches) throw new ConfigError("SVC_TLS_KEY", "--tls-key", `${keyFile} is not the private key of the certificate in ${certFile}`);
  return new Date(parsed.validTo);
}

function expiry(pem: string): Date {
  return new Date(new X509Certificate(pem).validTo);
}

function writeAtomically(file: string, text: string, mode: number): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode });
  chmodSync(tmp, mode); // the umask may have narrowed or widened nothing; be exact
  renameSync(tmp, file);
}

/** DNS names for the certificate: localhost and this machine's name when it is a valid one. */
function dnsNames(): string[] {
  const names = ["localhost"];
  const host = hostname().toLowerCase();
  if (host !== "localhost" && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(host)) names.push(host);
  return names;
}

async function generateSelfSigned(now: number): Promise<{ cert: string; key: string; expiresAt: Date }> {
  await import("reflect-metadata"); // @peculiar/x509's dependency injection needs it first
  const x509 = await import("@peculiar/x509");
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const expiresAt = new Date(now + VALID_DAYS * DAY_MS);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex").replace(/^[89a-f]/, "1"),
    name: "CN=localhost, O=flagsvc self-signed",
    notBefore: new Date(now - 3_600_000),
    notAfter: expiresAt,
    signingAlgorithm: alg,
    keys,
    extensions: [
      // A leaf, not a CA: whoever adds it to a trust store trusts this server and nothing it
      // could sign (clients given it as their CA file accept it as the server's own certificate).
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...dnsNames().map((value) => ({ type: "dns" as const, value })),
        { type: "ip", value: "127.0.0.1" },
        { type: "ip", value: "::1" },
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey)).toString("base64");
  const key = `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
  return { cert: cert.toString("pem"), key, expiresAt };
}
