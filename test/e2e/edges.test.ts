/**
 * The edges of issue 20 through the compiled binary: the ways in (`GET /`, the favicon embedded
 * in the binary, the API document's `servers` entry), bodies refused (not UTF-8, `__proto__`)
 * with nothing stored, and the requests Bun's HTTP parser answers itself, sent raw over TLS and
 * held to the bare answers docs/decisions.md lists (a runtime that changes them is noticed).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:tls";
import { callServer } from "../helpers";
import { binaryPath, cleanup, ROOT, startBinary, tempDir, type RunningBinary } from "./binary";

const T = 30_000;
const ADMIN_KEY = `svc_admin_${"edge".repeat(10)}`;

let srv: RunningBinary;
let cwd: string;
beforeAll(async () => {
  await binaryPath();
  cwd = tempDir();
  srv = await startBinary({ cwd, env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_HOST: "127.0.0.1" } });
}, 120_000);
afterAll(async () => {
  await srv?.stop();
  cleanup();
});

/** A request with a body of exactly these bytes (fetch declares their length). */
const send = (method: string, path: string, body: Uint8Array, key = ADMIN_KEY) =>
  fetch(`${srv.url}${path}`, { method, body: body as BodyInit, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, tls: { rejectUnauthorized: false } });

/** Every table's rows, read from the running server's database; `last_used_at` (flushed every 30 s) aside. */
function rows(): Record<string, unknown[]> {
  const db = new Database(join(cwd, "data", "flagsvc.db"), { readonly: true });
  try {
    const tables = db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[];
    return Object.fromEntries(
      tables.map(({ name }) => [name, (db.query(`SELECT * FROM "${name}" ORDER BY rowid`).all() as Record<string, unknown>[]).map(({ last_used_at: _, ...row }) => row)]),
    );
  } finally {
    db.close();
  }
}

/** `request` written raw to a TLS connection; everything read until the server closes it (or 5 s). */
function raw(request: string): Promise<string> {
  return new Promise((done) => {
    let received = "";
    const socket = connect({ host: "127.0.0.1", port: srv.port, rejectUnauthorized: false }, () => socket.write(request));
    const timer = setTimeout(() => socket.destroy(), 5_000);
    const end = () => {
      clearTimeout(timer);
      done(received);
    };
    socket.on("data", (d) => (received += d.toString("latin1")));
    socket.on("close", end);
    socket.on("error", end);
  });
}

describe("ways in", () => {
  test("GET / is the console's page, built into the binary, its chunks fingerprinted and cached; /v1/docs stays", async () => {
    const res = await fetch(`${srv.url}/`, { redirect: "manual", tls: { rejectUnauthorized: false } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const page = await res.text();
    expect(page).toContain("<title>flagsvc</title>");
    const script = /src="(\/assets\/chunk-[a-z0-9]+\.js)"/.exec(page)![1]!;
    const chunk = await fetch(`${srv.url}${script}`, { tls: { rejectUnauthorized: false } });
    expect([chunk.status, chunk.headers.get("cache-control"), chunk.headers.get("content-encoding")]).toEqual([200, "public, max-age=31536000, immutable", "gzip"]);
    const docs = await fetch(`${srv.url}/v1/docs`, { tls: { rejectUnauthorized: false } });
    expect([docs.status, (await docs.text()).includes("<title>flagsvc API</title>")]).toEqual([200, true]);
  }, T);

  test("the favicon is served from the binary, byte for byte the icon in the sources", async () => {
    const res = await fetch(`${srv.url}/favicon.ico`, { tls: { rejectUnauthorized: false } });
    expect([res.status, res.headers.get("content-type"), res.headers.get("cache-control")]).toEqual([200, "image/x-icon", "public, max-age=86400"]);
    expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(ROOT, "src/modules/docs/favicon.ico")))).toBe(true);
  }, T);

  test("the API document names the origin it was fetched from", async () => {
    expect((await callServer(srv.url, "GET", "/v1/openapi.json")).body.servers).toEqual([{ url: srv.url }]);
    const viaName = await callServer(srv.url, "GET", "/v1/openapi.json", { headers: { host: `flags.example.com:${srv.port}` } });
    expect(viaName.body.servers).toEqual([{ url: `https://flags.example.com:${srv.port}` }]);
  }, T);
});

