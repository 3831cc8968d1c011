/**
 * The integrations' sender (src/modules/integrations/sender.ts) end to end in process: an
 * integration of each type created through the API, pointed (apiHost) at a local receiver that
 * plays that vendor's endpoints and answers as the vendor does; real evaluations and flag
 * changes through the API; what arrives, what `stats` say; retries after 5xx and 429
 * (Retry-After) without duplicates past the vendor's ids; a 401 pauses instead of hammering;
 * a partial failure is not resent whole; disable and delete stop at once; a new context over
 * the same database sends the changes the old one did not get through (at least once). Each
 * type meets a 5xx then a 429 (the same request again, after the backoff and Retry-After) and a
 * 401 (a pause, one request; a new credential resumes it).
 * The wire format of each vendor is checked in detail by the connector tests beside this one.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { hashId } from "../../src/modules/integrations/connectors/events";
import { createContext } from "../../src/server";
import { bearer, integrationsApp, json, seedAdminKey, testApp, type TestApp, until } from "../helpers";
import { startReceiver, type Received } from "../webhook-receiver";

interface Refusal {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}
type Mode = { kind: "ok" } | ({ kind: "status"; times: number } & Refusal) | { kind: "script"; answers: Refusal[] } | { kind: "hold"; ms: number };
let mode: Mode = { kind: "ok" };

/** What a vendor answers when it takes a request, by path. */
function accepted(r: Received): Response {
  if (r.path === "/import") return Response.json({ code: 200, num_records_imported: r.json.length, status: "OK" });
  if (r.path === "/2/httpapi") return Response.json({ code: 200, events_ingested: r.json.events.length, payload_size_bytes: r.bytes.length, server_upload_time: Date.now() });
  if (r.path === "/v1/batch") return Response.json({ success: true });
  if (r.path === "/users/track") return Response.json({ message: "success", attributes_processed: r.json.attributes.length }, { status: 201 });
  if (r.path.startsWith("/api/v2/")) return Response.json({ errors: [] }, { status: 202 });
  return new Response("ok");
}

const rx = startReceiver({
  answer: async (_request, n) => {
    const r = rx.received[n - 1]!;
    if (mode.kind === "hold") await Bun.sleep(mode.ms);
    const refusal = mode.kind === "status" && mode.times-- > 0 ? mode : mode.kind === "script" ? mode.answers.shift() : undefined;
    if (refusal) return new Response(typeof refusal.body === "string" ? refusal.body : JSON.stringify(refusal.body ?? { error: "vendor says no" }), { status: refusal.status, headers: refusal.headers });
    return accepted(r);
  },
});
const HOST = () => `http://127.0.0.1:${rx.port}`;
afterAll(() => rx.stop());

interface Vendor {
  type: string;
  config: () => Record<string, unknown>;
  /** A config key whose new value a PATCH sends (a new credential). */
  credential: [string, string];
  /** Evaluation ids (the vendor's dedupe key) of one taken request, or counts for Datadog. */
  evaluations(r: Received): string[];
  /** Each change event of one taken request as the actor label and flag key it names. */
  changes(r: Received): { actor: string; flag: string }[];
  /** Events of one taken request as `stats.sent` counts them, when not its evaluations and changes (Segment: Identify calls too). */
  taken?(r: Received): number;
}

