/**
 * What the six connector tests share: sending a connector's request for real (fetch to the local
 * receiver that plays the vendor) and reading the answer as the sender will, the config schema
 * checked with ajv as plugin schemas are, the checks every event vendor passes (switches,
 * retries, deduped resends), and sample evaluation records and flag changes.
 */
import { Value } from "@sinclair/typebox/value";
import Ajv2020 from "ajv/dist/2020";
import { expect } from "bun:test";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "../../src/modules/integrations/connectors/types";

// ---- talking to the receiver -------------------------------------------------------------------

/** Sends `request` as the sender will (method, url, headers, body as given) and returns the answer. */
export async function send(request: VendorRequest): Promise<VendorResponse> {
  const response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.method === "GET" ? undefined : request.body });
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { status: response.status, headers, body: await response.text() };
}

/** Sends each request in turn and reads each answer with the connector's `outcome`. */
export async function deliver(connector: Connector<any>, requests: VendorRequest[]): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  for (const request of requests) outcomes.push(connector.outcome(request, await send(request)));
  return outcomes;
}

/** JSON in a Response, as the vendors answer. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/** The user and password of a Basic `Authorization` header, or null. */
export function basicCredentials(header: string | null): { user: string; password: string } | null {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header ?? "");
  if (!m) return null;
  const text = Buffer.from(m[1]!, "base64").toString();
  const colon = text.indexOf(":");
  return colon < 0 ? null : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

// ---- checks every connector passes -------------------------------------------------------------

/**
 * The connector's configSchema is valid JSON Schema (ajv 2020, strict, the `secret` keyword
 * registered as src/plugins/manifest.ts does), an object whose properties are all described;
 * each default validates against its own property; `minimal`, and `minimal` with the defaults
 * filled in, validate; an unknown key is refused; exactly `secrets` are marked secret; apiHost
 * takes a base URL with a scheme and nothing else; and the API's own check (TypeBox's Value, on
 * the config as given, no defaults filled in) takes `minimal`. Returns `minimal` with the
 * defaults filled in.
 */
export function checkConfigSchema(connector: Connector<any>, minimal: Record<string, unknown>, secrets: string[]): Record<string, unknown> {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });
  const schema = JSON.parse(JSON.stringify(connector.configSchema));
  expect(ajv.validateSchema(schema)).toBe(true);
  expect(schema.type).toBe("object");
  const validate = ajv.compile(schema);
  expect(validate(minimal)).toBe(true);
  const filled: Record<string, unknown> = structuredClone(minimal);
  for (const [key, property] of Object.entries<any>(schema.properties)) {
    expect(typeof property.description).toBe("string");
    if ("default" in property) {
      expect(ajv.validate(property, property.default)).toBe(true);
      filled[key] ??= property.default;
    }
  }
  expect(validate(filled)).toBe(true);
  expect(validate({ ...minimal, unknownKey: 1 })).toBe(false);
  expect([...Value.Errors(connector.configSchema, minimal)].map((e) => `${e.path} ${e.message}`)).toEqual([]);
  const marked = Object.entries<any>(schema.properties).filter(([, p]) => p.secret === true).map(([k]) => k);
  expect(marked.sort()).toEqual([...secrets].sort());
  // A proxy or a test receiver takes apiHost; anything else is refused.
  expect(schema.properties.apiHost?.pattern).toBe("^https?://");
  expect(validate({ ...minimal, apiHost: "http://127.0.0.1:9000" })).toBe(true);
  expect(validate({ ...minimal, apiHost: "127.0.0.1:9000" })).toBe(false);
  return filled;
}

/**
 * trackEvaluations, trackChanges and sampleRate shape what is sent (sampling is the same on a
 * rebuild); without apiHost the region's host is used, and "us" without a region.
 */
export function checkSwitches(connector: Connector<any>, config: Record<string, unknown>, euUrl: string, usUrl: string): void {
  expect(connector.evaluations!(records(3), { ...config, trackEvaluations: false }, NOW)).toEqual([]);
  expect(connector.changes!([flagChange()], { ...config, trackChanges: false })).toEqual([]);
  expect(connector.evaluations!(records(10), { ...config, sampleRate: 0 }, NOW)).toEqual([]);
  const count = (requests: VendorRequest[]) => requests.reduce((n, r) => n + r.events, 0);
  const half = connector.evaluations!(records(1000), { ...config, sampleRate: 0.5 }, NOW);
  const ratio = count(half) / count(connector.evaluations!(records(1000), config, NOW));
  expect(ratio).toBeGreaterThan(0.4);
  expect(ratio).toBeLessThan(0.6);
  expect(connector.evaluations!(records(1000), { ...config, sampleRate: 0.5 }, NOW)).toEqual(half);
  const { apiHost: _, region: __, ...noHost } = config;
  expect(connector.evaluations!(records(1), { ...noHost, region: "eu" }, NOW)[0]!.url).toBe(euUrl);
  expect(connector.evaluations!(records(1), noHost, NOW)[0]!.url).toBe(usUrl);
}

