/**
 * Webhooks (decisions §10) through HTTP over a real database, delivering to a real receiver on
 * 127.0.0.1 (SVC_OUTBOUND_ALLOWED_HOSTS=loopback). Time is the injected clock: retries are
 * driven by moving it and running the due deliveries (`ctx.deliveries.drain()`), not by sleeping.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { MESSAGES } from "../../src/http/access";
import { PER_WEBHOOK_IN_FLIGHT, type DeliveryDispatcher } from "../../src/modules/webhooks/dispatcher";
import { SqliteDeliveryQueue } from "../../src/modules/webhooks/store";
import { VERSION } from "../../src/version";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, ISO_TIMESTAMP, rawRows, onPostgres, sqliteOnly, countRows } from "../helpers";
import { signatureMatches, startReceiver, type Receiver } from "../webhook-receiver";

const SECRET = "a-webhook-secret-of-some-length";
const FLAGS = "/v1/projects/default/flags";
const HOOKS = "/v1/projects/default/webhooks";
const ALL_EVENTS = ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled"];
const ENVIRONMENTS = ["development", "staging", "production"];

let h: TestApp;
let admin: Record<string, string>;
let rx: Receiver;
const apps: TestApp[] = [];
const receivers: Receiver[] = [];

async function app(env: Record<string, string> = {}): Promise<TestApp> {
  const a = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_TIMEOUT_MS: "300", ...env });
  apps.push(a);
  return a;
}
function receiver(...args: Parameters<typeof startReceiver>): Receiver {
  const r = startReceiver(...args);
  receivers.push(r);
  return r;
}

beforeEach(async () => {
  h = await app();
  admin = bearer(await seedAdminKey(h.ctx));
  rx = receiver();
});
afterEach(() => {
  for (const a of apps.splice(0)) a.close();
  for (const r of receivers.splice(0)) r.stop();
});

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin, t = h) => json(await t.request(method, path, { body, headers }), status);
const register = (body: Record<string, unknown> = {}, t = h, headers = admin) =>
  call("POST", HOOKS, { url: rx.url, events: ALL_EVENTS, secret: SECRET, ...body }, 201, headers, t);
const createFlag = (key: string) => call("POST", FLAGS, { key, name: key }, 201);
const putState = (key: string, env: string, body: unknown) => call("PUT", `${FLAGS}/${key}/states/${env}`, body);
const deliveries = async (webhookId: string, query = "") => (await call("GET", `/v1/webhooks/${webhookId}/deliveries${query}`)).deliveries as Record<string, any>[];
/** Rows of a table, counted. */
const count = (table: string, t = h) => countRows(t.ctx, table);
/** Runs every due delivery and waits for the attempts to finish. */
const settle = (t = h) => t.ctx.deliveries.drain();
/** What arrived so far: [event, environment, previous, current]. */
const arrivals = (r = rx) => r.received.map((m) => [m.json.event, m.json.environment, m.json.data.previousState.enabled, m.json.data.currentState.enabled]);

