/**
 * The amplitude connector against a local receiver that plays Amplitude's HTTP V2 API
 * (https://amplitude.com/docs/apis/analytics/http-v2): it checks the path, the JSON body with the
 * api_key, the 2000-event and 1 MB limits (413), each event's required fields and id lengths,
 * refuses a whole batch with a 400 naming the bad events (nothing ingested), dedupes on
 * insert_id, and answers "Invalid API key", 429 and 5xx as Amplitude does.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { AMPLITUDE_HOSTS, amplitude, type AmplitudeConfig, THROTTLE_PAUSE_MS } from "../../src/modules/integrations/connectors/amplitude";
import type { VendorRequest } from "../../src/modules/integrations/connectors/types";
import { type Received, startReceiver } from "../webhook-receiver";
import { checkConfigSchema, checkDedupedResend, checkRetriedThenTaken, checkSwitches, deliver as deliverTo, flagChange, json, NOW, records, send } from "./vendor";

const API_KEY = "0123456789abcdef0123456789abcdef";
const INVALID_IDS = new Set(["anonymous", "nil", "none", "null", "n/a", "na", "undefined", "unknown", '""', "00000000-0000-0000-0000-000000000000", "{}", "lmy47d", "0", "-1"]);

type Mode = "ok" | "store-then-500" | "503" | "429";

/** Amplitude's /2/httpapi as its document describes it. */
function fakeAmplitude() {
  const stored = new Map<string, any>();
  const modes: Mode[] = [];
  const receiver = startReceiver({ answer: (_request, n) => answer(receiver.received[n - 1]!) });

  function answer(r: Received): Response {
    const mode = modes.shift() ?? "ok";
    if (mode === "503") return new Response("Service Unavailable", { status: 503 });
    if (r.method !== "POST" || r.path !== "/2/httpapi") return json(400, { code: 400, error: "Invalid request path" });
    if (r.bytes.length === 0) return json(400, { code: 400, error: "Missing request body" });
    const body = r.json;
    if (!r.headers.get("content-type")?.startsWith("application/json") || body === null || typeof body !== "object") return json(400, { code: 400, error: "Invalid JSON request body" });
    if (typeof body.api_key !== "string") return json(400, { code: 400, error: "Request missing required field", missing_field: "api_key" });
    if (!Array.isArray(body.events) || body.events.length === 0) return json(400, { code: 400, error: "Request missing required field", missing_field: "events" });
    if (body.api_key !== API_KEY) return json(400, { code: 400, error: "Invalid API key" });
    if (body.events.length > 2000 || r.bytes.length >= 1_000_000) return json(413, { code: 413, error: "Payload too large" });
    if (mode === "429") {
      return json(429, { code: 429, error: "Too many requests for some devices and users", eps_threshold: 30, throttled_users: { [body.events[0].user_id]: 31 }, throttled_events: [0] });
    }
    const minIdLength = Number.isInteger(body.options?.min_id_length) ? body.options.min_id_length : 5;
    const invalid: Record<string, number[]> = {};
    const missing: Record<string, number[]> = {};
    const mark = (map: Record<string, number[]>, field: string, i: number) => {
      map[field] ??= [];
      if (map[field]!.length === 0) map[field]!.push(i); // "the index of the first event to encounter an error"
    };
    body.events.forEach((e: any, i: number) => {
      if (typeof e?.event_type !== "string" || e.event_type === "") mark(missing, "event_type", i);
      const ids = [e?.user_id, e?.device_id].filter((id) => typeof id === "string" && id.length >= minIdLength && !INVALID_IDS.has(id.toLowerCase()));
      if (ids.length === 0) mark(missing, "user_id", i);
      if (e?.time !== undefined && !Number.isInteger(e.time)) mark(invalid, "time", i);
      if (e?.insert_id !== undefined && typeof e.insert_id !== "string") mark(invalid, "insert_id", i);
    });
    if (Object.keys(invalid).length > 0 || Object.keys(missing).length > 0) {
      return json(400, {
        code: 400,
        error: Object.keys(invalid).length > 0 ? "Invalid field values on some events" : "Request missing required field",
        ...(Object.keys(invalid).length > 0 ? { events_with_invalid_fields: invalid } : {}),
        ...(Object.keys(missing).length > 0 ? { events_with_missing_fields: missing } : {}),
      });
    }
    // "ignores subsequent events sent with the same insert_id on the same device_id" (7 days).
    for (const e of body.events) stored.set(e.insert_id === undefined ? crypto.randomUUID() : `${e.device_id ?? e.user_id}|${e.insert_id}`, e);
    if (mode === "store-then-500") return new Response("Internal Server Error", { status: 500 });
    return json(200, { code: 200, events_ingested: body.events.length, payload_size_bytes: r.bytes.length, server_upload_time: Date.now() });
  }

  return { receiver, stored, next: (...m: Mode[]) => modes.push(...m), host: `http://127.0.0.1:${receiver.port}` };
}

