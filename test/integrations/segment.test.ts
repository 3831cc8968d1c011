/**
 * The segment connector against a local receiver that plays Segment's HTTP Tracking API batch
 * endpoint (https://segment.com/docs/connections/sources/catalog/libraries/server/http-api/): it
 * checks the path, Basic auth with the write key, the 500 KB / 32 KB / 2500-message limits (400),
 * each message's type and ids, dedupes on messageId, answers 200 for everything else (an unknown
 * write key or a message without an id is dropped silently, as Segment does), 401 when the source
 * enforces OAuth, 429 with Retry-After and X-RateLimit-Reset, and 5xx.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { SEGMENT_HOSTS, segment, type SegmentConfig } from "../../src/modules/integrations/connectors/segment";
import type { VendorRequest } from "../../src/modules/integrations/connectors/types";
import { VERSION } from "../../src/version";
import { type Received, startReceiver } from "../webhook-receiver";
import { basicCredentials, checkConfigSchema, checkDedupedResend, checkRetriedThenTaken, checkSwitches, deliver as deliverTo, flagChange, json, NOW, records, send } from "./vendor";

const WRITE_KEY = "seg-write-key-0123456789abcdef0";
const TYPES = new Set(["identify", "track", "page", "screen", "group", "alias"]);

type Mode = "ok" | "store-then-500" | "502" | "429" | "429-reset" | "oauth";

/** Segment's /v1/batch as its document describes it. */
function fakeSegment() {
  const stored = new Map<string, any>();
  let dropped = 0;
  const modes: Mode[] = [];
  const receiver = startReceiver({ answer: (_request, n) => answer(receiver.received[n - 1]!) });

  function answer(r: Received): Response {
    const mode = modes.shift() ?? "ok";
    if (mode === "502") return new Response("Bad Gateway", { status: 502 });
    if (mode === "429") return json(429, { success: false, message: "rate limited" }, { "retry-after": "7", "x-ratelimit-reset": "7" });
    if (mode === "429-reset") return json(429, { success: false, message: "rate limited" }, { "x-ratelimit-reset": "4" });
    if (mode === "oauth" && !r.headers.get("authorization")?.startsWith("Bearer ")) return json(401, { success: false, message: "Unauthorized" });
    if (r.method !== "POST" || r.path !== "/v1/batch") return new Response("Not Found", { status: 404 });
    if (!r.headers.get("content-type")?.startsWith("application/json") || r.json === null || !Array.isArray(r.json.batch)) return json(400, { success: false, message: "Invalid JSON" });
    if (r.bytes.length > 500 * 1024) return json(400, { success: false, message: "Batch size exceeded" });
    const batch: any[] = r.json.batch;
    if (batch.some((m) => Buffer.byteLength(JSON.stringify(m)) > 32 * 1024)) return json(400, { success: false, message: "Message size exceeded" });
    const auth = basicCredentials(r.headers.get("authorization"));
    const key = auth?.user ?? r.json.writeKey;
    if (typeof key !== "string" || key === "") return json(400, { success: false, message: "Missing write key" });
    // Stateless edge: 200 whatever the key; an unknown key's messages never reach the source.
    if (key !== WRITE_KEY || batch.length > 2500) {
      dropped += batch.length;
      return json(200, { success: true });
    }
    for (const m of batch) {
      const hasId = (typeof m.userId === "string" && m.userId !== "") || (typeof m.anonymousId === "string" && m.anonymousId !== "");
      const ok = TYPES.has(m.type) && hasId && (m.type !== "track" || (typeof m.event === "string" && m.event !== "")) && typeof m.messageId === "string" && m.messageId.length < 100;
      if (!ok) dropped++;
      else stored.set(m.messageId, { ...m, context: { ...r.json.context, ...m.context } });
    }
    if (mode === "store-then-500") return new Response("Internal Server Error", { status: 500 });
    return json(200, { success: true });
  }

  return { receiver, stored, dropped: () => dropped, next: (...m: Mode[]) => modes.push(...m), host: `http://127.0.0.1:${receiver.port}` };
}

const vendor = fakeSegment();
afterAll(() => vendor.receiver.stop());
const config = (over: Partial<SegmentConfig> = {}): SegmentConfig => ({
  writeKey: WRITE_KEY,
  region: "us",
  apiHost: vendor.host,
  trackEvaluations: true,
  identifyTraits: true,
  trackChanges: true,
  sampleRate: 1,
  ...over,
});