describe("events: which change emits what", () => {
  test("create flag: flag.created once per environment, signed, with the spec's payload and headers", async () => {
    const hook = await register();
    await createFlag("checkout");
    const got = await rx.waitFor(3);
    await settle();
    expect(got.map((m) => m.json.environment).sort()).toEqual([...ENVIRONMENTS].sort());
    expect(new Set(got.map((m) => m.json.id)).size).toBe(3);
    const sent = await deliveries(hook.id);
    for (const m of got) {
      expect(m.json).toEqual({
        id: expect.stringMatching(/^evt_[A-Za-z0-9]{30}$/),
        event: "flag.created",
        projectSlug: "default",
        environment: m.json.environment,
        timestamp: new Date(h.clock.now()).toISOString(),
        data: { flagKey: "checkout", previousState: { enabled: false }, currentState: { enabled: false } },
      });
      // Key order of the spec's table, and the exact bytes signed.
      expect(Object.keys(m.json)).toEqual(["id", "event", "projectSlug", "environment", "timestamp", "data"]);
      expect(signatureMatches(SECRET, m.bytes, m.headers.get("x-service-signature"))).toBe(true);
      expect(m.headers.get("x-service-signature")).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(m.headers.get("content-type")).toBe("application/json");
      expect(m.headers.get("x-service-event")).toBe("flag.created");
      expect(m.headers.get("user-agent")).toBe(`flagsvc-webhooks/${VERSION}`);
      const delivery = sent.find((d) => d.id === m.headers.get("x-service-delivery"));
      expect(delivery).toEqual({
        id: expect.stringMatching(/^del_/),
        webhookId: hook.id,
        eventId: m.json.id,
        event: "flag.created",
        status: "succeeded",
        attempts: 1,
        nextAttemptAt: null,
        lastAttemptAt: expect.stringMatching(ISO_TIMESTAMP),
        responseStatus: 200,
        error: null,
        durationMs: expect.any(Number),
        redeliveryOf: null,
        createdAt: expect.stringMatching(ISO_TIMESTAMP),
      });
    }
    // A signature over other bytes does not match.
    expect(signatureMatches("another-secret-value-x", got[0]!.bytes, got[0]!.headers.get("x-service-signature"))).toBe(false);
  });

  test("state PUT: on -> flag.enabled, off -> flag.disabled, rollout only -> flag.updated, nothing changed -> no event", async () => {
    await createFlag("checkout");
    await register({ events: ["flag.updated", "flag.enabled", "flag.disabled"] });
    const step = async (body: unknown) => {
      await putState("checkout", "production", body);
      await settle();
    };
    await step({ enabled: false }); // first PUT creates the row, but enabled stays false: nothing
    expect(arrivals()).toEqual([]);
    await step({ enabled: true });
    await step({ enabled: true }); // no change
    await step({ enabled: true, rolloutPercentage: 25 }); // rollout only
    await step({ enabled: true, rolloutPercentage: 25 }); // no change
    await step({ enabled: true, rolloutPercentage: null }); // rollout cleared
    await step({ enabled: false, rolloutPercentage: 50 }); // both change: the enabled event only
    await step({ enabled: false }); // rollout omitted keeps 50: no change
    expect(arrivals()).toEqual([
      ["flag.enabled", "production", false, true],
      ["flag.updated", "production", true, true],
      ["flag.updated", "production", true, true],
      ["flag.disabled", "production", true, false],
    ]);
    expect(rx.received.every((m) => m.json.data.flagKey === "checkout")).toBe(true);
    expect((await count("webhook_events"))).toBe(4);
  });

  test("PATCH: flag.updated per environment with that environment's state; a PATCH that changes nothing: no event", async () => {
    await createFlag("checkout");
    await putState("checkout", "staging", { enabled: true });
    await register({ events: ["flag.updated"] });
    await call("PATCH", `${FLAGS}/checkout`, { name: "checkout" }); // unchanged
    await settle();
    expect(rx.received).toEqual([]);
    await call("PATCH", `${FLAGS}/checkout`, { description: "now described" });
    await rx.waitFor(3);
    expect(arrivals().sort()).toEqual([
      ["flag.updated", "development", false, false],
      ["flag.updated", "production", false, false],
      ["flag.updated", "staging", true, true],
    ]);
  });

  test("delete: flag.deleted per environment, previousState as it was, currentState disabled", async () => {
    await createFlag("checkout");
    await putState("checkout", "production", { enabled: true });
    await register({ events: ["flag.deleted"] });
    await call("DELETE", `${FLAGS}/checkout`, undefined, 204);
    await rx.waitFor(3);
    expect(arrivals().sort()).toEqual([
      ["flag.deleted", "development", false, false],
      ["flag.deleted", "production", true, false],
      ["flag.deleted", "staging", false, false],
    ]);
  });

  test("filters: events and environments; a disabled webhook and another project's webhook receive nothing", async () => {
    const onlyProd = receiver();
    const onlyEnabled = receiver();
    const disabled = receiver();
    const otherProject = receiver();
    await register({ url: onlyProd.url, environments: ["production"] });
    await register({ url: onlyEnabled.url, events: ["flag.enabled"] });
    const off = await register({ url: disabled.url, enabled: false });
    await call("POST", "/v1/projects", { slug: "other", name: "Other" }, 201);
    await call("POST", "/v1/projects/other/webhooks", { url: otherProject.url, events: ALL_EVENTS, secret: SECRET }, 201);

    await createFlag("checkout");
    await putState("checkout", "staging", { enabled: true });
    await putState("checkout", "production", { enabled: true });
    await settle();
    expect(arrivals(onlyProd)).toEqual([
      ["flag.created", "production", false, false],
      ["flag.enabled", "production", false, true],
    ]);
    expect(arrivals(onlyEnabled).sort()).toEqual([
      ["flag.enabled", "production", false, true],
      ["flag.enabled", "staging", false, true],
    ]);
    expect(disabled.received).toEqual([]);
    expect(otherProject.received).toEqual([]);
    expect(await deliveries(off.id)).toEqual([]);
  });

  test("one event to several webhooks: the same id and the same bytes, each signed with its own secret", async () => {
    const second = receiver();
    await register({ events: ["flag.enabled"] });
    await register({ url: second.url, events: ["flag.enabled"], secret: "the-second-secret-value" });
    await createFlag("checkout");
    await putState("checkout", "production", { enabled: true });
    const [a] = await rx.waitFor(1);
    const [b] = await second.waitFor(1);
    expect(Buffer.from(a!.bytes).equals(Buffer.from(b!.bytes))).toBe(true);
    expect(signatureMatches(SECRET, a!.bytes, a!.headers.get("x-service-signature"))).toBe(true);
    expect(signatureMatches("the-second-secret-value", b!.bytes, b!.headers.get("x-service-signature"))).toBe(true);
    expect(a!.headers.get("x-service-delivery")).not.toBe(b!.headers.get("x-service-delivery"));
  });

  test("the first attempt starts right after the write, without waiting for the job", async () => {
    await createFlag("checkout");
    await register({ events: ["flag.enabled"] });
    const t0 = performance.now();
    await putState("checkout", "production", { enabled: true });
    const [m] = await rx.waitFor(1, 1_000);
    expect(m!.at - t0).toBeLessThan(250); // target 50 ms; generous for a loaded CI machine
  });
});

