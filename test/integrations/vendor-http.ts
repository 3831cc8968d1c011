/**
 * For the connector tests: send a connector's request for real (fetch to a local receiver that
 * plays the vendor), read the answer as the sender will, check a config schema with ajv the way
 * plugin manifests are checked, and build evaluation records and flag changes.
 */
import Ajv2020 from "ajv/dist/2020";
import { expect } from "bun:test";
import type { Connector, EvaluationRecord, FlagChangeEvent, VendorRequest, VendorResponse } from "../../src/modules/integrations/connectors/types";

/** Performs `request` and returns the answer as the sender hands it to `outcome`. */
export async function deliver(request: VendorRequest): Promise<VendorResponse> {
  const res = await fetch(request.url, { method: request.method, headers: request.headers, body: request.method === "GET" ? undefined : request.body });
  const headers: Record<string, string> = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  return { status: res.status, headers, body: await res.text() };
}

/** A JSON answer as a vendor gives it. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/**
 * The config schema is valid JSON Schema (draft 2020-12, ajv strict, `secret` a keyword as for
 * plugins), `minimal` validates, `minimal` with every default filled in validates, each default
 * validates against its own property, and an unknown key is refused.
 */
export function checkConfigSchema(connector: Connector<any>, minimal: Record<string, unknown>, secrets: string[]): void {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });
  const schema = JSON.parse(JSON.stringify(connector.configSchema));
  expect(ajv.validateSchema(schema)).toBe(true);
  expect(schema.type).toBe("object");
  const validate = ajv.compile(schema);
  expect(validate(minimal)).toBe(true);
  const withDefaults: Record<string, unknown> = { ...minimal };
  for (const [key, prop] of Object.entries(schema.properties as Record<string, any>)) {
    expect(typeof prop.description).toBe("string");
    if ("default" in prop) {
      expect(ajv.validate(prop, prop.default)).toBe(true);
      withDefaults[key] ??= prop.default;
    }
  }
  expect(validate(withDefaults)).toBe(true);
  expect(validate({ ...minimal, unknownKey: 1 })).toBe(false);
  const marked = Object.entries(schema.properties as Record<string, any>).filter(([, p]) => p.secret === true).map(([k]) => k);
  expect(marked.sort()).toEqual([...secrets].sort());
  if (schema.properties.apiHost) {
    expect(ajv.validate(schema.properties.apiHost, "http://127.0.0.1:9000")).toBe(true);
    expect(ajv.validate(schema.properties.apiHost, "127.0.0.1:9000")).toBe(false);
  }
}

let seq = 0;
export function evaluation(overrides: Partial<EvaluationRecord> = {}): EvaluationRecord {
  seq++;
  return {
    flagKey: "checkout-v2",
    environment: "production",
    enabled: true,
    variant: null,
    reason: "rule_match",
    ruleId: "rule_1",
    userId: `user-${seq}`,
    evaluatedAt: "2026-11-22T10:00:00.250Z",
    ...overrides,
  };
}

export function flagChange(overrides: Partial<FlagChangeEvent> = {}): FlagChangeEvent {
  return {
    id: "evt_01JD5Q2M7W3K9X",
    event: "flag.enabled",
    projectSlug: "shop",
    environment: "production",
    timestamp: "2026-11-22T10:00:00.000Z",
    data: { flagKey: "checkout-v2", previousState: { enabled: false, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: 50 } },
    actor: { type: "user", id: "usr_1", label: "alice@example.com" },
    ...overrides,
  };
}
