/**
 * The mixpanel connector against a local receiver that plays Mixpanel's /import
 * (https://developer.mixpanel.com/reference/import-events): it checks the path, strict=1, the
 * project token as Basic auth user, the JSON array and each event's required fields, dedupes on
 * (event, time, distinct_id, $insert_id), ingests the valid events of a batch and names the
 * others in `failed_records` (400), and answers 401, 413, 429 and 5xx as Mixpanel does.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { MIXPANEL_HOSTS, mixpanel, type MixpanelConfig } from "../../src/modules/integrations/connectors/mixpanel";
import type { VendorRequest } from "../../src/modules/integrations/connectors/types";
import { type Received, startReceiver } from "../webhook-receiver";
import { basicCredentials, checkConfigSchema, checkDedupedResend, checkRetriedThenTaken, checkSwitches, deliver as deliverTo, flagChange, json, NOW, records, send } from "./vendor";

const TOKEN = "mp-project-token-1234";
const DISALLOWED_IDS = new Set(["00000000-0000-0000-0000-000000000000", "anon", "anonymous", "nil", "none", "null", "n/a", "na", "undefined", "unknown", "<nil>", "0", "-1", "true", "false", "[]", "{}"]);
const YEAR_1971_S = 31_536_000;

type Mode = "ok" | "store-then-500" | "503" | "429" | "429-retry-after";

/** Mixpanel's /import as its document describes it. */
function fakeMixpanel() {
  const stored = new Map<string, any>();
  const modes: Mode[] = [];
  const receiver = startReceiver({ answer: (_request, n) => answer(receiver.received[n - 1]!) });

  function answer(r: Received): Response {
    const mode = modes.shift() ?? "ok";
    if (mode === "503") return json(503, { code: 503, error: "Service Unavailable", status: "Service Unavailable" });
    if (mode === "429") return json(429, { code: 429, error: "Project exceeded rate limits. Please retry the request with exponential backoff.", status: "Too Many Requests" });
    if (mode === "429-retry-after") return json(429, { code: 429, error: "rate limited", status: "Too Many Requests" }, { "retry-after": "3" });
    if (r.method !== "POST") return json(405, { code: 405, error: "method not allowed" });
    if (r.path !== "/import") return json(404, { code: 404, error: "not found" });
    const auth = basicCredentials(r.headers.get("authorization"));
    if (!auth || auth.user !== TOKEN || auth.password !== "") return json(401, { code: 401, error: "Invalid username or password", status: "Unauthorized" });
    if (!r.headers.get("content-type")?.startsWith("application/json") || !Array.isArray(r.json)) return json(400, { code: 400, error: "request body must be a JSON array", status: "Bad Request" });
    if (r.json.length > 2000 || r.bytes.length > 2 * 1024 * 1024) return json(413, { code: 413, error: "request too large", status: "Payload Too Large" });
    const strict = r.query.get("strict") === "1";
    const failed: { index: number; $insert_id: unknown; field: string; message: string }[] = [];
    const valid: any[] = [];
    r.json.forEach((e: any, index: number) => {
      const p = e?.properties;
      const fail = (field: string, message: string) => failed.push({ index, $insert_id: p?.$insert_id, field, message });
      if (typeof e?.event !== "string" || e.event === "") return fail("event", "'event' must be a non-empty string");
      if (typeof p !== "object" || p === null) return fail("properties", "'properties' must be an object");
      const seconds = typeof p.time === "number" ? (p.time > 1e11 ? p.time / 1000 : p.time) : Number.NaN;
      if (!(seconds >= YEAR_1971_S)) return fail("properties.time", "'properties.time' is invalid: must be specified as seconds since epoch");
      if (typeof p.distinct_id !== "string" || DISALLOWED_IDS.has(p.distinct_id.toLowerCase())) return fail("properties.distinct_id", "'properties.distinct_id' is invalid");
      if (typeof p.$insert_id !== "string" || !/^[A-Za-z0-9-]{1,36}$/.test(p.$insert_id)) return fail("properties.$insert_id", "'properties.$insert_id' is invalid");
      if (Object.keys(p).length >= 255) return fail("properties", "too many properties");
      valid.push(e);
    });
    if (!strict && failed.length > 0) return json(400, { code: 400, error: "invalid data", status: "Bad Request" });
    for (const e of valid) stored.set(JSON.stringify([e.event, e.properties.time, e.properties.distinct_id, e.properties.$insert_id]), e);
    if (mode === "store-then-500") return json(500, { code: 500, error: "Internal Server Error", status: "Internal Server Error" });
    if (failed.length > 0) return json(400, { code: 400, error: "some data points in the request failed validation", failed_records: failed, num_records_imported: valid.length, status: "Bad Request" });
    return json(200, { code: 200, num_records_imported: valid.length, status: "OK" });
  }

  return { receiver, stored, next: (...m: Mode[]) => modes.push(...m), host: `http://127.0.0.1:${receiver.port}` };
}