const VENDORS: Vendor[] = [
  {
    type: "mixpanel",
    config: () => ({ projectToken: "mp-token", apiHost: HOST() }),
    credential: ["projectToken", "mp-token-2"] as [string, string],
    evaluations: (r) => (r.path === "/import" ? r.json.filter((e: any) => e.event === "$experiment_started").map((e: any) => e.properties.$insert_id) : []),
    changes: (r) => (r.path === "/import" ? r.json.filter((e: any) => e.event !== "$experiment_started").map((e: any) => ({ actor: e.properties.actor_label, flag: e.properties.flag_key })) : []),
  },
  {
    type: "amplitude",
    config: () => ({ apiKey: "amp-key", apiHost: HOST() }),
    credential: ["apiKey", "amp-key-2"] as [string, string],
    evaluations: (r) => (r.path === "/2/httpapi" ? r.json.events.filter((e: any) => e.event_type === "$exposure").map((e: any) => e.insert_id) : []),
    changes: (r) => (r.path === "/2/httpapi" ? r.json.events.filter((e: any) => e.event_type !== "$exposure").map((e: any) => ({ actor: e.event_properties.actor_label, flag: e.event_properties.flag_key })) : []),
  },
  {
    type: "segment",
    config: () => ({ writeKey: "seg-key", apiHost: HOST() }),
    credential: ["writeKey", "seg-key-2"] as [string, string],
    evaluations: (r) => (r.path === "/v1/batch" ? r.json.batch.filter((m: any) => m.event === "Experiment Viewed").map((m: any) => m.messageId) : []),
    changes: (r) => (r.path === "/v1/batch" ? r.json.batch.filter((m: any) => m.type === "track" && m.event !== "Experiment Viewed").map((m: any) => ({ actor: m.properties.actor_label, flag: m.properties.flag_key })) : []),
    taken: (r) => (r.path === "/v1/batch" ? r.json.batch.length : 0),
  },
  {
    type: "braze",
    config: () => ({ apiKey: "braze-key", apiHost: HOST() }),
    credential: ["apiKey", "braze-key-2"] as [string, string],
    evaluations: (r) => (r.path === "/users/track" ? r.json.attributes.map((a: any) => a.external_id) : []),
    changes: () => [],
  },
  {
    type: "datadog",
    config: () => ({ apiKey: "dd-key", apiHost: HOST() }),
    credential: ["apiKey", "dd-key-2"] as [string, string],
    evaluations: (r) => (r.path === "/api/v2/series" ? r.json.series.flatMap((s: any) => s.points.flatMap((p: any) => Array.from({ length: p.value }, () => `${s.tags.join()}@${p.timestamp}`))) : []),
    changes: (r) => (r.path === "/api/v2/events" ? [{ actor: r.json.data.attributes.attributes.author.name, flag: r.json.data.attributes.attributes.changed_resource.name }] : []),
  },
  {
    type: "slack",
    config: () => ({ webhookUrl: `${HOST()}/services/T0001/B0001/xyz` }),
    credential: ["webhookUrl", `${HOST()}/services/T0001/B0001/new`] as [string, string],
    evaluations: () => [],
    // "admin key “release-bot” turned on flag *flag-1* in *production* (project default): off → on"
    changes: (r) => (r.path.startsWith("/services/") ? [{ actor: /“([^”]+)”/.exec(r.json.text)?.[1] ?? "", flag: /flag \*([^*]+)\*/.exec(r.json.text)?.[1] ?? "" }] : []),
  },
];

let h: TestApp;
let admin: Record<string, string>;
let sdk: Record<string, string>;
let flagNo = 0;

beforeAll(async () => {
  ({ h, admin, sdk } = await integrationsApp("release-bot"));
});
afterAll(() => h.close());
beforeEach(() => {
  mode = { kind: "ok" };
  rx.received.length = 0;
});
// Whatever a test left (it failed before its DELETE) must not send into the next one.
afterEach(async () => {
  const { integrations } = await json(await h.request("GET", "/v1/projects/default/integrations", { headers: admin }), 200);
  for (const i of integrations) await h.request("DELETE", `/v1/projects/default/integrations/${i.id}`, { headers: admin });
});

async function createIntegration(type: string, config: Record<string, unknown>, project = "default"): Promise<string> {
  const body = await json(await h.request("POST", `/v1/projects/${project}/integrations`, { headers: admin, body: { type, config } }), 201);
  return body.id as string;
}
const record = async (id: string) => json(await h.request("GET", `/v1/projects/default/integrations/${id}`, { headers: admin }), 200);
const remove = async (id: string) => expect((await h.request("DELETE", `/v1/projects/default/integrations/${id}`, { headers: admin })).status).toBe(204);

