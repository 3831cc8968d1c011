/**
 * The local provider's transport and its OpenFeature answers, against a small SSE endpoint on
 * 127.0.0.1 that the test drives (what the provider must do when a connection goes silent,
 * sends garbage, is refused or drops: states the real server is not made to reach on demand).
 * That it agrees with the real server is test/e2e/local-provider.test.ts, against the binary.
 */
import { afterEach, expect, test } from "bun:test";
import { ErrorCode, OpenFeature, ProviderEvents, ProviderStatus } from "@openfeature/server-sdk";
import type { Server } from "bun";
import type { FlagRecord } from "../../packages/openfeature-provider/src/definitions";
import { FlagsvcProvider } from "../../packages/openfeature-provider/src/provider";

const silent = { error() {}, warn() {}, info() {}, debug() {} };

interface Connection {
  lastEventId: string | null;
  send(text: string): void;
  close(): void;
}

/** An SSE endpoint at /v1/definitions/stream: each request is a Connection the test writes to. */
function sseServer(opts: { status?: number } = {}) {
  const connections: Connection[] = [];
  const waiters: (() => void)[] = [];
  let status = opts.status ?? 200;
  const server: Server<undefined> = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      if (new URL(req.url).pathname !== "/v1/definitions/stream") return new Response("no", { status: 404 });
      if (req.headers.get("authorization") !== "Bearer good") return Response.json({ error: "UNAUTHORIZED", message: "Invalid or expired API key" }, { status: 401 });
      if (status !== 200) return new Response("down", { status });
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
      const encoder = new TextEncoder();
      let open = true;
      const conn: Connection = {
        lastEventId: req.headers.get("last-event-id"),
        send: (text) => open && controller.enqueue(encoder.encode(text)),
        close: () => {
          if (open) controller.close();
          open = false;
        },
      };
      connections.push(conn);
      for (const w of waiters.splice(0)) w();
      return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    connections,
    setStatus: (s: number) => void (status = s),
    /** Resolves with the n-th connection (1-based) once it is made. */
    async connection(n: number): Promise<Connection> {
      while (connections.length < n) await new Promise<void>((r) => waiters.push(r));
      return connections[n - 1]!;
    },
    stop: () => server.stop(true),
  };
}

const record = (key: string, over: Partial<FlagRecord> = {}): FlagRecord => ({ key, variants: [], rules: [], state: { enabled: true, rolloutPercentage: null }, ...over });
const put = (version: number, flags: FlagRecord[]) =>
  `event: put\nid: ${version}\ndata: ${JSON.stringify({ version, project: "default", environment: "production", flags })}\n\n`;
const patch = (version: number, flags: FlagRecord[], deleted: string[] = []) => `event: patch\nid: ${version}\ndata: ${JSON.stringify({ version, flags, deleted })}\n\n`;