describe("docs/webhooks.md: the signature verification snippets work on real deliveries", () => {
  /** The code block right after `marker` in docs/webhooks.md. */
  const snippet = async (marker: string) => {
    const doc = await Bun.file(join(import.meta.dir, "..", "..", "docs", "webhooks.md")).text();
    const m = doc.slice(doc.indexOf(marker)).match(/```\w+\n([\s\S]*?)```/);
    if (!m) throw new Error(`no code block after ${marker}`);
    return m[1]!;
  };
  async function oneArrival() {
    await register({ events: ["flag.created"], environments: ["production"] });
    await createFlag("checkout");
    return (await rx.waitFor(1))[0]!;
  }

  test("TypeScript", async () => {
    const m = await oneArrival();
    const file = join(h.dir, "verify.ts");
    await Bun.write(file, await snippet("<!-- verify-ts -->"));
    const { verifySignature } = (await import(file)) as { verifySignature: (secret: string, body: Uint8Array | string, header: string | null) => boolean };
    const header = m.headers.get("x-service-signature");
    expect(verifySignature(SECRET, m.bytes, header)).toBe(true);
    expect(verifySignature(SECRET, new TextDecoder().decode(m.bytes), header)).toBe(true);
    expect(verifySignature("not-the-secret-of-it", m.bytes, header)).toBe(false);
    expect(verifySignature(SECRET, new TextEncoder().encode(JSON.stringify(JSON.parse(new TextDecoder().decode(m.bytes)), null, 1)), header)).toBe(false);
    expect(verifySignature(SECRET, m.bytes, null)).toBe(false);
  });

  test.skipIf(!Bun.which("python3"))("Python", async () => {
    const m = await oneArrival();
    const code = `${await snippet("<!-- verify-py -->")}
import sys
body = sys.stdin.buffer.read()
print(verify_signature(sys.argv[1], body, sys.argv[2]), verify_signature("not-the-secret-of-it", body, sys.argv[2]), verify_signature(sys.argv[1], body + b" ", sys.argv[2]))
`;
    const proc = Bun.spawn(["python3", "-c", code, SECRET, m.headers.get("x-service-signature")!], { stdin: m.bytes, stdout: "pipe", stderr: "pipe" });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    expect({ out: out.trim(), err }).toEqual({ out: "True False False", err: "" });
  });
});

