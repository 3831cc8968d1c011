/**
 * Bodies the fuzzer found taken when they should have been refused, through HTTP on every route
 * that reads a body (the native evaluation routes included): bytes that are not UTF-8, and a
 * `__proto__` member. A refused request changes nothing: every table is compared before and after.
 * The app runs the Pro edition, so that Pro-only routes judge their bodies too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/server";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp, userToken, tableNames, tableRows } from "../helpers";

let h: TestApp;
let admin: Record<string, string>;
let full: Record<string, string>;
let tester: Record<string, string>;
let viewer: Record<string, string>;
let rotated: { id: string; secret: string };
beforeAll(async () => {
  h = await testApp({ SVC_EDITION: "pro" });
  admin = bearer(await seedAdminKey(h.ctx));
  full = bearer((await seedApiKey(h.ctx, "full")).secret);
  tester = bearer((await seedApiKey(h.ctx, "test")).secret);
  viewer = await userToken(h.ctx, "viewer");
  rotated = await seedApiKey(h.ctx, "eval");
});
afterAll(() => h.close());

/** Every table's rows, as one comparable value (leases left out: the node's keeper renews them whatever the requests do). */
async function rows(): Promise<Record<string, string[]>> {
  const tables = (await tableNames(h.ctx)).filter((name) => name !== "leases");
  return Object.fromEntries(await Promise.all(tables.map(async (name) => [name, await tableRows(h.ctx, name)])));
}

/**
 * A request whose body is exactly these bytes, with a JSON content type and, as clients send, its
 * Content-Length (the server reads such a body whole); a stream goes without (read in chunks).
 */
const raw = (method: string, path: string, body: Uint8Array | ReadableStream<Uint8Array>, headers: Record<string, string>) =>
  h.app.handle(
    new Request(`http://localhost${path}`, {
      method,
      headers: { ...headers, "content-type": "application/json", ...(body instanceof Uint8Array ? { "content-length": String(body.byteLength) } : {}) },
      body: body as BodyInit,
    }),
  );

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));

/** Every route that reads a body (all but GET and HEAD), with a caller it lets through. */
function bodyRoutes() {
  const routes = createApp(h.ctx).routes.filter((r) => r.method !== "GET" && r.method !== "HEAD");
  const callerOf = (path: string) =>
    path.startsWith("/v1/testing/") ? tester : path.startsWith("/v1/evaluate") || path.startsWith("/ofrep/") ? full : path === "/v1/auth/logout" || path === "/v1/auth/session" ? viewer : admin;
  return routes.map((r) => ({ method: r.method, path: r.path.replace(":slug", "default").replace(/:[^/]+/g, "x"), caller: callerOf(r.path) }));
}

/** Our 400 as the route answers it: the OFREP routes in OFREP's shape (docs/openfeature.md). */
function asAnswered(path: string, ours: { message: string; details: { path: string; message: string }[] }): unknown {
  if (!path.startsWith("/ofrep/")) return ours;
  const errorCode = ours.details[0]!.path === "body" ? "PARSE_ERROR" : "GENERAL";
  const errorDetails = [ours.message, ...ours.details.map((d) => `${d.path}: ${d.message}`)].join("; ");
  return path === "/ofrep/v1/evaluate/flags" ? { errorCode, errorDetails } : { key: "x", errorCode, errorDetails };
}

const NOT_UTF8 = { error: "VALIDATION_ERROR", message: "Request body is not valid UTF-8", details: [{ path: "body", message: "Not valid UTF-8" }] };