const deliver = (requests: VendorRequest[]) => deliverTo(segment, requests);

const messages = () => [...vendor.stored.values()];

describe("segment connector", () => {
  test("its config schema is valid JSON Schema, the write key is secret, the defaults validate", () => {
    const filled = checkConfigSchema(segment, { writeKey: WRITE_KEY }, ["writeKey"]);
    expect(filled).toEqual({ writeKey: WRITE_KEY, region: "us", trackEvaluations: true, identifyTraits: true, trackChanges: true, sampleRate: 1 });
    expect(segment.category).toBe("cdp");
  });

  test("evaluations arrive as Experiment Viewed tracks plus one Identify per user with the variant traits", async () => {
    vendor.stored.clear();
    const input = [
      ...records(2),
      ...records(1, { userId: null }),
      // user-0 again, later, another flag and the first flag's newer variant.
      ...records(1, { userId: "user-0", flagKey: "dark-mode", variant: null, evaluatedAt: "2026-11-22T10:00:01.000Z" }),
      ...records(1, { userId: "user-0", variant: "control", evaluatedAt: "2026-11-22T10:00:02.000Z" }),
    ];
    const requests = segment.evaluations!(input, config(), NOW);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.events).toBe(2 + 4); // identifies for user-0 and user-1, four tracks (the anonymous one left out)
    expect(await deliver(requests)).toEqual([{ kind: "sent", accepted: 6, rejected: 0, error: null }]);
    const got = vendor.receiver.received.at(-1)!;
    expect(got.method).toBe("POST");
    expect(got.path).toBe("/v1/batch");
    expect(basicCredentials(got.headers.get("authorization"))).toEqual({ user: WRITE_KEY, password: "" });
    expect(got.json.context).toEqual({ library: { name: "flagsvc", version: VERSION } });
    const tracks = messages().filter((m) => m.type === "track");
    expect(tracks).toHaveLength(4);
    expect(tracks[0]).toEqual({
      type: "track",
      messageId: expect.stringMatching(/^[0-9a-f]{64}$/),
      userId: "user-0",
      event: "Experiment Viewed",
      timestamp: input[0]!.evaluatedAt,
      properties: {
        experiment_id: "checkout-v2",
        experiment_name: "checkout-v2",
        variation_id: "treatment",
        variation_name: "treatment",
        flag_key: "checkout-v2",
        variant: "treatment",
        enabled: true,
        reason: "rule_match",
        rule_id: "rule_1",
        environment: "production",
      },
      context: { library: { name: "flagsvc", version: VERSION } },
    });
    const identify = messages().find((m) => m.type === "identify" && m.userId === "user-0");
    expect(identify).toMatchObject({
      timestamp: "2026-11-22T10:00:02.000Z",
      traits: { "flagsvc_production_checkout-v2": "control", "flagsvc_production_dark-mode": "on" },
    });
    expect(messages().find((m) => m.type === "identify" && m.userId === "user-1")!.traits).toEqual({ "flagsvc_production_checkout-v2": "control" });
    expect(vendor.dropped()).toBe(0);
  });

  test("batches stay under Segment's 500 KB (and 2,500 messages): 2,001 records, every message stored once", async () => {
    vendor.stored.clear();
    const input = records(2001);
    const requests = segment.evaluations!(input, config(), NOW);
    expect(requests.length).toBeGreaterThan(1);
    for (const r of requests) {
      expect(Buffer.byteLength(r.body)).toBeLessThanOrEqual(500 * 1024);
      expect(r.events).toBeLessThanOrEqual(2500);
    }
    expect(requests.reduce((n, r) => n + r.events, 0)).toBe(4002);
    expect(segment.evaluations!(input, config(), NOW)).toEqual(requests);
    const outcomes = await deliver(requests);
    expect(outcomes.every((o) => o.kind === "sent")).toBe(true);
    expect(outcomes.reduce((n, o) => n + (o.kind === "sent" ? o.accepted : 0), 0)).toBe(4002);
    expect(vendor.stored.size).toBe(4002);
    // Without the traits: only the tracks.
    expect(segment.evaluations!(input, config({ identifyTraits: false }), NOW).reduce((n, r) => n + r.events, 0)).toBe(2001);
  });

  test("a user evaluated on many flags at once gets several Identifies, each under Segment's 32 KB a message", async () => {
    vendor.stored.clear();
    const input = Array.from({ length: 1500 }, (_, i) => records(1, { flagKey: `flag-number-${String(i).padStart(4, "0")}`, evaluatedAt: new Date(Date.parse("2026-11-22T10:00:00.000Z") + i).toISOString() })[0]!);
    const requests = segment.evaluations!(input, config(), NOW);
    const outcomes = await deliver(requests);
    expect(outcomes.every((o) => o.kind === "sent")).toBe(true);
    const identifies = messages().filter((m) => m.type === "identify");
    expect(identifies.length).toBeGreaterThan(1);
    for (const m of identifies) expect(Buffer.byteLength(JSON.stringify(m))).toBeLessThan(32 * 1024);
    expect(Object.assign({}, ...identifies.map((m) => m.traits))).toEqual(Object.fromEntries(input.map((r) => [`flagsvc_production_${r.flagKey}`, r.variant])));
  });

  test("a 400 (the whole batch refused: too large, invalid JSON) is failed, not retried", async () => {
    const [request] = segment.evaluations!(records(1), config(), NOW);
    const broken = { ...request!, body: request!.body.slice(0, -5) };
    const outcome = segment.outcome(broken, await send(broken));
    expect(outcome).toEqual({ kind: "failed", error: "Segment answered HTTP 400: Invalid JSON" });
  });

  test("a wrong write key: Segment answers 200 and drops the batch (undetectable); with OAuth enforced, 401 is failed as bad credentials", async () => {
    vendor.stored.clear();
    const before = vendor.dropped();
    const [request] = segment.evaluations!(records(2), config({ writeKey: "wrong" }), NOW);
    expect(segment.outcome(request!, await send(request!)).kind).toBe("sent");
    expect(vendor.stored.size).toBe(0);
    expect(vendor.dropped() - before).toBe(4);
    vendor.next("oauth");
    const outcome = segment.outcome(request!, await send(request!));
    expect(outcome.kind).toBe("failed");
    expect(outcome.kind === "failed" && outcome.error).toStartWith("bad credentials: Segment answered HTTP 401: Unauthorized");
  });

  test("429 is retried after Retry-After, or X-RateLimit-Reset; the resend is counted once", async () => {
    await checkRetriedThenTaken(segment, segment.evaluations!(records(3), config(), NOW)[0]!, vendor, ["429", "429-reset"], [7000, 4000]);
  });

  test("5xx is retried; a resend after a 500 that had stored the batch is deduped by messageId", async () => {
    await checkDedupedResend(segment, () => segment.evaluations!(records(4), config(), NOW)[0]!, vendor, ["store-then-500", "502"]);
    expect(vendor.stored.size).toBe(8);
  });

  test("flag changes arrive as Feature Flag <Action> tracks attributed to their actor", async () => {
    vendor.stored.clear();
    const changes = [flagChange(), flagChange({ id: "evt_2", event: "flag.deleted", actor: { type: "cli", id: "cli:bob", label: "bob" } })];
    expect(await deliver(segment.changes!(changes, config()))).toEqual([{ kind: "sent", accepted: 2, rejected: 0, error: null }]);
    const [enabled, deleted] = messages();
    expect(enabled).toMatchObject({
      type: "track",
      userId: "flagsvc:usr_1",
      event: "Feature Flag Enabled",
      timestamp: flagChange().timestamp,
      properties: { change: "enabled", flag_key: "checkout-v2", project: "shop", environment: "production", enabled_before: false, enabled_after: true, actor_label: "alice@example.com", event_id: "evt_01JD5Q2M7W3K9X" },
    });
    expect(deleted).toMatchObject({ event: "Feature Flag Deleted", userId: "flagsvc:cli:bob", properties: { actor_type: "cli" } });
    await deliver(segment.changes!(changes, config()));
    expect(vendor.stored.size).toBe(2);
  });

  test("trackEvaluations, trackChanges, sampleRate and region shape what is sent", () => {
    checkSwitches(segment, config(), `${SEGMENT_HOSTS.eu}/v1/batch`, "https://api.segment.io/v1/batch");
  });
});
