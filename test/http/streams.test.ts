/**
 * The streams through HTTP (app.handle reads a streaming Response's body as it comes): the OFREP
 * change stream (its token, messages, resume, revocation, logs) and the definitions API (access,
 * payload, ETag, stream, resume, concurrent writes). docs/streams.md describes both.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { SYSTEM } from "../../src/changes/entry";
import type { ApiKeyPrincipal } from "../../src/http/access";
import { pruneAuditLog } from "../../src/modules/audit/retention";
import { StreamTokens } from "../../src/modules/streams/tokens";
import { bearer, json, lastPosition, seedAdminKey, testApp, type TestApp } from "../helpers";
import { DefinitionsModel, SseReader, type SseEvent } from "../sse";

let h: TestApp;
afterEach(() => h?.close());

/** A fresh app with an admin key; `key(scope, env)` makes an API key through the API. */
async function setup(env: Record<string, string> = {}) {
  h = await testApp({ SVC_RATE_LIMITS: "eval:100000,test:100000,mgmt:100000,full:100000,admin:100000,anonymous:100000", ...env });
  const admin = bearer(await seedAdminKey(h.ctx));
  const key = async (scope: string, environment = "production", project = "default") => {
    const made = await json(await h.request("POST", `/v1/projects/${project}/api-keys`, { headers: admin, body: { name: `${scope} key`, scope, environment } }), 201);
    return { id: made.id as string, secret: made.key as string, headers: bearer(made.key) };
  };
  return { admin, key };
}

const principalOf = async (secret: string) => (await h.ctx.credentials.resolve(`Bearer ${secret}`)).principal as ApiKeyPrincipal;
const tokenOf = async (secret: string) => h.ctx.streamTokens.issue(await principalOf(secret), h.clock.now());
const events = (token: string, headers: Record<string, string> = {}) => h.request("GET", `/ofrep/v1/events?token=${encodeURIComponent(token)}`, { headers });
const flag = (key: string) => h.services.flags.createFlag(SYSTEM, "default", { key, name: key });
const state = (key: string, environment: string, enabled: boolean, rolloutPercentage?: number | null) =>
  h.services.flags.putState(SYSTEM, "default", key, environment, { enabled, ...(rolloutPercentage !== undefined ? { rolloutPercentage } : {}) });
const environmentId = async (slug: string, project = "default") => (await h.services.projects.getEnvironment(project, slug)).id;

/** A stream, after its `retry: 1000` line. */
async function open(res: Response): Promise<SseReader> {
  expect(res.status).toBe(200);
  const r = new SseReader(res);
  expect(await r.next()).toEqual({ retry: "1000" });
  return r;
}

/** The next event is not a message: a heartbeat's ping comes first. */
async function nothingPending(r: SseReader): Promise<void> {
  await Bun.sleep(20);
  h.ctx.streams.heartbeat();
  expect(await r.next()).toEqual({ comment: "ping" });
}

/**
 * The store's reads made as usual, their answers handed over `ms` later: what a database across
 * a network does to the hub's ordering (the data is the real store's).
 */
function lateAnswers<T extends object>(store: T, methods: (keyof T)[], ms = 5): void {
  for (const m of methods) {
    const read = (store[m] as (...a: unknown[]) => Promise<unknown>).bind(store);
    (store as Record<keyof T, unknown>)[m] = (...args: unknown[]) => {
      const answer = read(...args);
      return Bun.sleep(ms).then(() => answer);
    };
  }
}

const refetch = (e: SseEvent | "end") => {
  if (e === "end") throw new Error("the stream ended");
  return { id: e.id, event: e.event, data: JSON.parse(e.data!) };
};

