/**
 * What the mixpanel, amplitude and segment tests share: sending a connector's request for real
 * (fetch to the local receiver that plays the vendor), reading the answer as the sender will, the
 * config schema checked with ajv as plugin schemas are, and sample records and changes.
 */
import { expect } from "bun:test";
import Ajv2020 from "ajv/dist/2020";
import type { Connector, EvaluationRecord, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "../../src/modules/integrations/connectors/types";

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

/**
 * trackEvaluations, trackChanges and sampleRate shape what is sent (sampling is the same on a
 * rebuild); without apiHost the region's host is used, and "us" without a region.
 */
export function checkSwitches(connector: Connector<any>, config: Record<string, unknown>, euUrl: string, usUrl: string): void {
  expect(connector.evaluations!(records(3), { ...config, trackEvaluations: false })).toEqual([]);
  expect(connector.changes!([flagChange()], { ...config, trackChanges: false })).toEqual([]);
  expect(connector.evaluations!(records(10), { ...config, sampleRate: 0 })).toEqual([]);
  const count = (requests: VendorRequest[]) => requests.reduce((n, r) => n + r.events, 0);
  const half = connector.evaluations!(records(1000), { ...config, sampleRate: 0.5 });
  const ratio = count(half) / count(connector.evaluations!(records(1000), config));
  expect(ratio).toBeGreaterThan(0.4);
  expect(ratio).toBeLessThan(0.6);
  expect(connector.evaluations!(records(1000), { ...config, sampleRate: 0.5 })).toEqual(half);
  const { apiHost: _, region: __, ...noHost } = config;
  expect(connector.evaluations!(records(1), { ...noHost, region: "eu" })[0]!.url).toBe(euUrl);
  expect(connector.evaluations!(records(1), noHost)[0]!.url).toBe(usUrl);
}

/** The user and password of a Basic `Authorization` header, or null. */
export function basicCredentials(header: string | null): { user: string; password: string } | null {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header ?? "");
  if (!m) return null;
  const text = Buffer.from(m[1]!, "base64").toString();
  const colon = text.indexOf(":");
  return colon < 0 ? null : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** JSON in a Response, as the vendors answer. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/**
 * The connector's configSchema is valid JSON Schema (ajv 2020, strict, the `secret` keyword
 * registered as src/plugins/manifest.ts does), its secrets are marked, and `minimal` with the
 * defaults filled in validates (and the filled-in defaults are the schema's).
 */
export function checkConfigSchema(connector: Connector<any>, minimal: Record<string, unknown>, secrets: string[]): Record<string, unknown> {
  const ajv = new Ajv2020({ strict: true, allErrors: true, useDefaults: true });
  ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });
  const schema = JSON.parse(JSON.stringify(connector.configSchema));
  expect(ajv.validateSchema(schema)).toBe(true);
  const validate = ajv.compile(schema);
  const config = structuredClone(minimal);
  expect(validate(config)).toBe(true);
  for (const [key, property] of Object.entries<any>(schema.properties)) {
    expect(typeof property.description).toBe("string");
    if ("default" in property) expect(config[key]).toEqual(property.default);
  }
  expect(Object.entries<any>(schema.properties).filter(([, p]) => p.secret === true).map(([k]) => k)).toEqual(secrets);
  expect(schema.properties.apiHost.pattern).toBe("^https?://");
  // A proxy or a test receiver takes apiHost; anything else is refused.
  expect(validate({ ...structuredClone(minimal), apiHost: "http://127.0.0.1:9000" })).toBe(true);
  expect(validate({ ...structuredClone(minimal), apiHost: "127.0.0.1:9000" })).toBe(false);
  expect(validate({ ...structuredClone(minimal), typo: 1 })).toBe(false);
  return config;
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

export const T0 = Date.parse("2025-06-01T12:00:00.000Z");

/** `n` evaluation records of distinct users, one ms apart. */
export function records(n: number, over: Partial<EvaluationRecord> = {}): EvaluationRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    flagKey: "new-checkout",
    environment: "production",
    enabled: true,
    variant: i % 2 === 0 ? "treatment" : "control",
    reason: "rule_match",
    ruleId: "rule_1",
    userId: `user-${i}`,
    evaluatedAt: new Date(T0 + i).toISOString(),
    ...over,
  }));
}

export function flagChange(over: Partial<FlagChangeEvent> = {}): FlagChangeEvent {
  return {
    id: "evt_01J0000000000000000000000A",
    event: "flag.enabled",
    projectSlug: "shop",
    environment: "production",
    timestamp: new Date(T0).toISOString(),
    data: { flagKey: "new-checkout", previousState: { enabled: false, rolloutPercentage: 20 }, currentState: { enabled: true, rolloutPercentage: 20 } },
    actor: { type: "user", id: "usr_42", label: "ada@example.com" },
    ...over,
  };
}
