/**
 * The cross-cutting pipeline through app.handle: error shapes of decisions §3, request ids,
 * security headers, the body limit, the HTTPS-behind-proxy rule and the access log.
 * Body-taking routes arrive with later modules; here a probe route with a strict schema is
 * mounted on the real app so the global pipeline is exercised exactly as modules will use it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { t } from "elysia";
import { MAX_BODY_BYTES } from "../../src/http/errors";
import { createApp, type App } from "../../src/server";
import { bearer, endlessBody, seedAdminKey, seedApiKey, testApp, type TestApp, userToken, sqliteOf, sqliteOnly } from "../helpers";

const withProbe = (app: App) =>
  app
    .post(
      "/v1/probe/:id",
      ({ body, params }) => ({ id: params.id, body }),
      {
        params: t.Object({ id: t.String({ pattern: "^[a-z]+$" }) }),
        body: t.Object(
          {
            name: t.String({ minLength: 1 }),
            count: t.Optional(t.Integer({ minimum: 1 })),
            items: t.Optional(t.Array(t.Object({ key: t.String() }, { additionalProperties: false }))),
          },
          { additionalProperties: false },
        ),
      },
    )
    .get("/v1/probe-query", ({ query }) => query, {
      query: t.Object({ page: t.Optional(t.Integer({ minimum: 1 })) }, { additionalProperties: false }),
    })
    // Answers after a turn of the event loop: other requests' answers are built meanwhile.
    .get("/v1/probe-slow", async ({ query }) => {
      await Bun.sleep(Number(query.ms ?? 0));
      return { slow: true };
    })
    // Fails inside Elysia's own Response building (JSON cannot hold a BigInt): after the header cache was handed over.
    .get("/v1/probe-unserialisable", () => ({ n: 1n }))
    .get("/v1/probe-crash", () => {
      throw new Error("secret internals at /srv/app.ts:42");
    });

let h: TestApp;
beforeAll(async () => {
  h = await testApp({}, withProbe);
});
afterAll(() => h.close());

async function json(res: Response) {
  expect(res.headers.get("content-type")).toContain("application/json");
  return (await res.json()) as Record<string, any>;
}

describe("error shapes", () => {
  test("unknown route: 404 NOT_FOUND as JSON", async () => {
    const res = await h.request("GET", "/v1/no-such-thing");
    expect(res.status).toBe(404);
    expect(await json(res)).toEqual({ error: "NOT_FOUND", message: "No route for GET /v1/no-such-thing" });
  });

  test("known path, other method: 405 METHOD_NOT_ALLOWED with Allow", async () => {
    const res = await h.request("DELETE", "/v1/health");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    const body = await json(res);
    expect(body.error).toBe("METHOD_NOT_ALLOWED");
    expect(typeof body.message).toBe("string");
  });

  test("a parameterised path matches for 405 too", async () => {
    const res = await h.request("GET", "/v1/probe/abc");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  test("validation failure: 400 VALIDATION_ERROR with details per field", async () => {
    const res = await h.request("POST", "/v1/probe/abc", { body: { name: "", count: 0 } });
    expect(res.status).toBe(400);
    const body = await json(res);
    expect(body.error).toBe("VALIDATION_ERROR");
    expect(typeof body.message).toBe("string");
    const paths = body.details.map((d: { path: string }) => d.path);
    expect(paths).toContain("body.name");
    expect(paths).toContain("body.count");
    for (const d of body.details) expect(typeof d.message).toBe("string");
  });

  test("a missing required field is reported once, as Required", async () => {
    const res = await h.request("POST", "/v1/probe/abc", { body: {} });
    const body = await json(res);
    expect(body.details).toEqual([{ path: "body.name", message: "Required" }]);
  });

  test("unknown body fields are rejected, nested ones too", async () => {
    const top = await h.request("POST", "/v1/probe/abc", { body: { name: "x", nmae: "typo" } });
    expect(top.status).toBe(400);
    expect((await json(top)).details).toEqual([{ path: "body.nmae", message: "Unknown field" }]);
    const nested = await h.request("POST", "/v1/probe/abc", { body: { name: "x", items: [{ key: "a", extra: 1 }] } });
    expect(nested.status).toBe(400);
    expect((await json(nested)).details).toEqual([{ path: "body.items[0].extra", message: "Unknown field" }]);
  });

  test("a valid body passes through unchanged", async () => {
    const res = await h.request("POST", "/v1/probe/abc", { body: { name: "x", count: 2, items: [{ key: "k" }] } });
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ id: "abc", body: { name: "x", count: 2, items: [{ key: "k" }] } });
  });

  test("bad path parameter: 400 with a params path", async () => {
    const res = await h.request("POST", "/v1/probe/ABC", { body: { name: "x" } });
    expect(res.status).toBe(400);
    expect((await json(res)).details[0].path).toBe("params.id");
  });

  test("bad and unknown query values: 400", async () => {
    const cases: [string, string][] = [
      ["page=0", "query.page"],
      ["page=abc", "query.page"],
      ["pgae=2", "query.pgae"],
    ];
    for (const [q, path] of cases) {
      const res = await h.request("GET", `/v1/probe-query?${q}`);
      expect(res.status).toBe(400);
      const body = await json(res);
      expect(body.error).toBe("VALIDATION_ERROR");
      expect(body.details[0].path).toBe(path);
    }
    expect((await h.request("GET", "/v1/probe-query?page=2")).status).toBe(200);
  });

  test("malformed JSON: 400 VALIDATION_ERROR", async () => {
    const res = await h.request("POST", "/v1/probe/abc", { body: '{"name": "x",' });
    expect(res.status).toBe(400);
    expect(await json(res)).toEqual({ error: "VALIDATION_ERROR", message: "Request body is not valid JSON", details: [{ path: "body", message: "Not valid JSON" }] });
  });

  test("a JSON body that is not an object: 400 naming the body", async () => {
    for (const text of ["[]", '[{"name":"x"}]', "5", '"x"', "true", "null"]) {
      const res = await h.request("POST", "/v1/probe/abc", { body: text });
      expect({ text, status: res.status, body: await json(res) }).toEqual({
        text,
        status: 400,
        body: { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path: "body", message: "Expected object" }] },
      });
    }
  });

  test("a body nested deeper than 64 levels: 400 naming the limit", async () => {
    const deep = (n: number) => `{"name":"x","items":${"[".repeat(n)}${"]".repeat(n)}}`;
    const tooDeep = [deep(64), `{"x":${"[".repeat(50_000)}${"]".repeat(50_000)}}`, `{"name":${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}}`];
    for (const text of tooDeep) {
      const res = await h.request("POST", "/v1/probe/abc", { body: text });
      expect(res.status).toBe(400);
      expect(await json(res)).toEqual({
        error: "VALIDATION_ERROR",
        message: "Request body is nested too deeply (at most 64 levels)",
        details: [{ path: "body", message: "Nested deeper than 64 levels" }],
      });
    }
    // 64 levels are read: the schema answers (items must be objects); brackets in strings do not count.
    const schemaAnswer = await json(await h.request("POST", "/v1/probe/abc", { body: deep(63) }));
    expect(schemaAnswer.message).toBe("Invalid request");
    expect(schemaAnswer.details[0].path).toStartWith("body.items");
    const res = await h.request("POST", "/v1/probe/abc", { body: JSON.stringify({ name: `${"[{".repeat(500)}\\"` }) });
    expect(res.status).toBe(200);
  });

  test("every route without a body schema refuses a body with fields, before judging anything but the caller", async () => {
    const bodyless = createApp(h.ctx).routes.filter((r) => r.method !== "GET" && r.method !== "HEAD" && !(r.hooks as { body?: unknown }).body);
    expect(bodyless.length).toBeGreaterThanOrEqual(11); // the DELETEs, logout, redeliver
    // A caller each route lets through: the body is judged after the caller.
    const [admin, tester, user] = [bearer(await seedAdminKey(h.ctx)), bearer((await seedApiKey(h.ctx, "test")).secret), await userToken(h.ctx, "viewer")];
    const callerOf = (path: string) => (path.startsWith("/v1/testing/") ? tester : path === "/v1/auth/logout" || path === "/v1/auth/session" ? user : admin);
    for (const r of bodyless) {
      const res = await h.request(r.method, r.path.replace(/:[^/]+/g, "x"), { body: { x: 1 }, headers: callerOf(r.path) });
      // On CE a Pro-only route's 403 comes before the body too.
      const proOnly = (r.hooks as { detail?: Record<string, unknown> }).detail?.["x-flagsvc-edition"] === "pro";
      expect({ route: `${r.method} ${r.path}`, status: res.status, body: await json(res) }).toEqual({
        route: `${r.method} ${r.path}`,
        status: proOnly ? 403 : 400,
        body: proOnly
          ? { error: "PRO_EDITION_REQUIRED", message: "This endpoint requires the Pro edition" }
          : { error: "VALIDATION_ERROR", message: "Invalid request", details: [{ path: "body.x", message: "Unknown field" }] },
      });
    }
  });

  test("text that is not valid Unicode (a lone surrogate, escaped) is 400; a pair written as escapes is fine", async () => {
    for (const text of ['{"name":"x\\ud800y"}', '{"name":"\\udc00"}', '{"name":"x","items":[{"key":"\\ud83d"}]}', '{"name":"x","\\ud800":1}']) {
      const res = await h.request("POST", "/v1/probe/abc", { body: text });
      expect({ text, status: res.status, body: await json(res) }).toEqual({
        text,
        status: 400,
        body: { error: "VALIDATION_ERROR", message: "Request body holds text that is not valid Unicode", details: [{ path: "body", message: "Lone UTF-16 surrogate" }] },
      });
    }
    const res = await h.request("POST", "/v1/probe/abc", { body: '{"name":"smile \\ud83d\\ude00"}' });
    expect(await json(res)).toEqual({ id: "abc", body: { name: "smile \u{1F600}" } });
  });

  test("a non-JSON content type with a body: 400", async () => {
    const res = await h.request("POST", "/v1/probe/abc", { body: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(res.status).toBe(400);
    expect(await json(res)).toEqual({
      error: "VALIDATION_ERROR",
      message: "Content-Type must be application/json",
      details: [{ path: "headers.content-type", message: "Must be application/json" }],
    });
  });

  test("a missing body on a route that needs one: 400", async () => {
    const res = await h.request("POST", "/v1/probe/abc");
    expect(res.status).toBe(400);
    expect((await json(res)).error).toBe("VALIDATION_ERROR");
  });

  test("body over 1 MiB by Content-Length: 413 PAYLOAD_TOO_LARGE", async () => {
    const big = JSON.stringify({ name: "x".repeat(MAX_BODY_BYTES) });
    const res = await h.request("POST", "/v1/probe/abc", { body: big });
    expect(res.status).toBe(413);
    expect((await json(res)).error).toBe("PAYLOAD_TOO_LARGE");
  });

  test("chunked body over 1 MiB: 413, without reading it all", async () => {
    const { stream, pulled } = endlessBody();
    const req = new Request("http://localhost/v1/probe/abc", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
      // @ts-expect-error Bun supports duplex for streamed request bodies
      duplex: "half",
    });
    expect(req.headers.get("content-length")).toBeNull();
    const res = await h.app.handle(req);
    expect(res.status).toBe(413);
    expect((await json(res)).error).toBe("PAYLOAD_TOO_LARGE");
    expect(pulled()).toBeLessThan(2 * MAX_BODY_BYTES);
  });

  test("exactly 1 MiB is accepted", async () => {
    const pad = MAX_BODY_BYTES - JSON.stringify({ name: "" }).length;
    const body = JSON.stringify({ name: "y".repeat(pad) });
    expect(Buffer.byteLength(body)).toBe(MAX_BODY_BYTES);
    expect((await h.request("POST", "/v1/probe/abc", { body })).status).toBe(200);
  });

  test("unexpected failure: 500 INTERNAL_ERROR, no stack in the body, logged with the request id", async () => {
    const res = await h.request("GET", "/v1/probe-crash", { headers: { "x-request-id": "crash-1" } });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: "INTERNAL_ERROR", message: "Internal error; request id crash-1" });
    expect(text).not.toContain("secret internals");
    expect(text).not.toContain("app.ts");
    const logged = h.logs().find((l) => l.msg === "unhandled error");
    expect(logged?.requestId).toBe("crash-1");
    expect(String(logged?.error)).toContain("secret internals");
  });
});

describe("headers on every response", () => {
  const cases: [string, string][] = [
    ["GET", "/v1/health"],
    ["GET", "/v1/missing"],
    ["PUT", "/v1/health"],
    ["GET", "/v1/probe-crash"],
  ];
  for (const [method, path] of cases) {
    test(`${method} ${path}: X-Request-Id, HSTS, nosniff`, async () => {
      const res = await h.request(method, path);
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    });
  }

  test("answers built while others wait keep their own values (the headers object is reused)", async () => {
    const slow = (id: string, ms: number) => h.request("GET", `/v1/probe-slow?ms=${ms}`, { headers: { "x-request-id": id } });
    const fast = (id: string) => h.request("GET", "/v1/health", { headers: { "x-request-id": id } });
    const answers = await Promise.all([slow("slow-1", 30), fast("fast-1"), slow("slow-2", 10), fast("fast-2"), h.request("DELETE", "/v1/health", { headers: { "x-request-id": "err-1" } })]);
    expect(answers.map((r) => r.headers.get("x-request-id"))).toEqual(["slow-1", "fast-1", "slow-2", "fast-2", "err-1"]);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 405]);
    for (const r of answers) {
      expect(r.headers.get("strict-transport-security")).toBe("max-age=31536000");
      expect(r.headers.get("cache-control")).toBe("no-store");
      expect(r.headers.get("x-ratelimit-limit")).toBe("300");
    }
    expect(answers[4]!.headers.get("allow")).toBe("GET, HEAD");
    expect(answers[0]!.headers.get("allow")).toBeNull();
    // Anonymous callers are counted per address: each answer carries its own remaining count.
    expect(new Set(answers.map((r) => r.headers.get("x-ratelimit-remaining"))).size).toBe(5);
  });

  test("a failure while the Response is built: 500 with this request's id and the standard headers", async () => {
    const res = await h.request("GET", "/v1/probe-unserialisable", { headers: { "x-request-id": "unser-1" } });
    expect(res.status).toBe(500);
    const body = await json(res);
    expect(body.error).toBe("INTERNAL_ERROR");
    expect(body.message).toBe("Internal error; request id unser-1");
    expect(res.headers.get("x-request-id")).toBe("unser-1");
    expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
    expect(res.headers.get("x-ratelimit-limit")).toBe("300");
  });

  test("a sane incoming X-Request-Id is kept, an insane one replaced", async () => {
    const kept = await h.request("GET", "/v1/health", { headers: { "x-request-id": "abc.DEF_1-2:3" } });
    expect(kept.headers.get("x-request-id")).toBe("abc.DEF_1-2:3");
    const replaced = await h.request("GET", "/v1/health", { headers: { "x-request-id": "bad id<script>" } });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const long = await h.request("GET", "/v1/health", { headers: { "x-request-id": "a".repeat(129) } });
    expect(long.headers.get("x-request-id")).not.toBe("a".repeat(129));
  });
});

describe("access log", () => {
  test("one line per request with method, path, status, duration and request id; no credentials", async () => {
    const secret = "svc_sk_eval_abcdefghijklmnopqrstuvwxyz123456";
    await h.request("GET", "/v1/health", { headers: { authorization: `Bearer ${secret}`, "x-request-id": "log-1" } });
    await h.request("GET", "/v1/testing/sessions/sess_TOKENtoken123", { headers: { "x-service-session": "sess_TOKENtoken123", "x-request-id": "log-2" } });
    await new Promise((r) => setImmediate(r));
    const lines = h.logs();
    const first = lines.filter((l) => l.requestId === "log-1" && l.msg === "request");
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ method: "GET", path: "/v1/health", status: 200, level: "info" });
    expect(typeof first[0]!.durationMs).toBe("number");
    const second = lines.find((l) => l.requestId === "log-2" && l.msg === "request");
    expect(second).toMatchObject({ status: 401, path: "/v1/testing/sessions/sess_[redacted]" }); // the route exists; no credential
    // Keys pasted into a path (where an id belongs) are left out too.
    for (const [i, path] of [`/v1/api-keys/${secret}/rotate`, "/v1/svc_admin_ADMINsecret42/x", "/v1/x/svc_sess_SESSIONsecret7"].entries()) {
      await h.request("POST", path, { headers: { "x-request-id": `log-key-${i}` } });
    }
    await new Promise((r) => setImmediate(r));
    const pasted = h.logs().filter((l) => String(l.requestId).startsWith("log-key-") && l.msg === "request").map((l) => l.path);
    expect(pasted).toEqual(["/v1/api-keys/svc_sk_eval_[redacted]/rotate", "/v1/svc_admin_[redacted]/x", "/v1/x/svc_sess_[redacted]"]);
    const all = JSON.stringify(h.logs());
    expect(all).not.toContain(secret);
    for (const text of ["TOKENtoken123", "ADMINsecret42", "SESSIONsecret7"]) expect(all).not.toContain(text);
    expect(all.toLowerCase()).not.toContain("authorization");
  });
});

describe("behind a TLS-terminating proxy", () => {
  let p: TestApp;
  beforeAll(async () => {
    p = await testApp({ SVC_BEHIND_PROXY: "true" });
  });
  afterAll(() => p.close());

  test("without X-Forwarded-Proto https: 403 HTTPS_REQUIRED, with a request id", async () => {
    for (const headers of [{}, { "x-forwarded-proto": "http" }] as Record<string, string>[]) {
      const res = await p.request("GET", "/v1/health", { headers });
      expect(res.status).toBe(403);
      expect((await json(res)).error).toBe("HTTPS_REQUIRED");
      expect(res.headers.get("x-request-id")).toBeTruthy();
      expect(res.headers.get("strict-transport-security")).toBeNull();
    }
  });

  test("with X-Forwarded-Proto https: served, with HSTS", async () => {
    const res = await p.request("GET", "/v1/health", { headers: { "x-forwarded-proto": "https" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
  });
});

describe("health", () => {
  test("200 with status, version, edition, uptime when the database answers", async () => {
    const res = await h.request("GET", "/v1/health");
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toEqual({ status: "ok", version: expect.stringMatching(/^\d+\.\d+\.\d+/), edition: "ce", uptimeSeconds: expect.any(Number) });
  });

  sqliteOnly("503 when the database does not answer", async () => {
    const broken = await testApp({ SVC_EDITION: "pro" });
    try {
      sqliteOf(broken.ctx).sqlite.close();
      const res = await broken.request("GET", "/v1/health");
      expect(res.status).toBe(503);
      const body = await json(res);
      expect(body.status).toBe("unavailable");
      expect(body.edition).toBe("pro");
      expect(typeof body.message).toBe("string");
    } finally {
      broken.close();
    }
  });
});

describe("API docs", () => {
  test("openapi.json describes the routes with response schemas", async () => {
    const res = await h.request("GET", "/v1/openapi.json");
    expect(res.status).toBe(200);
    const doc = await json(res);
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe("flagsvc API");
    const health = doc.paths["/v1/health"].get;
    expect(Object.keys(health.responses)).toEqual(expect.arrayContaining(["200", "503"]));
    expect(doc.paths["/v1/docs"]).toBeUndefined();
    expect(doc.paths["/v1/openapi.json"]).toBeUndefined();
  });

  test("every operation has the Error shape as its default response; open routes need no credential", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"));
    expect(doc.components.schemas.Error.required).toEqual(["error", "message"]);
    for (const [path, operations] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(operations)) {
        expect({ path, method, ref: op.responses.default?.content["application/json"].schema.$ref }).toEqual({ path, method, ref: "#/components/schemas/Error" });
        const open = op["x-flagsvc-access"] === undefined;
        expect({ path, method, security: op.security }).toEqual({ path, method, security: open ? [] : undefined });
      }
    }
    expect(doc.paths["/v1/health"].get.security).toEqual([]);
    expect(doc.paths["/v1/auth/login"].post.security).toEqual([]);
    expect(doc.paths["/v1/users"].get["x-flagsvc-access"]).toBe("admin");
    expect(doc.security).toEqual([{ bearer: [] }]);
  });

  test("every default in the document fits its schema's type (a string defaulting to 0 did not)", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"));
    const jsonType = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v);
    const misfits: string[] = [];
    const walk = (node: unknown, where: string): void => {
      if (node === null || typeof node !== "object") return;
      const schema = node as Record<string, unknown>;
      if ("default" in schema && typeof schema.type === "string") {
        const t = jsonType(schema.default);
        if (!(t === schema.type || (t === "integer" && schema.type === "number"))) misfits.push(`${where}: ${schema.type} with default ${JSON.stringify(schema.default)}`);
      }
      for (const [k, v] of Object.entries(schema)) walk(v, `${where}/${k}`);
    };
    walk(doc, "#");
    // This file's probe routes use Elysia's t.Integer, which documents exactly that.
    expect(misfits.filter((m) => !m.includes("/v1/probe"))).toEqual([]);
    expect(misfits.length).toBeGreaterThan(0);
  });

  test("request bodies are documented as application/json with the route's schema", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json"));
    const create = doc.paths["/v1/projects"].post.requestBody;
    expect(create.required).toBe(true);
    expect(create.content["application/json"].schema).toMatchObject({ type: "object", additionalProperties: false, required: ["slug", "name"] });
    const rotate = doc.paths["/v1/api-keys/{keyId}/rotate"].post.requestBody;
    expect(rotate.required).toBe(false);
    expect(Object.keys(rotate.content)).toEqual(["application/json"]);
  });

  test("the reference page loads only local resources", async () => {
    const res = await h.request("GET", "/v1/docs");
    expect(res.status).toBe(200);
    // A Response made by the handler still gets the standard headers.
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const html = await res.text();
    const sources = [...html.matchAll(/\b(?:src|href)=["']([^"']+)["']/g)].map((m) => m[1]);
    expect(sources).toEqual(["/v1/docs/scalar.js"]);
    expect(html).toContain('"url":"/v1/openapi.json"');
    // The browser holds it to that: scripts and calls to this server only (checked in Chromium: the page renders under it).
    const csp = res.headers.get("content-security-policy") ?? "";
    for (const directive of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) expect(csp).toContain(directive);
    // Scalar's features that call its own services are off.
    expect(html).toContain('"agent":{"disabled":true},"mcp":{"disabled":true}');
    const script = await h.request("GET", "/v1/docs/scalar.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toContain("javascript");
    // A route's own value of a standard header wins; the others are still added.
    expect(script.headers.get("cache-control")).toBe("public, max-age=86400");
    expect(script.headers.get("x-content-type-options")).toBe("nosniff");
    expect((await script.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000);
  });
});