describe("OFREP change stream: GET /ofrep/v1/events", () => {
  test("a token that is missing, malformed, forged, of another instance or expired: 401 in the standard shape", async () => {
    const { key } = await setup();
    const k = await key("eval");
    const token = await tokenOf(k.secret);
    const refused = { error: "UNAUTHORIZED", message: expect.stringMatching(/^Invalid or expired stream token/) };
    const [body] = token.split(".");
    const other = new StreamTokens("another instance's secret, at least 32 characters").issue(await principalOf(k.secret), h.clock.now());
    for (const bad of ["", "nope", `${body}.AAAA`, `${body}x.${token.split(".")[1]}`, other, k.secret]) {
      expect(await json(await events(bad), 401)).toEqual(refused);
    }
    expect(await json(await h.request("GET", "/ofrep/v1/events"), 401)).toEqual(refused);
    // Valid 12 to 24 hours: the same token in its window, and the next; refused after.
    h.clock.advance(12 * 3600_000);
    expect(await tokenOf(k.secret)).not.toBe(token);
    const r = await open(await events(token));
    await r.cancel();
    h.clock.advance(12 * 3600_000);
    expect(await json(await events(token), 401)).toEqual(refused);
  });

  test("the same key gets the same token all through a 12-hour window; the stream answers as an SSE stream", async () => {
    const { key } = await setup();
    const k = await key("eval");
    h.clock.ms = Math.ceil(h.clock.ms / 43_200_000) * 43_200_000; // the start of a window
    const first = await tokenOf(k.secret);
    h.clock.advance(43_200_000 - 1);
    expect(await tokenOf(k.secret)).toBe(first);
    expect(h.ctx.streamTokens.verify(first, h.clock.now())?.expiresAt).toBe(h.clock.now() + 1 + 43_200_000);
    const res = await events(first);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    expect(res.headers.get("x-request-id")).toBeTruthy();
    // The connect counts against the key's own limit, not the anonymous one of its address.
    expect(res.headers.get("x-ratelimit-limit")).toBe("100000");
    const r = await open(res);
    expect(h.ctx.streams.size().changes).toBe(1);
    await r.cancel();
    await Bun.sleep(10);
    expect(h.ctx.streams.size().changes).toBe(0);
  });

  test("each commit that changes the environment's evaluation sends one refetchEvaluation, once evaluation sees it", async () => {
    const { key } = await setup();
    const k = await key("eval");
    await flag("new-checkout");
    const r = await open(await events(await tokenOf(k.secret)));
    await state("new-checkout", "production", true);
    const position = await lastPosition(h.ctx);
    const at = Math.floor(h.clock.now() / 1000);
    const message = refetch(await r.next());
    expect(message).toEqual({ id: String(position), event: "message", data: { type: "refetchEvaluation", etag: `"${position}"`, lastModified: at } });
    // A client refetching at the message evaluates the new state.
    const evaluated = await json(await h.request("POST", "/v1/evaluate", { headers: k.headers, body: { flagKey: "new-checkout", context: {} } }), 200);
    expect(evaluated.enabled).toBe(true);
    expect(h.ctx.streams.lastChange(await environmentId("production"))).toEqual({ position, at: h.clock.now() });
    // Another environment's state, another project's flag, a key: nothing for this stream.
    await state("new-checkout", "staging", true);
    await h.services.projects.create(SYSTEM, { slug: "other", name: "Other" });
    await h.services.flags.createFlag(SYSTEM, "other", { key: "elsewhere", name: "x" });
    await key("eval");
    await nothingPending(r);
    // A flag of the project (created, updated, deleted): one message each, the position of its commit.
    await flag("dark-mode");
    expect(refetch(await r.next()).id).toBe(String(await lastPosition(h.ctx)));
    await h.services.flags.updateFlag(SYSTEM, "default", "dark-mode", { rules: [{ name: "beta", conditions: [] }] });
    expect(refetch(await r.next()).id).toBe(String(await lastPosition(h.ctx)));
    await h.services.flags.deleteFlag(SYSTEM, "default", "dark-mode");
    expect(refetch(await r.next()).id).toBe(String(await lastPosition(h.ctx)));
    await r.cancel();
  });

  test("a message comes once the snapshot holds the change, even when its reads answer late; in commit order", async () => {
    const { key } = await setup();
    const k = await key("eval");
    await flag("gated");
    await state("gated", "production", true);
    const r = await open(await events(await tokenOf(k.secret)));
    lateAnswers(h.ctx.stores.flags, ["definition", "stateIn", "project"], 30);
    const evaluate = async () => (await json(await h.request("POST", "/v1/evaluate", { headers: k.headers, body: { flagKey: "gated", context: { plan: "free" } } }), 200)).reason;
    expect(await evaluate()).toBe("FLAG_ENABLED");
    const writes = [
      h.services.flags.updateFlag(SYSTEM, "default", "gated", { rules: [{ name: "free", conditions: [{ attribute: "plan", operator: "equals", value: "free" }] }] }),
      state("gated", "production", false),
    ];
    const first = refetch(await r.next());
    const afterFirst = await evaluate();
    const second = refetch(await r.next());
    const afterSecond = await evaluate();
    await Promise.all(writes);
    expect(Number(second.id)).toBe(Number(first.id) + 1);
    // At each message, evaluation holds at least that commit (the next may have followed it already).
    expect(["TARGETING_RULE_MATCH", "FLAG_DISABLED"]).toContain(afterFirst);
    expect(afterSecond).toBe("FLAG_DISABLED");
    await r.cancel();
  });

  test("the entries of one commit make one message, with the commit's last position", async () => {
    const { key } = await setup();
    const k = await key("eval");
    await flag("a");
    await flag("b");
    const r = await open(await events(await tokenOf(k.secret)));
    const project = await h.services.projects.get("default");
    // One commit touching two flags and a state (no write of the API makes such a commit yet).
    const next = (await lastPosition(h.ctx)) + 1;
    const entry = (position: number, type: "flag" | "flag_state", key: string, environment: string | null) => ({
      position,
      id: `aud_${position}`,
      at: new Date(h.clock.now()).toISOString(),
      actor: SYSTEM.actor,
      requestId: null,
      project: { id: project.id, slug: project.slug },
      environment,
      resource: { type, id: `flag_${key}`, key },
      action: "updated" as const,
      changes: {},
    });
    h.ctx.streams.subscriber([entry(next, "flag", "a", null), entry(next + 1, "flag_state", "b", "production"), entry(next + 2, "flag_state", "a", "staging")]);
    expect(refetch(await r.next()).id).toBe(String(next + 1));
    await nothingPending(r);
    await r.cancel();
  });

  test("Last-Event-ID that is not the environment's last change is told at once; the current one is told nothing", async () => {
    const { key } = await setup();
    const k = await key("eval");
    await flag("a");
    const first = await lastPosition(h.ctx);
    await state("a", "production", true);
    const last = await lastPosition(h.ctx);
    const token = await tokenOf(k.secret);
    const behind = await open(await events(token, { "last-event-id": String(first) }));
    expect(refetch(await behind.next())).toMatchObject({ id: String(last), data: { etag: `"${last}"` } });
    await nothingPending(behind);
    const current = await open(await events(token, { "last-event-id": String(last) }));
    await nothingPending(current);
    // Without Last-Event-ID (a first connect), nothing either: the provider has just fetched.
    const fresh = await open(await events(token));
    await nothingPending(fresh);
    for (const r of [behind, current, fresh]) await r.cancel();
  });

  test("a deleted key: its streams end at once and its URL is refused", async () => {
    const { admin, key } = await setup();
    const k = await key("eval");
    const keep = await key("eval");
    const token = await tokenOf(k.secret);
    const r = await open(await events(token));
    const other = await open(await events(await tokenOf(keep.secret)));
    expect(await h.request("DELETE", `/v1/api-keys/${k.id}`, { headers: admin })).toHaveProperty("status", 204);
    await r.end();
    expect((await json(await events(token), 401)).error).toBe("UNAUTHORIZED");
    // The other key's stream is untouched.
    await nothingPending(other);
    await other.cancel();
  });

  test("rotation: the old secret's token works through the grace period, then its stream ends and it is refused", async () => {
    const { admin, key } = await setup();
    const k = await key("eval");
    const oldToken = await tokenOf(k.secret);
    const r = await open(await events(oldToken));
    const rotated = await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { headers: admin, body: { gracePeriodSeconds: 60 } }), 200);
    const newToken = await tokenOf(rotated.key);
    expect(newToken).not.toBe(oldToken);
    await nothingPending(r); // still open: the grace period runs
    await (await open(await events(oldToken))).cancel();
    h.clock.advance(60_000);
    h.ctx.streams.heartbeat();
    await r.end();
    expect((await json(await events(oldToken), 401)).error).toBe("UNAUTHORIZED");
    const fresh = await open(await events(newToken));
    // Rotated again without grace: the current secret's stream ends at once.
    await json(await h.request("POST", `/v1/api-keys/${k.id}/rotate`, { headers: admin }), 200);
    await fresh.end();
    expect((await json(await events(newToken), 401)).error).toBe("UNAUTHORIZED");
  });

  test("its environment or project deleted: the stream ends", async () => {
    const { admin, key } = await setup();
    await json(await h.request("POST", "/v1/projects/default/environments", { headers: admin, body: { slug: "qa", name: "QA" } }), 201);
    const qa = await key("eval", "qa");
    const prod = await key("eval", "production");
    const a = await open(await events(await tokenOf(qa.secret)));
    const b = await open(await events(await tokenOf(prod.secret)));
    expect(await h.request("DELETE", "/v1/projects/default/environments/qa", { headers: admin })).toHaveProperty("status", 204);
    await a.end();
    await nothingPending(b);
    expect(await h.request("DELETE", "/v1/projects/default", { headers: admin })).toHaveProperty("status", 204);
    await b.end();
    expect(h.ctx.streams.size()).toEqual({ changes: 0, definitions: 0 });
  });

  test("a token is never written to a log: access lines carry the path only, errors do not echo it", async () => {
    const { key } = await setup();
    const k = await key("eval");
    const token = await tokenOf(k.secret);
    const r = await open(await events(token, { "last-event-id": "1" }));
    await r.cancel();
    const forged = `${token.slice(0, -4)}AAAA`;
    for (const [method, t] of [["GET", forged], ["POST", token], ["DELETE", token], ["GET", `${token}&extra=1`]] as const) {
      const res = await h.request(method, `/ofrep/v1/events?token=${t}`);
      expect(await res.text()).not.toContain(token.slice(10, 60));
    }
    h.ctx.streams.close();
    await Bun.sleep(10);
    const lines = h.logs();
    const requests = lines.filter((l) => l.msg === "request" && String(l.path).startsWith("/ofrep"));
    expect(requests.length).toBe(5);
    for (const l of requests) expect(l.path).toBe("/ofrep/v1/events");
    const text = JSON.stringify(lines);
    expect(text).not.toContain(token.slice(10, 60));
    expect(text).not.toContain(forged.slice(-30));
  });

  test("HEAD judges the token and opens nothing", async () => {
    const { key } = await setup();
    const k = await key("eval");
    const token = await tokenOf(k.secret);
    const res = await h.request("HEAD", `/ofrep/v1/events?token=${token}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(h.ctx.streams.size().changes).toBe(0);
    expect((await h.request("HEAD", "/ofrep/v1/events?token=nope")).status).toBe(401);
  });

  test("lastChange and waitFor: where each environment stands, as the change log says after a restart", async () => {
    const { admin, key } = await setup();
    await key("eval");
    await flag("a");
    await state("a", "staging", true);
    const staging = await lastPosition(h.ctx);
    await json(await h.request("POST", "/v1/projects/default/environments", { headers: admin, body: { slug: "qa", name: "QA" } }), 201);
    const qaCreated = await lastPosition(h.ctx);
    await h.services.projects.create(SYSTEM, { slug: "shop", name: "Shop" });
    const shopCreated = await lastPosition(h.ctx);
    const hub = h.ctx.streams;
    expect(hub.lastChange(await environmentId("staging")).position).toBe(staging);
    expect(hub.lastChange(await environmentId("production")).position).toBe(staging - 1); // the flag's creation
    expect(hub.lastChange(await environmentId("qa")).position).toBe(qaCreated);
    expect(hub.lastChange(await environmentId("production", "shop")).position).toBe(shopCreated);
    expect(hub.lastChange("env_unknown")).toEqual({ position: 0, at: 0 });
    // What a restarted server reads from the change log is what the hub kept.
    const { environments } = await h.ctx.stores.definitions.lastChanges();
    for (const e of environments) expect({ id: e.id, ...hub.lastChange(e.id) }).toEqual({ id: e.id, position: e.position, at: e.at });
    expect(environments.length).toBe(7);
    expect(await hub.waitFor((await lastPosition(h.ctx)), 10)).toBe(true);
    const later = hub.waitFor((await lastPosition(h.ctx)) + 1, 5_000);
    await flag("b");
    expect(await later).toBe(true);
    expect(await hub.waitFor((await lastPosition(h.ctx)) + 5, 30)).toBe(false);
  });
});

describe("definitions API: GET /v1/definitions", () => {
  test("server-side keys only: a client key 403, admin key 403 naming what it takes, none 401; no CORS", async () => {
    const { admin, key } = await setup();
    const clientKey = await key("client");
    for (const path of ["/v1/definitions", "/v1/definitions/stream"]) {
      expect(await json(await h.request("GET", path, { headers: clientKey.headers }), 403)).toMatchObject({ error: "FORBIDDEN", message: "This key scope does not have access to this endpoint" });
      expect(await json(await h.request("GET", path, { headers: admin }), 403)).toEqual({
        error: "FORBIDDEN",
        message: "The definitions API takes a project API key of scope eval, test, mgmt or full",
      });
      expect((await json(await h.request("GET", path), 401)).error).toBe("UNAUTHORIZED");
    }
    expect(h.ctx.streams.size().definitions).toBe(0);
    for (const scope of ["eval", "test", "mgmt", "full"]) {
      const k = await key(scope);
      const res = await h.request("GET", "/v1/definitions", { headers: { ...k.headers, origin: "https://app.example.com" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      const preflight = await h.request("OPTIONS", "/v1/definitions", { headers: { origin: "https://app.example.com", "access-control-request-method": "GET" } });
      expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    }
  });

  test("every flag of the project by key, definitions as stored, the state of the key's environment; version the log's last position", async () => {
    const { key } = await setup();
    const k = await key("mgmt", "staging");
    await h.services.flags.createFlag(SYSTEM, "default", {
      key: "checkout",
      name: "Checkout",
      description: "not in the record",
      variants: [
        { key: "blue", weight: 50 },
        { key: "green", name: "Green", weight: 50 },
      ],
      rules: [
        { name: "staff", conditions: [{ attribute: "email", operator: "in", value: ["a@example.com", "b@example.com"] }], variant: "green" },
        { name: "off", enabled: false, conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] },
      ],
    });
    await flag("banner");
    await state("checkout", "staging", true, 25.5);
    await state("banner", "production", true);
    const stored = await h.services.flags.getFlag("default", "checkout");
    const body = await json(await h.request("GET", "/v1/definitions", { headers: k.headers }), 200);
    expect(body).toEqual({
      version: await lastPosition(h.ctx),
      project: "default",
      environment: "staging",
      flags: [
        { key: "banner", variants: [], rules: [], state: { enabled: false, rolloutPercentage: null } },
        { key: "checkout", variants: stored.variants, rules: stored.rules, state: { enabled: true, rolloutPercentage: 25.5 } },
      ],
      segments: [],
    });
    expect(body.flags[1].rules.map((r: { enabled: boolean }) => r.enabled)).toEqual([true, false]);
  });

  test("a strong ETag of the flags: If-None-Match gets 304 without a body until the flags change", async () => {
    const { admin, key } = await setup();
    const k = await key("test");
    await flag("a");
    const first = await h.request("GET", "/v1/definitions", { headers: k.headers });
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    const same = await h.request("GET", "/v1/definitions", { headers: { ...k.headers, "if-none-match": etag } });
    expect(same.status).toBe(304);
    expect(await same.text()).toBe("");
    expect(same.headers.get("etag")).toBe(etag);
    expect(same.headers.get("x-request-id")).toBeTruthy();
    for (const header of [`"other", ${etag}`, `W/${etag}`, "*"]) {
      expect((await h.request("GET", "/v1/definitions", { headers: { ...k.headers, "if-none-match": header } })).status).toBe(304);
    }
    // Something that is not these flags (a webhook, another environment's key): a new version, the same ETag.
    await key("eval", "development");
    const after = await h.request("GET", "/v1/definitions", { headers: { ...k.headers, "if-none-match": etag } });
    expect(after.status).toBe(304);
    await state("a", "production", true);
    const changed = await h.request("GET", "/v1/definitions", { headers: { ...k.headers, "if-none-match": etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(etag);
    expect((await changed.json()).flags[0].state.enabled).toBe(true);
    void admin;
  });
});

describe("definitions stream: GET /v1/definitions/stream", () => {
  const stream = (headers: Record<string, string>, lastEventId?: string) =>
    h.request("GET", "/v1/definitions/stream", { headers: lastEventId === undefined ? headers : { ...headers, "last-event-id": lastEventId } });
  const data = (e: SseEvent | "end") => {
    if (e === "end") throw new Error("the stream ended");
    return { event: e.event, id: e.id, data: JSON.parse(e.data!) };
  };

  test("a put, then one patch per commit touching the environment: created, updated, state, deleted", async () => {
    const { key } = await setup();
    const k = await key("full");
    await flag("a");
    const r = await open(await stream(k.headers));
    const put = data(await r.next());
    expect(put).toEqual({ event: "put", id: String(await lastPosition(h.ctx)), data: await json(await h.request("GET", "/v1/definitions", { headers: k.headers }), 200) });
    const patch = async () => {
      const p = data(await r.next());
      expect(p.id).toBe(String(await lastPosition(h.ctx)));
      expect(p.data.version).toBe((await lastPosition(h.ctx)));
      return p.data;
    };
    await flag("b");
    expect(await patch()).toEqual({ version: await lastPosition(h.ctx), flags: [{ key: "b", variants: [], rules: [], state: { enabled: false, rolloutPercentage: null } }], deleted: [] });
    await h.services.flags.updateFlag(SYSTEM, "default", "b", { variants: [{ key: "on" }, { key: "off" }] });
    expect((await patch()).flags[0].variants).toEqual([{ key: "on" }, { key: "off" }]);
    await state("b", "production", true, 10);
    expect((await patch()).flags).toEqual([{ key: "b", variants: [{ key: "on" }, { key: "off" }], rules: [], state: { enabled: true, rolloutPercentage: 10 } }]);
    await state("b", "staging", true); // another environment's state: nothing
    await h.services.flags.deleteFlag(SYSTEM, "default", "a");
    expect(await patch()).toEqual({ version: await lastPosition(h.ctx), flags: [], deleted: ["a"] });
    await nothingPending(r);
    await r.cancel();
  });

  test("prerequisites: a record carries them when set; a change of the prerequisite is patched as that flag alone", async () => {
    const { key } = await setup();
    const k = await key("full");
    await flag("base");
    const r = await open(await stream(k.headers));
    expect(data(await r.next()).event).toBe("put");
    await h.services.flags.createFlag(SYSTEM, "default", { key: "dep", name: "dep", prerequisites: [{ flagKey: "base" }] });
    expect(data(await r.next()).data.flags).toEqual([
      { key: "dep", variants: [], rules: [], prerequisites: [{ flagKey: "base" }], state: { enabled: false, rolloutPercentage: null } },
    ]);
    await state("base", "production", true);
    expect(data(await r.next()).data.flags).toEqual([{ key: "base", variants: [], rules: [], state: { enabled: true, rolloutPercentage: null } }]);
    await h.services.flags.updateFlag(SYSTEM, "default", "dep", { prerequisites: null });
    expect(data(await r.next()).data.flags).toEqual([{ key: "dep", variants: [], rules: [], state: { enabled: false, rolloutPercentage: null } }]);
    await nothingPending(r);
    await r.cancel();
  });

  test("resume: nothing when nothing touched the environment, one patch of what did, a put past a gap or ahead of the log", async () => {
    const { key } = await setup();
    const k = await key("mgmt");
    for (const key of ["a", "b", "c"]) await flag(key);
    const first = await open(await stream(k.headers));
    const version = data(await first.next()).id!;
    await first.cancel();
    // Nothing for this environment since: heartbeats only.
    await state("a", "staging", true);
    const quiet = await open(await stream(k.headers, version));
    await nothingPending(quiet);
    await quiet.cancel();
    // Changes: one patch with the current records of what was touched, and what was deleted.
    await h.services.flags.updateFlag(SYSTEM, "default", "a", { rules: [{ name: "x", conditions: [] }] });
    await state("b", "production", true);
    await h.services.flags.deleteFlag(SYSTEM, "default", "c");
    await flag("d");
    await state("a", "development", true);
    const last = (await lastPosition(h.ctx)) - 1;
    const resumed = await open(await stream(k.headers, version));
    const patch = data(await resumed.next());
    const current = (await json(await h.request("GET", "/v1/definitions", { headers: k.headers }), 200)).flags;
    expect(patch).toEqual({ event: "patch", id: String(last), data: { version: last, flags: current, deleted: ["c"] } });
    await nothingPending(resumed);
    await resumed.cancel();
    // Ahead of the log (a restored backup): a put.
    const ahead = await open(await stream(k.headers, String((await lastPosition(h.ctx)) + 10)));
    expect(data(await ahead.next()).event).toBe("put");
    await ahead.cancel();
    // Junk: a fresh start.
    const junk = await open(await stream(k.headers, "abc"));
    expect(data(await junk.next()).event).toBe("put");
    await junk.cancel();
  });

  test("resume past entries removed by retention: a put", async () => {
    const { key } = await setup();
    const k = await key("mgmt");
    await flag("a");
    const r = await open(await stream(k.headers));
    const version = data(await r.next()).id!;
    await r.cancel();
    await state("a", "production", true); // at T0
    h.clock.advance(400 * 86_400_000);
    await flag("b");
    expect(await pruneAuditLog(h.ctx.stores.audit, h.clock.now(), 365)).toBeGreaterThan(0);
    const resumed = await open(await stream(k.headers, version));
    const put = data(await resumed.next());
    expect(put.event).toBe("put");
    expect(put.data.flags.map((f: { key: string; state: { enabled: boolean } }) => [f.key, f.state.enabled])).toEqual([
      ["a", true],
      ["b", false],
    ]);
    await resumed.cancel();
  });

  for (const slow of [false, true]) {
  test(`a resume under concurrent writes loses nothing and repeats nothing: the client ends equal to GET /v1/definitions${slow ? " (reads answered late, as over a network)" : ""}`, async () => {
    const { key } = await setup();
    if (slow) lateAnswers(h.ctx.stores.definitions, ["environment", "resume", "records"]);
    const k = await key("full");
    const keys = Array.from({ length: 12 }, (_, i) => `flag-${i}`);
    for (const key of keys.slice(0, 6)) await flag(key);
    const model = new DefinitionsModel();
    let r = await open(await stream(k.headers));
    model.apply((await r.nextEvent()) as SseEvent);
    // Writers: creates, state flips, rule edits and deletes in both environments, as fast as they go.
    let writes = 0;
    const writer = async (w: number) => {
      for (let i = 0; i < 60; i++) {
        const key = keys[(i * 7 + w * 5) % keys.length]!;
        const op = (i + w) % 5;
        try {
          if (op === 0) await flag(key);
          else if (op === 1) await state(key, i % 2 ? "production" : "staging", i % 3 !== 0, i % 4 ? null : 50);
          else if (op === 2) await h.services.flags.updateFlag(SYSTEM, "default", key, { rules: [{ name: `r${i}`, conditions: [] }] });
          else if (op === 3) await h.services.flags.deleteFlag(SYSTEM, "default", key);
          else await state(key, "production", i % 2 === 0);
          writes++;
        } catch {} // a taken key or a missing flag: refused, nothing written
        await Bun.sleep(i % 2); // spread over a few hundred milliseconds
      }
    };
    const writing = Promise.all([0, 1, 2, 3].map(writer));
    // The client reads a few events, hangs up and resumes after its last id, again and again,
    // while the writes go on (and after they ended).
    for (let resume = 0; resume < 10; resume++) {
      for (let n = 0; n < 3; n++) {
        const e = await Promise.race([r.nextEvent(), Bun.sleep(100).then(() => null)]);
        if (e === "end") throw new Error("ended");
        if (e === null) break;
        model.apply(e);
      }
      await r.cancel();
      r = await open(await stream(k.headers, model.lastId!));
    }
    await writing;
    expect(writes).toBeGreaterThan(100);
    const final = await json(await h.request("GET", "/v1/definitions", { headers: k.headers }), 200);
    const lastTouch = h.ctx.streams.lastChange((await principalOf(k.secret)).environmentId).position;
    while (Number(model.lastId) < lastTouch) {
      const e = await r.nextEvent();
      if (e === "end") throw new Error("ended");
      model.apply(e);
    }
    expect(model.list()).toEqual(final.flags);
    expect(model.puts).toBe(1); // every resume was a patch (or nothing)
    await nothingPending(r);
    await r.cancel();
  });
  }

  test("its key deleted or rotated out, its environment deleted: the stream ends; server shutdown ends every stream", async () => {
    const { admin, key } = await setup();
    const a = await key("mgmt");
    const b = await key("test");
    const c = await key("full", "staging");
    const ra = await open(await stream(a.headers));
    const rb = await open(await stream(b.headers));
    const rc = await open(await stream(c.headers));
    for (const r of [ra, rb, rc]) expect(data(await r.next()).event).toBe("put");
    await h.request("DELETE", `/v1/api-keys/${a.id}`, { headers: admin });
    await ra.end();
    await json(await h.request("POST", `/v1/api-keys/${b.id}/rotate`, { headers: admin }), 200);
    await rb.end();
    const rotated = await json(await h.request("POST", `/v1/api-keys/${c.id}/rotate`, { headers: admin, body: { gracePeriodSeconds: 30 } }), 200);
    const rc2 = await open(await stream(bearer(rotated.key)));
    await nothingPending(rc);
    h.clock.advance(30_000);
    h.ctx.streams.heartbeat();
    await rc.end();
    expect(data(await rc2.next()).event).toBe("put");
    h.ctx.streams.close();
    await rc2.end();
    // A stream asked for after the close ends at once.
    const late = await stream(bearer(rotated.key));
    await open(late).then((r) => r.end());
  });
});