async function newFlag(): Promise<string> {
  const key = `flag-${++flagNo}`;
  await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key, name: key } }), 201);
  return key;
}
async function toggle(flag: string, enabled: boolean): Promise<void> {
  await json(await h.request("PUT", `/v1/projects/default/flags/${flag}/states/production`, { headers: admin, body: { enabled } }), 200);
}
async function evaluate(flag: string, users: number, prefix = "user"): Promise<void> {
  for (let i = 0; i < users; i++) await json(await h.request("POST", "/v1/evaluate", { headers: sdk, body: { flagKey: flag, context: { userId: `${prefix}-${i}` } } }), 200);
}
function all(v: Vendor, pick: "evaluations"): string[];
function all(v: Vendor, pick: "changes"): { actor: string; flag: string }[];
function all(v: Vendor, pick: "evaluations" | "changes"): unknown[] {
  return rx.received.flatMap((r) => v[pick](r) as unknown[]);
}

describe.each(VENDORS.map((v) => [v.type, v] as const))("%s", (_type, vendor) => {
  test("evaluations arrive batched, changes with their actor; stats count the events the vendor took", async () => {
    const flag = await newFlag();
    const id = await createIntegration(vendor.type, vendor.config());
    await toggle(flag, true);
    await evaluate(flag, 40);
    if (vendor.type !== "braze") await until(`${vendor.type}: the change`, () => all(vendor, "changes").find((c) => c.flag === flag));
    if (vendor.type !== "slack") await until(`${vendor.type}: 40 evaluations`, () => all(vendor, "evaluations").length >= 40);
    await Bun.sleep(300);
    const evaluations = all(vendor, "evaluations");
    const changes = all(vendor, "changes").filter((c) => c.flag === flag);
    if (vendor.type === "slack") expect(evaluations).toEqual([]);
    else {
      expect(evaluations.length).toBe(40);
      if (vendor.type !== "datadog") expect(new Set(evaluations).size).toBe(40);
      // Batched: far fewer requests than evaluations.
      expect(rx.received.filter((r) => vendor.evaluations(r).length > 0).length).toBeLessThan(5);
    }
    if (vendor.type === "braze") expect(changes).toEqual([]);
    else expect(changes).toEqual([{ actor: "release-bot", flag }]);
    const taken = vendor.taken ? rx.received.reduce((n, r) => n + vendor.taken!(r), 0) : evaluations.length + changes.length;
    const { stats } = await until("stats stored", async () => {
      const r = await record(id);
      return r.stats.sent === taken && r;
    });
    expect(stats).toEqual({ sent: taken, failed: 0, lastError: null, lastSentAt: expect.any(String) });
    await remove(id);
  }, 15_000);
});

/** Something for the type to send: a change, or (Braze, which takes no changes) evaluations. */
async function trigger(vendor: Vendor, flag: string, round: number): Promise<void> {
  if (vendor.type === "braze") await evaluate(flag, 3, `t${round}`);
  else await toggle(flag, round % 2 === 0);
}

