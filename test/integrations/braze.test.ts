/**
 * The braze connector against a local receiver that plays Braze's POST /users/track: Bearer
 * REST key, { attributes: [...] } with an identifier in each object, at most 75 objects a
 * request; 201 { message: "success", attributes_processed }, non-fatal `errors` entries
 * { type, input_array, index } for objects it refuses, fatal 400 { message }, 401, 429 with
 * Retry-After, 5xx. It keeps user profiles as Braze does: an attribute set again to the same
 * value changes nothing.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { braze, type BrazeConfig } from "../../src/modules/integrations/connectors/braze";
import type { EvaluationRecord } from "../../src/modules/integrations/connectors/types";
import { startReceiver } from "../webhook-receiver";
import { checkConfigSchema, evaluation, json, NOW, send } from "./vendor";

const KEY = "braze-rest-key-1";
const BLOCKED = "blocked-user";

type Mode = "normal" | "error500" | "rateLimited" | "fatal";
let mode: Mode = "normal";
/** external_id -> custom attributes, as Braze stores a profile. */
const profiles = new Map<string, Record<string, unknown>>();
/** How many attribute values a request really changed (what a resend must not add to). */
let changedValues = 0;

const rx = startReceiver({
  answer: (request, n) => {
    const got = rx.received[n - 1]!;
    if (got.method !== "POST" || got.path !== "/users/track") return json(404, { message: "Not Found" });
    if (request.headers.get("authorization") !== `Bearer ${KEY}`) return json(401, { message: "Invalid API key: unknown or missing REST API Key" });
    if (!request.headers.get("content-type")?.startsWith("application/json")) return json(400, { message: "Content-Type must be application/json" });
    if (mode === "error500") return json(500, { message: "Internal Server Error" });
    if (mode === "rateLimited") return json(429, { message: "Rate limit exceeded" }, { "retry-after": "7", "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 30) });
    const body = got.json;
    if (!body || typeof body !== "object" || Array.isArray(body)) return json(400, { message: "Invalid JSON" });
    const objects = [...(body.attributes ?? []), ...(body.events ?? []), ...(body.purchases ?? [])];
    if (objects.length > 75) return json(400, { message: "Too many objects: at most 75 attributes, events and purchases combined" });
    if (mode === "fatal") return json(400, { message: "Bad Request", errors: [{ type: "malformed request" }] });
    const errors: unknown[] = [];
    let processed = 0;
    (body.attributes as Record<string, unknown>[]).forEach((a, index) => {
      if (typeof a.external_id !== "string") return void errors.push({ type: "'external_id', 'braze_id', 'user_alias', 'email' or 'phone' is required", input_array: "attributes", index });
      if (a.external_id === BLOCKED) return void errors.push({ type: "provided external_id is blacklisted and disallowed", input_array: "attributes", index });
      if (typeof a._update_existing_only !== "boolean") return void errors.push({ type: "'_update_existing_only' must be a boolean", input_array: "attributes", index });
      const profile = profiles.get(a.external_id) ?? {};
      for (const [k, v] of Object.entries(a)) {
        if (k === "external_id" || k === "_update_existing_only") continue;
        if (profile[k] !== v) changedValues++;
        profile[k] = v;
      }
      profiles.set(a.external_id, profile);
      processed++;
    });
    return json(201, errors.length ? { message: "success", attributes_processed: processed, errors } : { message: "success", attributes_processed: processed });
  },
});
afterAll(() => rx.stop());
beforeEach(() => {
  mode = "normal";
  profiles.clear();
  changedValues = 0;
  rx.received.length = 0;
});

const config: BrazeConfig = { apiKey: KEY, apiHost: `http://127.0.0.1:${rx.port}` };

describe("braze connector", () => {
  test("its configSchema is valid JSON Schema, defaults included; the REST key is the secret", () => {
    checkConfigSchema(braze, { apiKey: "k" }, ["apiKey"]);
    expect(braze.category).toBe("crm");
    expect(braze.changes).toBeUndefined();
  });

  test("one attributes object a user, the latest evaluation of each flag; no user ID or another environment: nothing", async () => {
    const records: EvaluationRecord[] = [
      evaluation({ userId: "u1", flagKey: "checkout-v2", enabled: false, evaluatedAt: "2026-11-22T10:00:00.000Z" }),
      evaluation({ userId: "u1", flagKey: "checkout-v2", enabled: true, variant: "treatment", evaluatedAt: "2026-11-22T10:00:01.000Z" }),
      evaluation({ userId: "u1", flagKey: "dark-mode", enabled: true }),
      evaluation({ userId: "u2", flagKey: "checkout-v2", enabled: false }),
      evaluation({ userId: null }),
      evaluation({ userId: "u3", environment: "staging" }),
    ];
    const [request, ...more] = braze.evaluations!(records, config, NOW);
    expect(more).toEqual([]);
    expect(request!.method).toBe("POST");
    expect(request!.url).toBe(`http://127.0.0.1:${rx.port}/users/track`);
    expect(request!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request!.events).toBe(2);
    expect(JSON.parse(request!.body)).toEqual({
      attributes: [
        { external_id: "u1", _update_existing_only: true, "flagsvc_checkout-v2": "treatment", "flagsvc_dark-mode": "on" },
        { external_id: "u2", _update_existing_only: true, "flagsvc_checkout-v2": "off" },
      ],
    });
    const outcome = braze.outcome(request!, await send(request!));
    expect(outcome).toEqual({ kind: "sent", accepted: 2, rejected: 0, error: null });
    expect(profiles.get("u1")).toEqual({ "flagsvc_checkout-v2": "treatment", "flagsvc_dark-mode": "on" });
    expect(braze.evaluations!(records, { ...config, environment: "*" }, NOW)[0]!.events).toBe(3);
    expect(braze.evaluations!(records, { ...config, attributePrefix: "ff_", updateExistingOnly: false }, NOW)[0]!.body).toContain('"_update_existing_only":false,"ff_checkout-v2":"treatment"');
  });

  test("2,001 users: 27 requests of at most 75 objects (41 of 50 with batchSize 50), every user stored once", async () => {
    const records = Array.from({ length: 2_001 }, (_, i) => evaluation({ userId: `user-${i}` }));
    const requests = braze.evaluations!(records, config, NOW);
    expect(requests.length).toBe(27);
    expect(requests.every((r) => r.events <= 75)).toBe(true);
    let accepted = 0;
    for (const r of requests) {
      const o = braze.outcome(r, await send(r));
      expect(o.kind).toBe("sent");
      if (o.kind === "sent") accepted += o.accepted;
    }
    expect(accepted).toBe(2_001);
    expect(profiles.size).toBe(2_001);
    expect(braze.evaluations!(records, { ...config, batchSize: 50 }, NOW).length).toBe(41);
  });

  test("deterministic: the same records give the same bodies; a resend after a 500 changes nothing twice", async () => {
    const records = Array.from({ length: 10 }, (_, i) => evaluation({ userId: `u${i}`, variant: i % 2 ? "a" : "b" }));
    const [request] = braze.evaluations!(records, config, NOW);
    expect(braze.evaluations!(records, config, NOW)[0]!.body).toBe(request!.body);
    mode = "error500";
    const first = braze.outcome(request!, await send(request!));
    expect(first.kind).toBe("retry");
    mode = "normal";
    expect(braze.outcome(request!, await send(request!))).toEqual({ kind: "sent", accepted: 10, rejected: 0, error: null });
    // The 2xx answer was lost: the sender sends the same request again.
    expect(braze.outcome(request!, await send(request!)).kind).toBe("sent");
    expect(changedValues).toBe(10);
    expect(profiles.size).toBe(10);
  });

  test("a partial failure (Braze's non-fatal errors): the others count, the refused object is rejected, not retried", async () => {
    const records = [evaluation({ userId: "ok-1" }), evaluation({ userId: BLOCKED }), evaluation({ userId: "ok-2" })];
    const [request] = braze.evaluations!(records, config, NOW);
    const outcome = braze.outcome(request!, await send(request!));
    expect(outcome.kind).toBe("sent");
    if (outcome.kind !== "sent") return;
    expect(outcome.accepted).toBe(2);
    expect(outcome.rejected).toBe(1);
    expect(outcome.error).toContain("blacklisted");
    expect(outcome.error).toContain("attributes[1]");
  });

  test("401 bad key: failed, bad credentials; 429: retry after Retry-After; a fatal 400: failed with Braze's message", async () => {
    const [request] = braze.evaluations!([evaluation()], { ...config, apiKey: "wrong" }, NOW);
    const unauthorized = braze.outcome(request!, await send(request!));
    expect(unauthorized.kind).toBe("failed");
    if (unauthorized.kind === "failed") expect(unauthorized.error).toBe("bad credentials: Braze answered HTTP 401: Invalid API key: unknown or missing REST API Key");

    const [good] = braze.evaluations!([evaluation()], config, NOW);
    mode = "rateLimited";
    expect(braze.outcome(good!, await send(good!))).toMatchObject({ kind: "retry", retryAfterMs: 7_000 });
    // Without Retry-After, Braze's X-RateLimit-Reset (a UNIX time) says how long.
    const reset = braze.outcome(good!, { status: 429, headers: { "X-RateLimit-Reset": String(Math.floor(Date.now() / 1000) + 20) }, body: "" });
    expect(reset.kind === "retry" && reset.retryAfterMs! > 15_000 && reset.retryAfterMs! <= 20_000).toBe(true);

    mode = "fatal";
    expect(braze.outcome(good!, await send(good!))).toEqual({ kind: "failed", error: "Braze answered HTTP 400: Bad Request" });
  });
});