/** A receiver playing a vendor: what it stored (deduped as the vendor does) and how it answers next. */
export interface FakeVendor<M extends string> {
  stored: Map<string, unknown>;
  next(...modes: M[]): void;
}

/**
 * A 500 after the vendor stored the batch, then another 5xx: both retried; the request rebuilt
 * from the same input (a restart) is the same text, and its resend is stored once.
 */
export async function checkDedupedResend<M extends string>(connector: Connector<any>, build: () => VendorRequest, vendor: FakeVendor<M>, modes: [M, M]): Promise<void> {
  vendor.stored.clear();
  const request = build();
  vendor.next(...modes);
  expect(connector.outcome(request, await send(request)).kind).toBe("retry");
  const stored = vendor.stored.size;
  expect(stored).toBeGreaterThan(0);
  expect(connector.outcome(request, await send(request)).kind).toBe("retry");
  const rebuilt = build();
  expect(rebuilt.body).toBe(request.body);
  expect(connector.outcome(rebuilt, await send(rebuilt))).toEqual({ kind: "sent", accepted: request.events, rejected: 0, error: null });
  expect(vendor.stored.size).toBe(stored);
}

/**
 * The vendor answers `modes` (429s) one after the other: each is a retry after `retryAfterMs[i]`;
 * then the same request is taken whole, and stored once.
 */
export async function checkRetriedThenTaken<M extends string>(connector: Connector<any>, request: VendorRequest, vendor: FakeVendor<M>, modes: M[], retryAfterMs: (number | null)[]): Promise<void> {
  vendor.stored.clear();
  vendor.next(...modes);
  for (const wait of retryAfterMs) expect(connector.outcome(request, await send(request))).toEqual({ kind: "retry", error: expect.stringContaining("429"), retryAfterMs: wait });
  expect(connector.outcome(request, await send(request))).toEqual({ kind: "sent", accepted: request.events, rejected: 0, error: null });
  expect(vendor.stored.size).toBe(request.events);
}

// ---- sample input ------------------------------------------------------------------------------

/** When the sample records were evaluated and the sample change was made. */
export const T0 = Date.parse("2026-11-22T10:00:00.000Z");
/** The sender's clock when it hands the sample records over (`nowMs` of `evaluations`). */
export const NOW = T0 + 1_500;

let seq = 0;
/** One evaluation record of flag checkout-v2 (no variant, on) by a user of its own. */
export function evaluation(over: Partial<EvaluationRecord> = {}): EvaluationRecord {
  seq++;
  return {
    flagKey: "checkout-v2",
    environment: "production",
    enabled: true,
    variant: null,
    reason: "rule_match",
    ruleId: "rule_1",
    userId: `user-${seq}`,
    evaluatedAt: new Date(T0 + 250).toISOString(),
    ...over,
  };
}

/** `n` evaluation records of users user-0, user-1, ..., one ms apart from T0, variants treatment and control in turn. */
export function records(n: number, over: Partial<EvaluationRecord> = {}): EvaluationRecord[] {
  return Array.from({ length: n }, (_, i) =>
    evaluation({ variant: i % 2 === 0 ? "treatment" : "control", userId: `user-${i}`, evaluatedAt: new Date(T0 + i).toISOString(), ...over }),
  );
}

/** alice turns checkout-v2 on in production (rollout 10% -> 50%) at T0. */
export function flagChange(over: Partial<FlagChangeEvent> = {}): FlagChangeEvent {
  return {
    id: "evt_01JD5Q2M7W3K9X",
    event: "flag.enabled",
    projectSlug: "shop",
    environment: "production",
    timestamp: new Date(T0).toISOString(),
    data: { flagKey: "checkout-v2", previousState: { enabled: false, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: 50 } },
    actor: { type: "user", id: "usr_1", label: "alice@example.com" },
    ...over,
  };
}