describe.each(VENDORS.map((v) => [v.type, v] as const))("%s answers", (_type, vendor) => {
  test("5xx, then 429 with Retry-After: the same request again each time (the vendor's ids dedupe it), after the backoff and the wait; counted once", async () => {
    const flag = await newFlag();
    const id = await createIntegration(vendor.type, vendor.config());
    mode = { kind: "script", answers: [{ status: 503 }, { status: 429, headers: { "retry-after": "1" } }] };
    await trigger(vendor, flag, 0);
    await until("three attempts", () => rx.received.length >= 3, 10_000);
    await Bun.sleep(300);
    const [a, b, c] = rx.received;
    expect(rx.received.length).toBe(3);
    expect([b!.path, b!.text]).toEqual([a!.path, a!.text]);
    expect([c!.path, c!.text]).toEqual([a!.path, a!.text]);
    expect(b!.at - a!.at).toBeGreaterThanOrEqual(450); // backoff 1 s, jitter down to half
    expect(c!.at - b!.at).toBeGreaterThanOrEqual(950); // Retry-After: 1
    const events = vendor.taken?.(c!) ?? vendor.evaluations(c!).length + vendor.changes(c!).length;
    const r = await until("stats", async () => ((got) => got.stats.sent > 0 && got)(await record(id)));
    expect(r.stats).toMatchObject({ sent: events, failed: 0, lastError: expect.stringContaining("429") });
  }, 15_000);

  test("401: lastError says bad credentials and the integration pauses (one request while more comes); a new credential resumes it", async () => {
    const flag = await newFlag();
    const id = await createIntegration(vendor.type, vendor.config());
    mode = { kind: "status", status: 401, times: 1_000, body: { error: "invalid key" } };
    for (let round = 0; round < 3; round++) {
      await trigger(vendor, flag, round);
      await Bun.sleep(1100);
    }
    expect(rx.received.length).toBe(1);
    expect((await record(id)).stats).toMatchObject({ sent: 0, lastError: expect.stringMatching(/^bad credentials: /) });
    mode = { kind: "ok" };
    const [key, value] = vendor.credential;
    const patched = await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { config: { [key]: value } } }), 200);
    expect(patched.stats.lastError).toBeNull();
    await trigger(vendor, flag, 3);
    await until("sent again", async () => (await record(id)).stats.sent > 0);
    // Stored cleared too, not only in the PATCH's answer.
    expect((await record(id)).stats.lastError).toBeNull();
  }, 15_000);
});

describe("failures", () => {
  const mixpanel = VENDORS[0]!;
  const amplitude = VENDORS[1]!;

  test("401 while evaluations keep coming: one request, the evaluations given up are counted in failed; a new key resumes at once", async () => {
    const flag = await newFlag();
    const id = await createIntegration("mixpanel", mixpanel.config());
    mode = { kind: "status", status: 401, times: 1_000, body: { error: "Invalid project token", status: 0 } };
    for (let round = 0; round < 4; round++) {
      await evaluate(flag, 10, `r${round}`);
      await Bun.sleep(1100);
    }
    expect(rx.received.length).toBe(1);
    const paused = await record(id);
    expect(paused.stats.lastError).toMatch(/bad credentials/);
    expect(paused.stats.sent).toBe(0);
    expect(paused.stats.failed).toBeGreaterThanOrEqual(10);
    mode = { kind: "ok" };
    const patched = await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { config: { projectToken: "mp-token-2" } } }), 200);
    expect(patched.stats.lastError).toBeNull();
    await toggle(flag, true);
    await until("sent again", () => all(mixpanel, "changes").some((c) => c.flag === flag));
    await remove(id);
  }, 15_000);

  test("a partial failure: the refused events are counted, the others not resent whole (Amplitude's remainder)", async () => {
    const flag = await newFlag();
    const id = await createIntegration("amplitude", amplitude.config());
    // Amplitude's 400 naming bad events: it stored none; the sender resends the rest, once.
    let first = true;
    const original = rx.answer;
    rx.answer = (_req, n) => {
      const r = rx.received[n - 1]!;
      if (first && r.path === "/2/httpapi") {
        first = false;
        return Response.json({ code: 400, error: "Request missing required field", events_with_invalid_fields: { time: [0, 1] } }, { status: 400 });
      }
      return accepted(r);
    };
    try {
      await evaluate(flag, 10);
      const r = await until("stats", async () => {
        const got = await record(id);
        return got.stats.sent + got.stats.failed === 10 && got;
      });
      expect(r.stats).toMatchObject({ sent: 8, failed: 2 });
      expect(rx.received.length).toBe(2);
      expect(rx.received[1]!.json.events.length).toBe(8);
    } finally {
      rx.answer = original;
      await remove(id);
    }
  }, 15_000);
});

