/**
 * What the smoke script, the benchmarks and the e2e tests need to drive a `flagsvc` process:
 * a clean environment, a free port, a child's output as text, and raw TLS / TCP probes.
 */
import { createServer, connect as netConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";

/** flagsvc frames its start banner with two rules of dashes: once the second is out, all of it is. */
export const BANNER_END = /^-{20,}$[\s\S]*^-{20,}$/m;

/** PATH and HOME of this process plus `extra`; nothing else (no SVC_* from the caller's shell). */
export function baseEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ["PATH", "HOME"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  for (const [key, value] of Object.entries(extra)) if (value !== undefined) env[key] = value;
  return env;
}

/** A TCP port nothing listens on right now (on 127.0.0.1). */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** Reads a child's stream into `sink` chunk by chunk, as text. */
export async function drain(stream: ReadableStream<Uint8Array>, sink: (text: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    sink(decoder.decode(value, { stream: true }));
  }
  sink(decoder.decode());
}

/** The certificate (DER) served on 127.0.0.1:port, verified against `ca` as `servername`. */
export function servedCertificate(port: number, ca: string, servername = "localhost", timeoutMs = 5_000): Promise<Buffer> {
  return new Promise((done, fail) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, ca, servername, timeout: timeoutMs }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      done(raw);
    });
    socket.once("timeout", () => {
      socket.destroy();
      fail(new Error("TLS handshake timed out"));
    });
    socket.once("error", fail);
  });
}

/** A plain-HTTP request over raw TCP; resolves to whatever came back before the close (or 3 s). */
export function plainHttpExchange(port: number): Promise<string> {
  return new Promise((done) => {
    let received = "";
    const socket = netConnect({ host: "127.0.0.1", port }, () => {
      socket.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    });
    const end = () => {
      clearTimeout(timer);
      done(received);
    };
    const timer = setTimeout(() => {
      socket.destroy();
      done(received);
    }, 3_000);
    socket.on("data", (d) => (received += d.toString("latin1")));
    socket.on("close", end);
    socket.on("error", end);
  });
}

/** The value after `--name` on a script's command line (`argv`: what follows the script), or undefined. */
export function argOf(name: string, argv: readonly string[] = process.argv.slice(2)): string | undefined {
  const at = argv.indexOf(name);
  return at >= 0 ? argv[at + 1] : undefined;
}