/** Resolves with the details of the next `event` the provider emits (within 5 s). */
function next(provider: FlagsvcProvider, event: ProviderEvents): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within 5 s`)), 5000);
    const handler = (details?: unknown) => {
      clearTimeout(timer);
      provider.events.removeHandler(event, handler);
      resolve((details ?? {}) as Record<string, unknown>);
    };
    provider.events.addHandler(event, handler);
  });
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Options = Partial<ConstructorParameters<typeof FlagsvcProvider>[0]>;

function start(url: string, extra: Options = {}) {
  const provider = new FlagsvcProvider({ baseUrl: url, apiKey: "good", logger: silent, reconnect: { initialDelayMs: 20, maxDelayMs: 100 }, ...extra });
  cleanups.push(() => provider.onClose());
  return provider;
}

/** A server, and a provider initialized from a put of `flags` (version `version`) on its first connection. */
async function loaded(version: number, flags: FlagRecord[], extra: Options = {}) {
  const srv = sseServer();
  cleanups.push(srv.stop);
  const provider = start(srv.url, extra);
  const ready = provider.initialize();
  const c1 = await srv.connection(1);
  c1.send(put(version, flags));
  await ready;
  return { srv, provider, c1 };
}

test("loads from the first put, applies patches with the keys that changed, resumes with Last-Event-ID", async () => {
  const srv = sseServer();
  cleanups.push(srv.stop);
  const provider = start(srv.url);
  const ready = provider.initialize();
  const c1 = await srv.connection(1);
  expect(c1.lastEventId).toBeNull();
  c1.send("retry: 1000\n\n");
  c1.send(put(5, [record("on"), record("off", { state: { enabled: false, rolloutPercentage: null } })]));
  await ready;
  expect(provider.version).toBe(5);
  expect(provider.environment).toBe("production");
  expect(provider.resolveBooleanEvaluation("on", false, {})).toEqual({ value: true, variant: undefined, reason: "STATIC", flagMetadata: { reason: "FLAG_ENABLED", environment: "production" } });

  const changed = next(provider, ProviderEvents.ConfigurationChanged);
  c1.send(patch(6, [record("off"), record("on")], []));
  expect(await changed).toEqual({ flagsChanged: ["off"], metadata: { version: 6 } });
  expect(provider.resolveBooleanEvaluation("off", false, {}).value).toBe(true);

  // The server ends the stream: the provider comes back with the last id it applied.
  c1.close();
  const c2 = await srv.connection(2);
  expect(c2.lastEventId).toBe("6");
  const deleted = next(provider, ProviderEvents.ConfigurationChanged);
  c2.send(patch(9, [], ["on"]));
  expect((await deleted).flagsChanged).toEqual(["on"]);
  expect(provider.resolveBooleanEvaluation("on", false, {})).toMatchObject({ value: false, reason: "ERROR", errorCode: ErrorCode.FLAG_NOT_FOUND });
  expect(provider.version).toBe(9);
});

test("a refused key is fatal: initialize rejects with PROVIDER_FATAL and nothing is tried again", async () => {
  const srv = sseServer();
  cleanups.push(srv.stop);
  const provider = start(srv.url, { apiKey: "revoked" });
  const error = await provider.initialize().catch((e) => e);
  expect(error.code).toBe("PROVIDER_FATAL");
  expect(error.message).toContain("refused the API key (401: Invalid or expired API key)");
  await Bun.sleep(200);
  expect(srv.connections.length).toBe(0);

  // Through the SDK: the provider's status is FATAL, evaluations get the default.
  const srv2 = sseServer();
  cleanups.push(srv2.stop);
  const p2 = start(srv2.url, { apiKey: "revoked" });
  await OpenFeature.setProviderAndWait("fatal-key", p2).catch(() => {});
  const client = OpenFeature.getClient("fatal-key");
  expect(client.providerStatus).toBe(ProviderStatus.FATAL);
  expect(await client.getBooleanDetails("x", true)).toMatchObject({ value: true, errorCode: ErrorCode.PROVIDER_FATAL });
  cleanups.push(() => OpenFeature.clearProviders());
});

test("a silent connection is replaced; an outage longer than staleAfterMs is STALE, then READY once in sync", async () => {
  const { srv, provider } = await loaded(1, [record("a")], { heartbeatTimeoutMs: 300, staleAfterMs: 400 });

  // Nothing, not even a ping: the provider gives up on it and asks again from where it was.
  const c2 = await srv.connection(2);
  expect(c2.lastEventId).toBe("1");
  c2.send(": ping\n\n");

  // The server is down: answers keep coming from the last state, STALE after 400 ms.
  srv.setStatus(503);
  const stale = next(provider, ProviderEvents.Stale);
  const started = Date.now();
  c2.close();
  const details = await stale;
  expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  expect(String(details.message)).toContain("answering from version 1");
  expect(provider.resolveBooleanEvaluation("a", false, {}).value).toBe(true);

  srv.setStatus(200);
  const back = next(provider, ProviderEvents.Ready);
  const c = await srv.connection(srv.connections.length + 1);
  expect(c.lastEventId).toBe("1");
  c.send(patch(2, [record("a", { state: { enabled: false, rolloutPercentage: null } })]));
  await back;
  expect(provider.resolveBooleanEvaluation("a", true, {})).toMatchObject({ value: false, reason: "DISABLED" });
});

test("a resume that missed nothing is sent nothing: READY once a short wait brought no event", async () => {
  const { srv, provider, c1 } = await loaded(1, [record("a")], { staleAfterMs: 100 });
  srv.setStatus(503);
  const stale = next(provider, ProviderEvents.Stale);
  c1.close();
  await stale;
  srv.setStatus(200);
  const back = next(provider, ProviderEvents.Ready);
  const reopened = await srv.connection(2);
  const at = Date.now();
  reopened.send("retry: 1000\n\n");
  await back;
  expect(Date.now() - at).toBeGreaterThanOrEqual(200);
  expect(provider.version).toBe(1);
});

test("a payload that does not parse: the provider starts again from a full put (no Last-Event-ID)", async () => {
  const { srv, provider, c1 } = await loaded(3, [record("a")]);
  c1.send(`event: patch\nid: 4\ndata: {"version": 4, "flags": [{"key": "a"}]}\n\n`);
  const c2 = await srv.connection(2);
  expect(c2.lastEventId).toBeNull();
  const changed = next(provider, ProviderEvents.ConfigurationChanged);
  c2.send(put(4, [record("a"), record("b")]));
  expect((await changed).flagsChanged).toEqual(["b"]);
});

test("before the first load: PROVIDER_NOT_READY; initialize rejects after initTimeoutMs and READY follows the load", async () => {
  const srv = sseServer({ status: 503 });
  cleanups.push(srv.stop);
  const provider = start(srv.url, { initTimeoutMs: 200 });
  const init = provider.initialize().catch((e) => e);
  expect(provider.resolveBooleanEvaluation("a", true, {})).toMatchObject({ value: true, reason: "ERROR", errorCode: ErrorCode.PROVIDER_NOT_READY });
  expect(() => provider.evaluate("a", {})).toThrow("have not loaded");
  const error = await init;
  expect(error.message).toContain("no definitions within 200 ms (the definitions stream answered 503); still trying");
  const ready = next(provider, ProviderEvents.Ready);
  srv.setStatus(200);
  const c = await srv.connection(1);
  c.send(put(1, [record("a")]));
  await ready;
  expect(provider.resolveBooleanEvaluation("a", false, {}).value).toBe(true);
});

test("OpenFeature answers: types, code defaults, errors, metadata; evaluate() gives our result", async () => {
  const { provider } = await loaded(1, [
    record("flag", { rules: [{ id: "rule_x", name: "x", enabled: true, variant: null, conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] }),
    record("colour", { variants: [{ key: "red", weight: 50 }, { key: "blue", weight: 50 }] }),
    record("dark", { variants: [{ key: "on" }, { key: "off" }], state: { enabled: false, rolloutPercentage: null } }),
    record("half", { state: { enabled: true, rolloutPercentage: 50 } }),
  ]);
  expect(provider.resolveBooleanEvaluation("flag", false, { targetingKey: "u1", plan: "pro" })).toEqual({
    value: true,
    variant: undefined,
    reason: "TARGETING_MATCH",
    flagMetadata: { reason: "TARGETING_RULE_MATCH", ruleId: "rule_x", environment: "production" },
  });
  expect(provider.resolveBooleanEvaluation("flag", false, { plan: "free" })).toMatchObject({ value: true, reason: "DEFAULT" });
  const colour = provider.resolveStringEvaluation("colour", "none", { targetingKey: "u1" });
  expect(colour).toMatchObject({ reason: "SPLIT", flagMetadata: { reason: "FLAG_ENABLED", environment: "production" } });
  expect(["red", "blue"]).toContain(colour.value);
  expect(colour.variant).toBe(colour.value as string);
  // A multi-variant flag that serves nothing: the caller's default, the mapped reason, no variant.
  expect(provider.resolveStringEvaluation("dark", "fallback", {})).toEqual({ value: "fallback", variant: undefined, reason: "DISABLED", flagMetadata: { reason: "FLAG_DISABLED", environment: "production" } });
  // Errors.
  expect(provider.resolveStringEvaluation("flag", "x", {})).toMatchObject({ value: "x", reason: "ERROR", errorCode: ErrorCode.TYPE_MISMATCH });
  expect(provider.resolveBooleanEvaluation("colour", false, {})).toMatchObject({ value: false, errorCode: ErrorCode.TYPE_MISMATCH });
  expect(provider.resolveNumberEvaluation("flag", 1, {})).toMatchObject({ value: 1, errorCode: ErrorCode.TYPE_MISMATCH });
  expect(provider.resolveObjectEvaluation("flag", { a: 1 }, {})).toMatchObject({ value: { a: 1 }, errorCode: ErrorCode.TYPE_MISMATCH });
  expect(provider.resolveNumberEvaluation("nope", 1, {})).toMatchObject({ value: 1, errorCode: ErrorCode.FLAG_NOT_FOUND });
  expect(provider.resolveBooleanEvaluation("half", false, {})).toMatchObject({ value: false, errorCode: ErrorCode.TARGETING_KEY_MISSING });
  expect(provider.resolveBooleanEvaluation("flag", false, { targetingKey: "u", nested: { a: 1 } } as never)).toMatchObject({ errorCode: ErrorCode.INVALID_CONTEXT });
  // A context attribute named like the error's fields is an attribute, not an error.
  expect(provider.resolveBooleanEvaluation("flag", false, { targetingKey: "u", errorCode: "E1", errorDetails: "d" })).toMatchObject({ value: true, reason: "DEFAULT" });

  // Our own answer: targetingKey is userId; a userId of our own is kept without one.
  const mine = provider.evaluate("half", { targetingKey: "user-1" });
  expect(mine).toEqual({ flagKey: "half", enabled: mine.enabled, variant: null, reason: mine.reason, ruleId: null, evaluatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
  expect(provider.evaluate("half", { userId: "user-1" })).toEqual({ ...mine, evaluatedAt: expect.any(String) });
  expect(provider.evaluate("missing", {})).toMatchObject({ enabled: false, reason: "FLAG_NOT_FOUND" });
  expect(() => provider.evaluate("flag", { nested: { a: 1 } } as never)).toThrow("attribute 'nested'");

  // Through the SDK, which awaits the synchronous answer.
  await OpenFeature.setProviderAndWait("answers", provider);
  cleanups.push(() => OpenFeature.clearProviders());
  const client = OpenFeature.getClient("answers");
  expect(await client.getBooleanDetails("flag", false, { targetingKey: "u1", plan: "pro" })).toMatchObject({ value: true, reason: "TARGETING_MATCH", flagMetadata: { ruleId: "rule_x" } });
  expect(await client.getStringDetails("flag", "x")).toMatchObject({ value: "x", reason: "ERROR", errorCode: ErrorCode.TYPE_MISMATCH });
  expect(await client.getStringValue("dark", "fallback")).toBe("fallback");
});