describe("the evaluation path", () => {
  test("a project's records are read only while an enabled integration takes evaluations (else evaluation does one map lookup)", async () => {
    const project = (h.sqlite.query("SELECT id FROM projects WHERE slug = 'default'").get() as { id: string }).id;
    expect(h.ctx.records.wants(project)).toBe(false);
    const slack = await createIntegration("slack", VENDORS[5]!.config());
    expect(h.ctx.records.wants(project)).toBe(false);
    const id = await createIntegration("mixpanel", { ...VENDORS[0]!.config(), trackEvaluations: false });
    expect(h.ctx.records.wants(project)).toBe(false);
    await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { config: { trackEvaluations: true } } }), 200);
    expect(h.ctx.records.wants(project)).toBe(true);
    await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { enabled: false } }), 200);
    expect(h.ctx.records.wants(project)).toBe(false);
    await remove(id);
    await remove(slack);
  });
});

describe("stopping", () => {
  test("disable aborts the request in flight and sends nothing more; enabled again, only new changes go", async () => {
    const flag = await newFlag();
    const id = await createIntegration("slack", VENDORS[5]!.config());
    mode = { kind: "hold", ms: 3000 };
    await toggle(flag, true);
    await until("the request in flight", () => rx.received.length === 1);
    const t0 = Date.now();
    await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { enabled: false } }), 200);
    await toggle(flag, false);
    await Bun.sleep(1500);
    expect(rx.received.length).toBe(1);
    expect(Date.now() - t0).toBeLessThan(3000);
    mode = { kind: "ok" };
    await json(await h.request("PATCH", `/v1/projects/default/integrations/${id}`, { headers: admin, body: { enabled: true } }), 200);
    await toggle(flag, true);
    await until("the new change", () => rx.received.length === 2);
    await Bun.sleep(1200);
    // The change made while disabled was not sent later.
    expect(rx.received.length).toBe(2);
    expect(rx.received[1]!.json.text).toContain("off → on");
    await remove(id);
    await toggle(flag, false);
    await Bun.sleep(1200);
    expect(rx.received.length).toBe(2);
  }, 15_000);
});

describe.each(VENDORS.filter((v) => v.type !== "braze").map((v) => [v.type, v] as const))("%s stats and position", (_type, vendor) => {
  test("the position is never stored ahead of `sent`: the moment it passes a change, the change the vendor took is counted (a crash then keeps both)", async () => {
    const flag = await newFlag();
    const id = await createIntegration(vendor.type, vendor.config());
    const position = () => (h.sqlite.query("SELECT event_position AS p FROM integrations WHERE id = ?").get(id) as { p: number }).p;
    const before = position();
    await toggle(flag, true);
    // Watched closely: a kill -9 at the first moment the stored position has moved must find the change counted.
    const end = Date.now() + 10_000;
    while (position() === before) {
      if (Date.now() > end) throw new Error("timed out waiting for the position to move");
      await Bun.sleep(1);
    }
    const { stats } = await record(id);
    expect(all(vendor, "changes")).toEqual([{ actor: "release-bot", flag }]);
    expect(stats.sent).toBeGreaterThanOrEqual(vendor.taken ? rx.received.reduce((n, r) => n + vendor.taken!(r), 0) : 1);
    expect(stats.lastSentAt).not.toBeNull();
    await remove(id);
  }, 15_000);
});

/** The id each type gives a change in one taken request (what the vendor dedupes on, or the stable id it carries), by type. */
function changeIds(r: Received): [string, string] | null {
  if (r.path === "/import") return ["mixpanel", r.json[0].properties.$insert_id];
  if (r.path === "/2/httpapi") return ["amplitude", r.json.events[0].insert_id];
  if (r.path === "/v1/batch") return ["segment", r.json.batch[0].messageId];
  if (r.path === "/api/v2/events") return ["datadog", `${r.json.data.attributes.aggregation_key} ${r.json.data.attributes.attributes.change_metadata.flagsvc_event_id}`];
  if (r.path.startsWith("/services/")) return ["slack", r.json.blocks[1].elements[0].text.split(" · ")[2]];
  return null;
}