describe("outbox: events exist exactly for committed changes", () => {
  test("refused writes store no event; committed ones store one event and one delivery per webhook", async () => {
    await register();
    await register({ url: receiver().url, events: ["flag.enabled"] });
    await createFlag("checkout"); // 3 events x webhook 1
    await json(await h.request("POST", FLAGS, { body: { key: "checkout", name: "dup" }, headers: admin }), 409);
    await json(await h.request("POST", FLAGS, { body: { key: "Bad_Key", name: "x" }, headers: admin }), 400);
    await json(await h.request("PATCH", `${FLAGS}/checkout`, { body: { variants: [{ key: "a", weight: 30 }] }, headers: admin }), 400);
    await json(await h.request("PUT", `${FLAGS}/checkout/states/nowhere`, { body: { enabled: true }, headers: admin }), 404);
    await json(await h.request("PUT", `${FLAGS}/checkout/states/production`, { body: { enabled: true, rolloutPercentage: 1.2345 }, headers: admin }), 400);
    await json(await h.request("DELETE", `${FLAGS}/missing`, { headers: admin }), 404);
    await putState("checkout", "production", { enabled: true }); // 1 event x 2 webhooks
    expect((await count("webhook_events"))).toBe(4);
    expect((await count("webhook_deliveries"))).toBe(5);
    await settle();
  });

  test("when storing the deliveries fails, the state change is rolled back with them", async () => {
    await register();
    await createFlag("checkout");
    // A trigger refuses every new delivery, in each dialect.
    if (onPostgres) {
      await rawRows(h.ctx, "CREATE FUNCTION refuse_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$");
      await rawRows(h.ctx, "CREATE TRIGGER refuse_deliveries BEFORE INSERT ON webhook_deliveries FOR EACH ROW EXECUTE FUNCTION refuse_deliveries()");
    } else await rawRows(h.ctx, "CREATE TEMP TRIGGER refuse_deliveries BEFORE INSERT ON webhook_deliveries BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    const res = await h.request("PUT", `${FLAGS}/checkout/states/production`, { body: { enabled: true }, headers: admin });
    expect(res.status).toBe(500);
    await rawRows(h.ctx, onPostgres ? "DROP TRIGGER refuse_deliveries ON webhook_deliveries" : "DROP TRIGGER refuse_deliveries");
    expect((await call("GET", `${FLAGS}/checkout/states/production`)).enabled).toBe(false);
    expect((await count("flag_states"))).toBe(0);
    expect((await count("webhook_events"))).toBe(3); // the created events only
  });
});

describe("endpoints", () => {
  test("register, list, get, patch, delete; the secret is never returned", async () => {
    const hook = await register({ environments: ["production", "staging"], description: "ops channel" });
    expect(hook).toEqual({
      id: expect.stringMatching(/^wh_[A-Za-z0-9]{22}$/),
      projectSlug: "default",
      url: rx.url,
      events: ALL_EVENTS,
      environments: ["production", "staging"],
      description: "ops channel",
      enabled: true,
      createdAt: expect.stringMatching(ISO_TIMESTAMP),
      updatedAt: hook.createdAt,
    });
    const plain = await register({ url: `${rx.url}/2`, events: ["flag.created"] });
    expect(plain).toMatchObject({ environments: [], description: null, enabled: true });
    expect(await call("GET", HOOKS)).toEqual({ webhooks: [hook, plain] });
    expect(await call("GET", `/v1/webhooks/${hook.id}`)).toEqual(hook);

    h.clock.advance(1_000);
    expect(await call("PATCH", `/v1/webhooks/${hook.id}`, { description: "ops channel" })).toEqual(hook); // no change
    const patched = await call("PATCH", `/v1/webhooks/${hook.id}`, { description: null, enabled: false, environments: [], events: ["flag.deleted"] });
    expect(patched).toEqual({ ...hook, description: null, enabled: false, environments: [], events: ["flag.deleted"], updatedAt: new Date(h.clock.now()).toISOString() });
    h.clock.advance(1_000);
    const rekeyed = await call("PATCH", `/v1/webhooks/${hook.id}`, { secret: "another-secret-of-length" });
    expect(rekeyed.updatedAt).not.toBe(patched.updatedAt); // a new secret is a change

    await call("DELETE", `/v1/webhooks/${hook.id}`, undefined, 204);
    expect((await call("GET", `/v1/webhooks/${hook.id}`, undefined, 404)).error).toBe("NOT_FOUND");
    expect(await call("GET", HOOKS)).toEqual({ webhooks: [plain] });
    for (const text of [JSON.stringify(hook), JSON.stringify(patched), JSON.stringify(rekeyed), JSON.stringify(h.logs())]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain("another-secret-of-length");
      expect(text).not.toContain('"secret"');
    }
  });

  test("deleting a webhook removes its deliveries", async () => {
    const hook = await register();
    await createFlag("checkout");
    await settle();
    expect((await count("webhook_deliveries"))).toBe(3);
    await call("DELETE", `/v1/webhooks/${hook.id}`, undefined, 204);
    expect((await count("webhook_deliveries"))).toBe(0);
  });

  const invalid: [string, Record<string, unknown>, string, string | RegExp][] = [
    ["url not http(s)", { url: "ftp://127.0.0.1/x" }, "body.url", "Must be an http or https URL"],
    ["url not a URL", { url: "hooks" }, "body.url", "Must be an absolute http or https URL"],
    ["url with credentials", { url: "http://user:pw@127.0.0.1/x" }, "body.url", /credentials/],
    ["url too long", { url: `http://127.0.0.1/${"a".repeat(2048)}` }, "body.url", /at most 2048/],
    ["no events", { events: [] }, "body.events", /non-empty/],
    ["unknown event", { events: ["flag.exploded"] }, "body.events[0]", /Must be one of flag.created/],
    ["repeated event", { events: ["flag.created", "flag.created"] }, "body.events[1]", "Duplicate event flag.created"],
    ["secret too short", { secret: "short" }, "body.secret", /16 to 256/],
    ["secret too long", { secret: "x".repeat(257) }, "body.secret", /16 to 256/],
    ["unknown environment", { environments: ["production", "qa"] }, "body.environments[1]", "Project default has no environment qa"],
    ["repeated environment", { environments: ["production", "production"] }, "body.environments[1]", "Duplicate environment production"],
    ["description too long", { description: "d".repeat(2001) }, "body.description", /at most 2000/],
    ["enabled not boolean", { enabled: "yes" }, "body.enabled", /boolean/],
    ["unknown field", { retries: 3 }, "body.retries", "Unknown field"],
  ];
  test(`400 with details, nothing stored: ${invalid.map(([what]) => what).join(", ")}`, async () => {
    for (const [what, body, path, message] of invalid) {
      const res = await call("POST", HOOKS, { url: rx.url, events: ALL_EVENTS, secret: SECRET, ...body }, 400);
      expect({ what, error: res.error }).toEqual({ what, error: "VALIDATION_ERROR" });
      expect(res.details).toContainEqual({ path, message: typeof message === "string" ? message : expect.stringMatching(message) });
    }
    expect((await count("webhooks"))).toBe(0);
  });

  test("PATCH is validated like registration and a refused PATCH changes nothing", async () => {
    const hook = await register();
    for (const body of [{ url: "ftp://x" }, { events: [] }, { secret: "short" }, { environments: ["qa"] }, { id: "wh_x" }]) {
      expect((await call("PATCH", `/v1/webhooks/${hook.id}`, body, 400)).error).toBe("VALIDATION_ERROR");
    }
    expect(await call("GET", `/v1/webhooks/${hook.id}`)).toEqual(hook);
    expect((await call("POST", HOOKS, { url: rx.url, events: ALL_EVENTS }, 400)).details.map((d: { path: string }) => d.path)).toEqual(["body.secret"]);
  });

  test("404: unknown project, webhook, delivery", async () => {
    await call("GET", "/v1/projects/nope/webhooks", undefined, 404);
    await call("POST", "/v1/projects/nope/webhooks", { url: rx.url, events: ALL_EVENTS, secret: SECRET }, 404);
    for (const [method, path] of [["GET", "/v1/webhooks/wh_nope"], ["PATCH", "/v1/webhooks/wh_nope"], ["DELETE", "/v1/webhooks/wh_nope"], ["GET", "/v1/webhooks/wh_nope/deliveries"], ["POST", "/v1/webhook-deliveries/del_nope/redeliver"]] as const) {
      const res = await call(method, path, method === "PATCH" ? { enabled: false } : undefined, 404);
      expect(res.error).toBe("NOT_FOUND");
    }
  });

  test("API keys of another project: 403 on its webhooks, deliveries and redelivery; viewers 403", async () => {
    await call("POST", "/v1/projects", { slug: "other", name: "Other" }, 201);
    const foreign = await call("POST", "/v1/projects/other/webhooks", { url: rx.url, events: ["flag.created"], secret: SECRET }, 201);
    await call("POST", "/v1/projects/other/flags", { key: "x", name: "x" }, 201);
    await settle();
    const [delivery] = (await call("GET", `/v1/webhooks/${foreign.id}/deliveries`)).deliveries;
    const mgmt = bearer((await seedApiKey(h.ctx, "mgmt", "default")).secret);
    const cases: [string, string, unknown?][] = [
      ["GET", "/v1/projects/other/webhooks"],
      ["POST", "/v1/projects/other/webhooks", { url: rx.url, events: ["flag.created"], secret: SECRET }],
      ["GET", `/v1/webhooks/${foreign.id}`],
      ["PATCH", `/v1/webhooks/${foreign.id}`, { enabled: false }],
      ["DELETE", `/v1/webhooks/${foreign.id}`],
      ["GET", `/v1/webhooks/${foreign.id}/deliveries`],
      ["POST", `/v1/webhook-deliveries/${delivery.id}/redeliver`],
    ];
    for (const [method, path, body] of cases) {
      const res = await call(method, path, body, 403, mgmt);
      expect({ path, error: res.error, message: res.message }).toEqual({ path, error: "FORBIDDEN", message: MESSAGES.otherProject });
    }
    // Its own project's webhooks: fine.
    expect((await call("GET", HOOKS, undefined, 200, mgmt)).webhooks).toEqual([]);
    const viewer = await userToken(h.ctx, "viewer");
    expect((await call("GET", `/v1/webhooks/${foreign.id}`, undefined, 403, viewer)).message).toBe(MESSAGES.role("viewer"));
    expect(await call("GET", `/v1/webhooks/${foreign.id}`, undefined, 200, await userToken(h.ctx, "editor"))).toEqual(foreign);
  });

  test("deliveries: newest first, limit, status filter; bad query values 400", async () => {
    const hook = await register({ events: ["flag.enabled", "flag.disabled"] });
    await createFlag("checkout");
    for (let i = 0; i < 5; i++) {
      h.clock.advance(1_000);
      await putState("checkout", "production", { enabled: i % 2 === 0 });
      await settle();
    }
    const all = await deliveries(hook.id);
    expect(all.map((d) => d.event)).toEqual(["flag.enabled", "flag.disabled", "flag.enabled", "flag.disabled", "flag.enabled"]);
    expect(all.map((d) => d.createdAt)).toEqual([...all.map((d) => d.createdAt)].sort().reverse());
    expect(await deliveries(hook.id, "?limit=2")).toEqual(all.slice(0, 2));
    expect(await deliveries(hook.id, "?status=succeeded&limit=100")).toEqual(all);
    expect(await deliveries(hook.id, "?status=failed")).toEqual([]);
    for (const q of ["limit=0", "limit=101", "limit=x", "status=done", "page=2"]) {
      expect((await call("GET", `/v1/webhooks/${hook.id}/deliveries?${q}`, undefined, 400)).error).toBe("VALIDATION_ERROR");
    }
  });

  test("the API document describes every webhook route", async () => {
    const doc = await call("GET", "/v1/openapi.json");
    const ops = [
      doc.paths["/v1/projects/{slug}/webhooks"].post,
      doc.paths["/v1/projects/{slug}/webhooks"].get,
      doc.paths["/v1/webhooks/{webhookId}"].get,
      doc.paths["/v1/webhooks/{webhookId}"].patch,
      doc.paths["/v1/webhooks/{webhookId}"].delete,
      doc.paths["/v1/webhooks/{webhookId}/deliveries"].get,
      doc.paths["/v1/webhook-deliveries/{deliveryId}/redeliver"].post,
    ];
    for (const op of ops) {
      expect(op.tags).toEqual(["Webhooks"]);
      expect(op.description.length).toBeGreaterThan(50);
    }
  });
});

describe("failures, retries and redelivery", () => {
  async function oneDelivery(hookBody: Record<string, unknown> = {}) {
    await createFlag("checkout");
    const hook = await register({ events: ["flag.enabled"], ...hookBody });
    await putState("checkout", "production", { enabled: true });
    await settle();
    const [d] = await deliveries(hook.id);
    return { hook, delivery: d! };
  }
  const fail500 = () => new Response("nope", { status: 500 });

  test("500, then the receiver recovers: retried after the first delay and succeeds with the same bytes", async () => {
    rx.answer = fail500;
    const { hook, delivery } = await oneDelivery();
    expect(delivery).toMatchObject({ status: "pending", attempts: 1, responseStatus: 500, error: "HTTP 500", nextAttemptAt: new Date(h.clock.now() + 60_000).toISOString() });
    h.clock.advance(59_999);
    await settle();
    expect(rx.received.length).toBe(1); // not due yet
    rx.answer = () => new Response(null, { status: 204 });
    h.clock.advance(1);
    await settle();
    expect(rx.received.length).toBe(2);
    const [first, second] = rx.received;
    expect(Buffer.from(second!.bytes).equals(Buffer.from(first!.bytes))).toBe(true);
    expect(second!.headers.get("x-service-delivery")).toBe(delivery.id);
    expect(await deliveries(hook.id)).toEqual([{ ...delivery, status: "succeeded", attempts: 2, responseStatus: 204, error: null, nextAttemptAt: null, lastAttemptAt: new Date(h.clock.now()).toISOString(), durationMs: expect.any(Number) }]);
  });

  test("a receiver that always fails: 5 attempts at the schedule's delays, then failed and never again; redelivery succeeds with the same event and bytes", async () => {
    rx.answer = fail500;
    const { hook, delivery } = await oneDelivery();
    for (const delay of [60, 300, 1800, 7200]) {
      h.clock.advance(delay * 1000);
      await settle();
    }
    const [failed] = await deliveries(hook.id);
    expect(failed).toMatchObject({ id: delivery.id, status: "failed", attempts: 5, nextAttemptAt: null, responseStatus: 500, error: "HTTP 500" });
    expect(rx.received.length).toBe(5);
    h.clock.advance(86_400_000);
    await settle();
    expect(rx.received.length).toBe(5);

    rx.answer = () => new Response("ok");
    const again = await call("POST", `/v1/webhook-deliveries/${delivery.id}/redeliver`, undefined, 202);
    expect(again).toEqual({
      id: expect.stringMatching(/^del_/),
      webhookId: hook.id,
      eventId: delivery.eventId,
      event: "flag.enabled",
      status: "pending",
      attempts: 0,
      nextAttemptAt: new Date(h.clock.now()).toISOString(),
      lastAttemptAt: null,
      responseStatus: null,
      error: null,
      durationMs: null,
      redeliveryOf: delivery.id,
      createdAt: new Date(h.clock.now()).toISOString(),
    });
    const all = await rx.waitFor(6); // attempted at once, without a job or a drain
    expect(Buffer.from(all[5]!.bytes).equals(Buffer.from(all[0]!.bytes))).toBe(true);
    expect(all[5]!.json.id).toBe(delivery.eventId);
    expect(all[5]!.headers.get("x-service-delivery")).toBe(again.id);
    await settle();
    const [newest, original] = await deliveries(hook.id);
    expect(newest).toMatchObject({ id: again.id, status: "succeeded", attempts: 1, redeliveryOf: delivery.id });
    expect(original).toEqual(failed); // the original keeps its state
    // A succeeded delivery may be redelivered too.
    expect((await call("POST", `/v1/webhook-deliveries/${again.id}/redeliver`, undefined, 202)).redeliveryOf).toBe(again.id);
    await settle();
  });

  test("redeliver: 409 on a pending delivery and on a disabled webhook", async () => {
    rx.answer = fail500;
    const { hook, delivery } = await oneDelivery();
    const pending = await call("POST", `/v1/webhook-deliveries/${delivery.id}/redeliver`, undefined, 409);
    expect(pending).toEqual({ error: "CONFLICT", message: `Delivery ${delivery.id} is still pending: it will be attempted again on its schedule` });
    await rawRows(h.ctx, "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL");
    await call("PATCH", `/v1/webhooks/${hook.id}`, { enabled: false });
    expect((await call("POST", `/v1/webhook-deliveries/${delivery.id}/redeliver`, undefined, 409)).message).toMatch(/disabled/);
    expect((await count("webhook_deliveries"))).toBe(1);
  });

  test("a disabled webhook's pending deliveries wait, and go out when it is enabled again", async () => {
    rx.answer = fail500;
    const { hook } = await oneDelivery();
    await call("PATCH", `/v1/webhooks/${hook.id}`, { enabled: false });
    rx.answer = () => new Response("ok");
    h.clock.advance(3_600_000);
    await settle();
    expect(rx.received.length).toBe(1);
    await call("PATCH", `/v1/webhooks/${hook.id}`, { enabled: true });
    await rx.waitFor(2);
    await settle();
    expect((await deliveries(hook.id))[0]).toMatchObject({ status: "succeeded", attempts: 2 });
  });

  test("a redirect is a failure and is not followed", async () => {
    const target = receiver();
    rx.answer = () => new Response(null, { status: 302, headers: { location: target.url } });
    const { delivery } = await oneDelivery();
    expect(delivery).toMatchObject({ status: "pending", responseStatus: 302, error: "HTTP 302: redirects are not followed" });
    expect(target.received).toEqual([]);
  });

  test("a receiver that never answers: the attempt fails after SVC_WEBHOOK_TIMEOUT_MS", async () => {
    rx.answer = () => new Promise<Response>(() => {});
    const { delivery } = await oneDelivery();
    expect(delivery).toMatchObject({ status: "pending", attempts: 1, responseStatus: null, error: "timed out after 300 ms" });
    expect(delivery.durationMs).toBeGreaterThanOrEqual(290);
    expect(delivery.durationMs).toBeLessThan(2_000);
  });

  test("nothing listening: connection refused, retried later", async () => {
    const closed = receiver();
    closed.stop();
    const { delivery } = await oneDelivery({ url: closed.url });
    expect(delivery).toMatchObject({ status: "pending", attempts: 1, responseStatus: null, error: "connection refused" });
  });

  test("one slow receiver does not hold up another, and no delivery is sent twice at once", async () => {
    const slow = receiver({ answer: () => new Promise<Response>(() => {}) });
    const slowHook = await register({ url: slow.url, events: ["flag.enabled", "flag.disabled"] });
    await register({ events: ["flag.enabled", "flag.disabled"] });
    await createFlag("checkout");
    for (let i = 0; i < 10; i++) await putState("checkout", "production", { enabled: i % 2 === 0 });
    await rx.waitFor(10, 2_000); // the fast receiver gets all ten while the slow one hangs
    for (let i = 0; i < 20; i++) (h.ctx.deliveries as DeliveryDispatcher).pump(); // passes while the slow attempts are in flight
    await Bun.sleep(20);
    expect(slow.received.length).toBe(PER_WEBHOOK_IN_FLIGHT);
    expect(new Set(slow.received.map((m) => m.headers.get("x-service-delivery"))).size).toBe(PER_WEBHOOK_IN_FLIGHT);
    await settle(); // the slow ones time out (300 ms), the rest of them get their first attempt
    expect(slow.received.length).toBe(10);
    expect((await deliveries(slowHook.id, "?limit=100")).every((d) => d.attempts === 1 && d.error === "timed out after 300 ms")).toBe(true);
    expect(rx.received.length).toBe(10);
  });

  test("a backlog beyond the bounds: every delivery arrives exactly once, never more than the bounds in flight", async () => {
    let inFlight = 0;
    let peak = 0;
    rx.answer = async () => {
      peak = Math.max(peak, ++inFlight);
      await Bun.sleep(2);
      inFlight--;
      return new Response("ok");
    };
    const other = receiver();
    await register({ events: ["flag.enabled", "flag.disabled"] });
    await register({ url: `${rx.url}/2`, events: ["flag.enabled", "flag.disabled"] });
    await register({ url: other.url, events: ["flag.enabled", "flag.disabled"] });
    await createFlag("checkout");
    // 30 changes: each environment in turn, on, off, on, ...
    for (let i = 0; i < 30; i++) await putState("checkout", ENVIRONMENTS[i % 3]!, { enabled: Math.floor(i / 3) % 2 === 0 });
    await rx.waitFor(60, 5_000);
    await other.waitFor(30, 5_000);
    await settle();
    const all = [...rx.received, ...other.received];
    expect(all.length).toBe(90);
    expect(new Set(all.map((m) => m.headers.get("x-service-delivery"))).size).toBe(90); // none twice
    expect(new Set(all.map((m) => m.json.id)).size).toBe(30); // each event to the 3 webhooks
    expect(peak).toBeLessThanOrEqual(2 * PER_WEBHOOK_IN_FLIGHT);
    expect((await count("webhook_deliveries WHERE status = 'succeeded'"))).toBe(90);
  });

  sqliteOnly("retention: deliveries older than 30 days are removed with their events", async () => {
    const hook = await register({ events: ["flag.created"] });
    await createFlag("old");
    h.clock.advance(29 * 86_400_000);
    await createFlag("newer");
    await settle();
    h.clock.advance(1 * 86_400_000 + 1);
    expect(await new SqliteDeliveryQueue(h.sqlite).prune(h.clock.now())).toEqual({ deliveries: 3, events: 3 });
    expect((await deliveries(hook.id)).length).toBe(3);
    expect((await count("webhook_events"))).toBe(3);
  });
});

describe("outbound guard (default SVC_OUTBOUND_ALLOWED_HOSTS=external)", () => {
  test("literal blocked addresses are refused at registration with a clear reason", async () => {
    const d = await app({ SVC_OUTBOUND_ALLOWED_HOSTS: "external" });
    const key = bearer(await seedAdminKey(d.ctx));
    const cases: [string, string][] = [
      [`http://127.0.0.1:${rx.port}/hook`, "127.0.0.1 is loopback"],
      ["http://10.0.0.1/hook", "10.0.0.1 is private"],
      ["http://169.254.169.254/latest/meta-data", "169.254.169.254 is link-local"],
      [`http://[::1]:${rx.port}/hook`, "::1 is loopback"],
      ["http://2130706433/hook", "127.0.0.1 is loopback"],
      ["https://[::ffff:10.1.2.3]/hook", "::ffff:a01:203 is private"],
      ["http://0.0.0.0/", "0.0.0.0 is unspecified"],
    ];
    for (const [url, reason] of cases) {
      const res = await call("POST", HOOKS, { url, events: ALL_EVENTS, secret: SECRET }, 400, key, d);
      expect(res.details).toEqual([{ path: "body.url", message: `blocked by SVC_OUTBOUND_ALLOWED_HOSTS: ${reason}` }]);
    }
    const hook = await call("POST", HOOKS, { url: "https://hooks.example.com/x", events: ALL_EVENTS, secret: SECRET, enabled: false }, 201, key, d);
    expect((await call("PATCH", `/v1/webhooks/${hook.id}`, { url: "http://192.168.1.10/" }, 400, key, d)).details[0].message).toBe(
      "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 192.168.1.10 is private",
    );
  });

  test("a host name that resolves to loopback is accepted at registration and refused at send time", async () => {
    const d = await app({ SVC_OUTBOUND_ALLOWED_HOSTS: "external" });
    const key = bearer(await seedAdminKey(d.ctx));
    const hook = await call("POST", HOOKS, { url: `http://localhost:${rx.port}/hook`, events: ["flag.created"], secret: SECRET }, 201, key, d);
    await call("POST", FLAGS, { key: "checkout", name: "c" }, 201, key, d);
    await settle(d);
    expect(rx.received).toEqual([]);
    const list = (await call("GET", `/v1/webhooks/${hook.id}/deliveries`, undefined, 200, key, d)).deliveries;
    expect(list).toHaveLength(3);
    for (const delivery of list) {
      expect(delivery).toMatchObject({ status: "pending", attempts: 1, responseStatus: null });
      expect(delivery.error).toMatch(/^blocked by SVC_OUTBOUND_ALLOWED_HOSTS: localhost \((127\.0\.0\.1|::1)\) is loopback$/);
    }
  });
});

describe("secrets at rest", () => {
  sqliteOnly("a webhook's replaced or deleted secret does not stay readable in the database file", async () => {
    const app = await testApp();
    try {
      const admin = bearer(await seedAdminKey(app.ctx));
      const first = "FIRST-SECRET-0123456789abcdef";
      const hook = await json(await app.request("POST", "/v1/projects/default/webhooks", { headers: admin, body: { url: "https://hooks.example.com/x", events: ["flag.created"], secret: first } }), 201);
      await json(await app.request("PATCH", `/v1/webhooks/${hook.id}`, { headers: admin, body: { secret: "SECOND-SECRET-0123456789abcdef" } }), 200);
      await app.request("DELETE", `/v1/webhooks/${hook.id}`, { headers: admin });
      app.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
      const file = await Bun.file(join(app.dir, "flagsvc.db")).text();
      expect({ first: file.includes(first), second: file.includes("SECOND-SECRET") }).toEqual({ first: false, second: false });
    } finally {
      app.close();
    }
  });
});