const vendor = fakeMixpanel();
afterAll(() => vendor.receiver.stop());
const config = (over: Partial<MixpanelConfig> = {}): MixpanelConfig => ({ projectToken: TOKEN, region: "us", apiHost: vendor.host, trackEvaluations: true, trackChanges: true, sampleRate: 1, ...over });

const deliver = (requests: VendorRequest[]) => deliverTo(mixpanel, requests);

describe("mixpanel connector", () => {
  test("its config schema is valid JSON Schema, the token is secret, the defaults validate", () => {
    const filled = checkConfigSchema(mixpanel, { projectToken: TOKEN }, ["projectToken"]);
    expect(filled).toEqual({ projectToken: TOKEN, region: "us", trackEvaluations: true, trackChanges: true, sampleRate: 1 });
    expect(mixpanel.category).toBe("analytics");
  });

  test("evaluations arrive as $experiment_started exposures with the documented fields", async () => {
    vendor.stored.clear();
    const input = [...records(2), ...records(1, { userId: null, variant: null, enabled: false, evaluatedAt: "2026-11-22T10:00:01.000Z" })];
    const requests = mixpanel.evaluations!(input, config(), NOW);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.events).toBe(3);
    expect(await deliver(requests)).toEqual([{ kind: "sent", accepted: 3, rejected: 0, error: null }]);
    const got = vendor.receiver.received.at(-1)!;
    expect(got.method).toBe("POST");
    expect(got.path).toBe("/import");
    expect(got.query.get("strict")).toBe("1");
    expect(basicCredentials(got.headers.get("authorization"))).toEqual({ user: TOKEN, password: "" });
    const [first, , anonymous] = got.json;
    expect(first).toEqual({
      event: "$experiment_started",
      properties: {
        time: Date.parse(input[0]!.evaluatedAt),
        distinct_id: "user-0",
        $insert_id: expect.stringMatching(/^[0-9a-f]{36}$/),
        ip: 0,
        "Experiment name": "checkout-v2",
        "Variant name": "treatment",
        flag_key: "checkout-v2",
        variant: "treatment",
        enabled: true,
        reason: "rule_match",
        rule_id: "rule_1",
        environment: "production",
      },
    });
    // No user: Mixpanel's "" (kept, left out of per-user analysis); no variant: off.
    expect(anonymous.properties).toMatchObject({ distinct_id: "", "Variant name": "off", enabled: false });
    expect(vendor.stored.size).toBe(3);
  });

  test("2,001 records are split at Mixpanel's 2,000 events per request; ids are deterministic", async () => {
    vendor.stored.clear();
    const input = records(2001);
    const requests = mixpanel.evaluations!(input, config(), NOW);
    expect(requests.map((r) => r.events)).toEqual([2000, 1]);
    expect(mixpanel.evaluations!(input, config(), NOW)).toEqual(requests);
    for (const r of requests) expect(Buffer.byteLength(r.body)).toBeLessThanOrEqual(2 * 1024 * 1024);
    const outcomes = await deliver(requests);
    expect(outcomes.map((o) => o.kind === "sent" && o.accepted)).toEqual([2000, 1]);
    expect(vendor.stored.size).toBe(2001);
    const ids = new Set(requests.flatMap((r) => JSON.parse(r.body).map((e: any) => e.properties.$insert_id)));
    expect(ids.size).toBe(2001);
  });

  test("a 400 naming failed_records is a partial success: the others are ingested, the batch is not retried", async () => {
    vendor.stored.clear();
    const input = [...records(2), ...records(1, { userId: "user-old", evaluatedAt: "1970-01-01T00:00:00.000Z" })];
    const [request] = mixpanel.evaluations!(input, config(), NOW);
    const response = await send(request!);
    expect(response.status).toBe(400);
    const outcome = mixpanel.outcome(request!, response);
    expect(outcome).toEqual({ kind: "sent", accepted: 2, rejected: 1, error: expect.stringContaining("properties.time") });
    expect(vendor.stored.size).toBe(2);
  });

  test("a wrong project token: 401, failed for good as bad credentials", async () => {
    vendor.stored.clear();
    const [request] = mixpanel.evaluations!(records(2), config({ projectToken: "wrong" }), NOW);
    const outcome = mixpanel.outcome(request!, await send(request!));
    expect(outcome.kind).toBe("failed");
    expect(outcome.kind === "failed" && outcome.error).toStartWith("bad credentials: Mixpanel answered HTTP 401: Invalid username or password");
    expect(vendor.stored.size).toBe(0);
  });

  test("429 is retried (after Retry-After when given), and the resend is counted once", async () => {
    // Mixpanel documents no Retry-After: null leaves the wait to the sender's backoff.
    await checkRetriedThenTaken(mixpanel, mixpanel.evaluations!(records(5), config(), NOW)[0]!, vendor, ["429", "429-retry-after"], [null, 3000]);
  });

  test("5xx is retried; a resend after a 500 that had stored the batch is deduped by $insert_id", async () => {
    await checkDedupedResend(mixpanel, () => mixpanel.evaluations!(records(4), config(), NOW)[0]!, vendor, ["store-then-500", "503"]);
    expect(vendor.stored.size).toBe(4);
  });

  test("a flag change arrives as Feature Flag Changed with its actor, before and after", async () => {
    vendor.stored.clear();
    const requests = mixpanel.changes!([flagChange()], config());
    expect(await deliver(requests)).toEqual([{ kind: "sent", accepted: 1, rejected: 0, error: null }]);
    const [event] = vendor.receiver.received.at(-1)!.json;
    expect(event).toEqual({
      event: "Feature Flag Changed",
      properties: {
        time: Date.parse(flagChange().timestamp),
        distinct_id: "flagsvc:usr_1",
        $insert_id: expect.stringMatching(/^[0-9a-f]{36}$/),
        ip: 0,
        change: "enabled",
        flag_key: "checkout-v2",
        project: "shop",
        environment: "production",
        enabled_before: false,
        enabled_after: true,
        rollout_before: 10,
        rollout_after: 50,
        actor_type: "user",
        actor_id: "usr_1",
        actor_label: "alice@example.com",
        event_id: "evt_01JD5Q2M7W3K9X",
      },
    });
    // Resent (at least once delivery): the same $insert_id, stored once.
    await deliver(mixpanel.changes!([flagChange()], config()));
    expect(vendor.stored.size).toBe(1);
  });

  test("trackEvaluations, trackChanges, sampleRate and region shape what is sent", () => {
    checkSwitches(mixpanel, config(), `${MIXPANEL_HOSTS.eu}/import?strict=1`, "https://api.mixpanel.com/import?strict=1");
  });
});