describe("restart", () => {
  test("a change sent before a close and again by the next context carries the same id for every type, derived from the stored event id", async () => {
    const own = await testApp({ SVC_EDITION: "pro", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
    const ownAdmin = bearer(await seedAdminKey(own.ctx, "release-bot"));
    let again: Awaited<ReturnType<typeof createContext>> | undefined;
    const types = ["mixpanel", "amplitude", "segment", "datadog", "slack"];
    try {
      await json(await own.request("POST", "/v1/projects/default/flags", { headers: ownAdmin, body: { key: "id-flag", name: "I" } }), 201);
      for (const v of VENDORS.filter((v) => types.includes(v.type))) {
        await json(await own.request("POST", "/v1/projects/default/integrations", { headers: ownAdmin, body: { type: v.type, config: v.config() } }), 201);
      }
      // Every vendor takes the request and answers 500: the position stays, as at a crash before it is stored.
      mode = { kind: "status", status: 500, times: 1_000 };
      await json(await own.request("PUT", "/v1/projects/default/flags/id-flag/states/production", { headers: ownAdmin, body: { enabled: true } }), 200);
      const stored = JSON.parse((own.sqlite.query("SELECT payload FROM change_events ORDER BY position DESC LIMIT 1").get() as { payload: string }).payload).id as string;
      expect(stored).toMatch(/^evt_/);
      const ids = () => new Map(rx.received.map(changeIds).filter((x) => x !== null));
      await until("every type tried", () => ids().size === types.length);
      const first = ids();
      own.ctx.close();
      mode = { kind: "ok" };
      rx.received.length = 0;
      again = await createContext(own.ctx.config, { clock: own.clock });
      await until("every type sent again", () => ids().size === types.length);
      expect(ids()).toEqual(first);
      expect(Object.fromEntries(first)).toEqual({
        mixpanel: hashId("change", stored).slice(0, 36),
        amplitude: hashId("change", stored),
        segment: hashId("change", stored),
        datadog: `flagsvc:${stored} ${stored}`,
        slack: stored,
      });
    } finally {
      again?.close();
      rmSync(own.dir, { recursive: true, force: true });
    }
  }, 20_000);


  test("changes the vendor did not take before a close are sent by the next context over the same database, once each", async () => {
    const own = await testApp({ SVC_EDITION: "pro", SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" });
    const ownAdmin = bearer(await seedAdminKey(own.ctx, "release-bot"));
    let again: Awaited<ReturnType<typeof createContext>> | undefined;
    try {
      await json(await own.request("POST", "/v1/projects/default/flags", { headers: ownAdmin, body: { key: "restart-flag", name: "R" } }), 201);
      await json(await own.request("POST", "/v1/projects/default/integrations", { headers: ownAdmin, body: { type: "segment", config: VENDORS[2]!.config() } }), 201);
      mode = { kind: "status", status: 500, times: 1_000 };
      for (const enabled of [true, false]) await json(await own.request("PUT", "/v1/projects/default/flags/restart-flag/states/production", { headers: ownAdmin, body: { enabled } }), 200);
      await until("tried", () => rx.received.length >= 1);
      // Closed, then a second context on the same data dir, as after a restart.
      own.ctx.close();
      mode = { kind: "ok" };
      rx.received.length = 0;
      again = await createContext(own.ctx.config, { clock: own.clock });
      const segment = VENDORS[2]!;
      await until("both changes", () => all(segment, "changes").length >= 2);
      await Bun.sleep(300);
      expect(all(segment, "changes")).toEqual([
        { actor: "release-bot", flag: "restart-flag" },
        { actor: "release-bot", flag: "restart-flag" },
      ]);
      const events = rx.received.flatMap((r) => r.json.batch.filter((m: any) => m.type === "track"));
      expect(events.map((m: any) => m.event)).toEqual(["Feature Flag Enabled", "Feature Flag Disabled"]);
    } finally {
      again?.close();
      rmSync(own.dir, { recursive: true, force: true });
    }
  }, 20_000);
});