describe("bodies refused, nothing stored", () => {
  test("a body that is not UTF-8: 400 on a management route and on evaluation", async () => {
    const before = rows();
    const created = await send("POST", "/v1/projects", Buffer.concat([Buffer.from('{"slug":"oops","name":"ok'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]));
    expect(created.status).toBe(400);
    expect(created.headers.get("x-request-id")).toBeTruthy();
    expect(await created.json()).toEqual({ error: "VALIDATION_ERROR", message: "Request body is not valid UTF-8", details: [{ path: "body", message: "Not valid UTF-8" }] });
    const key = await callServer(srv.url, "POST", "/v1/projects/default/api-keys", { key: ADMIN_KEY, body: { name: "sdk", scope: "eval", environment: "production" } });
    expect(key.status).toBe(201);
    const withKey = rows();
    const evaluated = await send("POST", "/v1/evaluate", Buffer.concat([Buffer.from('{"flagKey":"a","context":{"n":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]), key.body.key);
    expect([evaluated.status, (await evaluated.json()).message]).toEqual([400, "Request body is not valid UTF-8"]);
    expect(rows()).toEqual(withKey);
    expect(rows().projects).toEqual(before.projects);
    // U+FFFD sent as UTF-8 is taken.
    const kept = await send("POST", "/v1/projects", Buffer.from('{"slug":"kept","name":"ok\u{FFFD}"}'));
    expect([kept.status, (await kept.json()).name]).toEqual([201, "ok\u{FFFD}"]);
  }, T);

  test("__proto__ in a rotation body: 400, the key not rotated", async () => {
    const key = await callServer(srv.url, "POST", "/v1/projects/default/api-keys", { key: ADMIN_KEY, body: { name: "rotated", scope: "eval", environment: "production" } });
    const before = rows();
    const res = await send("POST", `/v1/api-keys/${key.body.id}/rotate`, Buffer.from('{"__proto__":{}}'));
    expect([res.status, (await res.json()).details]).toEqual([400, [{ path: "body.__proto__", message: "Unknown field" }]]);
    expect(rows()).toEqual(before);
  }, T);
});

describe("requests Bun's HTTP parser answers itself (docs/decisions.md: HTTP)", () => {
  const H = "Host: 127.0.0.1\r\nConnection: close\r\n";
  const bare = (status: string) => `HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`;
  const cases: [string, string, string][] = [
    ["a URL of 64 KiB", `GET /v1/health?${"a".repeat(64 * 1024)} HTTP/1.1\r\n${H}\r\n`, bare("431 Request Header Fields Too Large")],
    ["a header of 64 KiB", `GET /v1/health HTTP/1.1\r\n${H}X-Big: ${"a".repeat(64 * 1024)}\r\n\r\n`, bare("431 Request Header Fields Too Large")],
    ["250 header fields", `GET /v1/health HTTP/1.1\r\n${H}${Array.from({ length: 250 }, (_, i) => `X-H${i}: v\r\n`).join("")}\r\n`, bare("431 Request Header Fields Too Large")],
    ["two Content-Length values", `POST /v1/auth/login HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, bare("400 Bad Request")],
    ["Content-Length and chunked", `POST /v1/auth/login HTTP/1.1\r\n${H}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, bare("400 Bad Request")],
    ["a Content-Length that is not a number", `POST /v1/auth/login HTTP/1.1\r\n${H}Content-Length: abc\r\n\r\n`, bare("400 Bad Request")],
    ["Transfer-Encoding: gzip", `POST /v1/auth/login HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n`, bare("400 Bad Request")],
    ["a malformed chunk", `POST /v1/auth/login HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, bare("400 Bad Request")],
    ["a header line without a colon", `GET /v1/health HTTP/1.1\r\n${H}NoColon\r\n\r\n`, bare("400 Bad Request")],
    ["a space before a colon", `GET /v1/health HTTP/1.1\r\n${H}X-A : b\r\n\r\n`, bare("400 Bad Request")],
    ["a folded header", `GET /v1/health HTTP/1.1\r\n${H}X-A: b\r\n c\r\n\r\n`, bare("400 Bad Request")],
    ["a NUL in a header", `GET /v1/health HTTP/1.1\r\n${H}X-A: b\x00c\r\n\r\n`, bare("400 Bad Request")],
    ["no Host", "GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n", bare("400 Bad Request")],
    ["not a request line", "hello\r\n\r\n", bare("400 Bad Request")],
    ["bare-LF line endings", "GET /v1/health HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n", bare("505 HTTP Version Not Supported")],
    ["HTTP/2.0 in the request line", `GET /v1/health HTTP/2.0\r\n${H}\r\n`, bare("505 HTTP Version Not Supported")],
    ["a space in the URL", `GET /v1/he alth HTTP/1.1\r\n${H}\r\n`, bare("505 HTTP Version Not Supported")],
    ["a control character in the URL", `GET /v1/health?a=\x0b HTTP/1.1\r\n${H}\r\n`, bare("505 HTTP Version Not Supported")],
    ["an unknown method", `FROB /v1/health HTTP/1.1\r\n${H}\r\n`, ""],
    ["a lower-case method", `get /v1/health HTTP/1.1\r\n${H}\r\n`, ""],
  ];

  test("the probe itself: a well-formed raw request gets our headers and JSON", async () => {
    const answer = await raw(`GET /v1/health?${"a".repeat(8 * 1024)} HTTP/1.1\r\n${H}\r\n`);
    expect(answer).toStartWith("HTTP/1.1 200 OK\r\n");
    expect(answer).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
    expect(answer).toContain('{"status":"ok"');
  }, T);

  test("a URL or a header of 20 KB (over Bun's default 16 KiB, under the binary's 64 KiB) reaches the application", async () => {
    const url = await raw(`GET /v1/nope?${"a".repeat(20 * 1024)} HTTP/1.1\r\n${H}\r\n`);
    expect(url).toStartWith("HTTP/1.1 404 Not Found\r\n");
    expect(url).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
    expect(url).toContain('{"error":"NOT_FOUND","message":"No route for GET /v1/nope"}');
    const header = await raw(`GET /v1/health HTTP/1.1\r\n${H}X-Big: ${"a".repeat(20 * 1024)}\r\n\r\n`);
    expect(header).toStartWith("HTTP/1.1 200 OK\r\n");
    expect(header).toContain('{"status":"ok"');
  }, T);

  for (const [what, request, answer] of cases) {
    test(`${what}: ${answer === "" ? "closed without an answer" : answer.split("\r\n")[0]}, bare`, async () => {
      expect(await raw(request)).toBe(answer);
    }, T);
  }

  test("the server still serves after all of them", async () => {
    expect((await callServer(srv.url, "GET", "/v1/health")).status).toBe(200);
  }, T);
});