describe("a body that is not UTF-8", () => {
  test("the fuzzer's case: a project name ending in 0xFF 0xFE is 400, nothing stored", async () => {
    const before = await rows();
    const res = await raw("POST", "/v1/projects", bytes('{"slug":"oops","name":"ok', [0xff, 0xfe], '"}'), admin);
    expect(await json(res, 400)).toEqual(NOT_UTF8);
    expect(res.headers.get("x-request-id")).toBeTruthy();
    expect(await rows()).toEqual(before);
  });

  test("400 on every route that reads a body, after the caller is judged; nothing changes", async () => {
    const routes = bodyRoutes();
    expect(routes.length).toBeGreaterThanOrEqual(30);
    const before = await rows();
    for (const { method, path, caller } of routes) {
      for (const body of [bytes('{"name":"ok', [0xff, 0xfe], '"}'), bytes([0xc3, 0x28]), bytes('{"a":"', [0xed, 0xa0, 0x80], '"}'), bytes('{"a":"', [0xf0, 0x9f, 0x98], '"}')]) {
        const res = await raw(method, path, body, caller);
        expect({ route: `${method} ${path}`, status: res.status, body: await res.json() }).toEqual({ route: `${method} ${path}`, status: 400, body: asAnswered(path, NOT_UTF8) });
      }
      // The caller first: without a credential, the spec's 401.
      if (path !== "/v1/auth/login" && !(method === "POST" && path === "/v1/auth/session")) expect({ route: `${method} ${path}`, status: (await raw(method, path, bytes([0xff]), {})).status }).toEqual({ route: `${method} ${path}`, status: 401 });
    }
    expect(await rows()).toEqual(before);
  });

  test("the native evaluation routes: 401 without a key, 403 for another scope, then 400", async () => {
    for (const path of ["/v1/evaluate", "/v1/evaluate/batch"]) {
      const body = bytes('{"flagKey":"a', [0xff], '"}');
      expect((await json(await raw("POST", path, body, {}), 401)).error).toBe("UNAUTHORIZED");
      expect((await json(await raw("POST", path, body, admin), 403)).error).toBe("FORBIDDEN");
      expect(await json(await raw("POST", path, body, full), 400)).toEqual(NOT_UTF8);
    }
  });

  test("a chunked body (no Content-Length) is judged alike", async () => {
    const before = await rows();
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes('{"slug":"chunked","name":"ok'));
        c.enqueue(bytes([0xe2, 0x82]));
        c.enqueue(bytes('"}'));
        c.close();
      },
    });
    expect(await json(await raw("POST", "/v1/projects", stream, admin), 400)).toEqual(NOT_UTF8);
    expect(await rows()).toEqual(before);
  });

  test("U+FFFD sent as UTF-8 is text like any other; a leading byte-order mark is dropped as before", async () => {
    const created = await json(await raw("POST", "/v1/projects", bytes('{"slug":"replacement","name":"ok\u{FFFD}\u{FFFD}"}'), admin), 201);
    expect(created.name).toBe("ok\u{FFFD}\u{FFFD}");
    expect((await json(await h.request("GET", "/v1/projects/replacement", { headers: admin }), 200)).name).toBe("ok\u{FFFD}\u{FFFD}");
    const bom = await json(await raw("POST", "/v1/projects", bytes([0xef, 0xbb, 0xbf], '{"slug":"bom","name":"Bom \u00e9\u{1F600}"}'), admin), 201);
    expect(bom.name).toBe("Bom \u00e9\u{1F600}");
    const evaluated = await json(await raw("POST", "/v1/evaluate", bytes('{"flagKey":"a","context":{"name":"\u{FFFD}"}}'), full), 200);
    expect(evaluated.reason).toBe("FLAG_NOT_FOUND");
  });
});

describe("a __proto__ member", () => {
  const UNKNOWN = { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path: "body.__proto__", message: "Unknown field" }] };

  test("rotating a key with __proto__ in the body is 400, like any unknown field; the key is not rotated", async () => {
    const before = await rows();
    for (const body of ['{"__proto__":1}', '{"__proto__":{}}', '{"__proto__":null}', '{"gracePeriodSeconds":5,"__proto__":{"gracePeriodSeconds":86400}}', '{"\\u005f_proto__":{}}']) {
      const res = await h.request("POST", `/v1/api-keys/${rotated.id}/rotate`, { body, headers: admin });
      expect({ body, status: res.status, answer: await res.json() }).toEqual({ body, status: 400, answer: UNKNOWN });
    }
    expect(await rows()).toEqual(before);
    // The old secret still works: nothing rotated.
    expect((await h.request("POST", "/v1/evaluate", { body: { flagKey: "a" }, headers: bearer(rotated.secret) })).status).toBe(200);
    // An unknown field of another name was already refused, with the same shape.
    expect((await json(await h.request("POST", `/v1/api-keys/${rotated.id}/rotate`, { body: '{"x":1}', headers: admin }), 400)).details).toEqual([{ path: "body.x", message: "Unknown field" }]);
  });

  test("400 on every route that reads a body, with or without the route's own fields; nothing changes", async () => {
    const before = await rows();
    for (const { method, path, caller } of bodyRoutes()) {
      for (const body of ['{"__proto__":{}}', '{"name":"x","__proto__":{"name":"y"}}']) {
        const res = await h.request(method, path, { body, headers: caller });
        expect({ route: `${method} ${path}`, body, status: res.status, answer: await res.json() }).toEqual({ route: `${method} ${path}`, body, status: 400, answer: asAnswered(path, UNKNOWN) });
      }
    }
    expect(await rows()).toEqual(before);
  });

  test("inside a free-form map (an evaluation context) it is an attribute name like any other", async () => {
    const res = await h.request("POST", "/v1/evaluate", { body: '{"flagKey":"a","context":{"__proto__":"x"}}', headers: full });
    expect((await json(res, 200)).reason).toBe("FLAG_NOT_FOUND");
  });
});