const vendor = fakeAmplitude();
afterAll(() => vendor.receiver.stop());
const config = (over: Partial<AmplitudeConfig> = {}): AmplitudeConfig => ({ apiKey: API_KEY, region: "us", apiHost: vendor.host, trackEvaluations: true, trackChanges: true, sampleRate: 1, ...over });

const deliver = (requests: VendorRequest[]) => deliverTo(amplitude, requests);

describe("amplitude connector", () => {
  test("its config schema is valid JSON Schema, the API key is secret, the defaults validate", () => {
    const filled = checkConfigSchema(amplitude, { apiKey: API_KEY }, ["apiKey"]);
    expect(filled).toEqual({ apiKey: API_KEY, region: "us", trackEvaluations: true, trackChanges: true, sampleRate: 1 });
    expect(amplitude.category).toBe("analytics");
  });

  test("evaluations arrive as $exposure events with flag_key and variant; anonymous ones are left out", async () => {
    vendor.stored.clear();
    const input = [...records(2), ...records(1, { userId: null }), ...records(1, { userId: "u1", variant: null, evaluatedAt: "2026-11-22T10:00:05.000Z" })];
    const requests = amplitude.evaluations!(input, config(), NOW);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.events).toBe(3);
    expect(await deliver(requests)).toEqual([{ kind: "sent", accepted: 3, rejected: 0, error: null }]);
    const got = vendor.receiver.received.at(-1)!;
    expect(got.method).toBe("POST");
    expect(got.path).toBe("/2/httpapi");
    expect(got.json.api_key).toBe(API_KEY);
    expect(got.json.options).toEqual({ min_id_length: 1 });
    expect(got.json.events[0]).toEqual({
      user_id: "user-0",
      event_type: "$exposure",
      time: Date.parse(input[0]!.evaluatedAt),
      insert_id: expect.stringMatching(/^[0-9a-f]{64}$/),
      event_properties: { flag_key: "checkout-v2", variant: "treatment", enabled: true, reason: "rule_match", rule_id: "rule_1", environment: "production" },
    });
    // A two-character user id is a real id here (min_id_length 1); no variant on an enabled flag: "on".
    expect(got.json.events[2]).toMatchObject({ user_id: "u1", event_properties: { variant: "on" } });
    expect(vendor.stored.size).toBe(3);
  });

  test("2,001 records are split at Amplitude's 2,000 events (and under 1 MB) per request", async () => {
    vendor.stored.clear();
    const input = records(2001);
    const requests = amplitude.evaluations!(input, config(), NOW);
    expect(requests.map((r) => r.events)).toEqual([2000, 1]);
    for (const r of requests) expect(Buffer.byteLength(r.body)).toBeLessThan(1_000_000);
    expect(amplitude.evaluations!(input, config(), NOW)).toEqual(requests);
    expect((await deliver(requests)).map((o) => o.kind === "sent" && o.accepted)).toEqual([2000, 1]);
    expect(vendor.stored.size).toBe(2001);
  });

  test("long flag keys: the 1 MB limit splits before the 2,000 events", () => {
    const requests = amplitude.evaluations!(records(2000, { flagKey: "k".repeat(400) }), config(), NOW);
    expect(requests.length).toBeGreaterThan(1);
    for (const r of requests) expect(Buffer.byteLength(r.body)).toBeLessThan(1_000_000);
    expect(requests.reduce((n, r) => n + r.events, 0)).toBe(2000);
  });

  test("a 400 naming bad events ingests nothing: the bad ones are rejected, the rest resent (remainder) and taken", async () => {
    vendor.stored.clear();
    const input = [...records(1), ...records(1, { userId: "user-bad", evaluatedAt: "not a time" }), ...records(2, { userId: "user-z" }).map((r, i) => ({ ...r, evaluatedAt: new Date(Date.parse(r.evaluatedAt) + 10 + i).toISOString() }))];
    const [request] = amplitude.evaluations!(input, config(), NOW);
    const response = await send(request!);
    expect(response.status).toBe(400);
    expect(amplitude.outcome(request!, response)).toEqual({ kind: "sent", accepted: 0, rejected: 1, error: expect.stringContaining("time") });
    expect(vendor.stored.size).toBe(0);
    const rest = amplitude.remainder(request!, response)!;
    expect(rest.events).toBe(3);
    expect(JSON.parse(rest.body).events.map((e: any) => e.insert_id)).toEqual(JSON.parse(request!.body).events.filter((_: any, i: number) => i !== 1).map((e: any) => e.insert_id));
    expect(amplitude.outcome(rest, await send(rest))).toEqual({ kind: "sent", accepted: 3, rejected: 0, error: null });
    expect(vendor.stored.size).toBe(3);
    // Nothing to resend after a success.
    expect(amplitude.remainder(rest, { status: 200, headers: {}, body: "{}" })).toBeNull();
  });

  test("an invalid API key: Amplitude's 400 \"Invalid API key\", failed for good as bad credentials", async () => {
    vendor.stored.clear();
    const [request] = amplitude.evaluations!(records(2), config({ apiKey: "wrong" }), NOW);
    const response = await send(request!);
    expect(response.status).toBe(400);
    const outcome = amplitude.outcome(request!, response);
    expect(outcome.kind).toBe("failed");
    expect(outcome.kind === "failed" && outcome.error).toStartWith("bad credentials: Amplitude");
    expect(amplitude.remainder(request!, response)).toBeNull();
    expect(amplitude.outcome(request!, { status: 401, headers: {}, body: "" }).kind).toBe("failed");
  });

  test("429 is retried after Amplitude's 30 s pause (or Retry-After when given); the resend is counted once", async () => {
    const [request] = amplitude.evaluations!(records(5), config(), NOW);
    await checkRetriedThenTaken(amplitude, request!, vendor, ["429"], [THROTTLE_PAUSE_MS]);
    expect(amplitude.outcome(request!, { status: 429, headers: { "retry-after": "2" }, body: "{}" })).toMatchObject({ kind: "retry", retryAfterMs: 2000 });
  });

  test("5xx is retried; a resend after a 500 that had stored the events is deduped by insert_id", async () => {
    await checkDedupedResend(amplitude, () => amplitude.evaluations!(records(4), config(), NOW)[0]!, vendor, ["store-then-500", "503"]);
    expect(vendor.stored.size).toBe(4);
  });

  test("a flag change arrives as Feature Flag Changed, attributed to its actor", async () => {
    vendor.stored.clear();
    expect(await deliver(amplitude.changes!([flagChange(), flagChange({ id: "evt_2", event: "flag.updated", actor: { type: "admin_key", id: "ak_1", label: "ci" } })], config()))).toEqual([
      { kind: "sent", accepted: 2, rejected: 0, error: null },
    ]);
    const [enabled, updated] = vendor.receiver.received.at(-1)!.json.events;
    expect(enabled).toMatchObject({
      user_id: "flagsvc:usr_1",
      event_type: "Feature Flag Changed",
      time: Date.parse(flagChange().timestamp),
      event_properties: { change: "enabled", flag_key: "checkout-v2", environment: "production", enabled_before: false, enabled_after: true, actor_label: "alice@example.com" },
    });
    expect(updated).toMatchObject({ user_id: "flagsvc:ak_1", event_properties: { change: "updated", actor_type: "admin_key" } });
    await deliver(amplitude.changes!([flagChange()], config()));
    expect(vendor.stored.size).toBe(2);
  });

  test("trackEvaluations, trackChanges, sampleRate and region shape what is sent", () => {
    checkSwitches(amplitude, config(), `${AMPLITUDE_HOSTS.eu}/2/httpapi`, "https://api2.amplitude.com/2/httpapi");
  });
});
