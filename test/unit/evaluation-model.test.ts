/**
 * The evaluation routes' quick acceptance tests (`isEvaluateRequest`, `isBatchRequest`, used
 * by the native handlers to spare valid bodies the compiled schema) against the schemas they
 * shortcut: over random JSON bodies, near-valid ones included, a quick "yes" is always a
 * schema "yes" (soundness), and on the bodies clients send the quick test says yes whenever
 * the schema does (so the shortcut is taken).
 */
import { describe, expect, test } from "bun:test";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import fc from "fast-check";
import { BatchRequest, EvaluateRequest, isBatchRequest, isEvaluateRequest } from "../../src/modules/evaluation/model";

const evaluateSchema = TypeCompiler.Compile(EvaluateRequest);
const batchSchema = TypeCompiler.Compile(BatchRequest);

/** As the handler sees a body: through JSON text (no undefined, no -0, Infinity as sent). */
const viaJson = (v: unknown) => JSON.parse(JSON.stringify(v) ?? "null");

const key = fc.oneof(fc.constantFrom("userId", "plan", "flagKey", "flags", "context", "__proto__", "a\nb", ""), fc.string({ maxLength: 6 }));
const scalar = fc.oneof(fc.string({ maxLength: 4 }), fc.double(), fc.integer(), fc.boolean(), fc.constant(null));
const loose = fc.jsonValue({ maxDepth: 3 });
const contextValue = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.array(loose, { maxLength: 2 }), loose);
const context = fc.oneof(fc.dictionary(key, contextValue, { maxKeys: 4 }), loose);
const flagKey = fc.oneof(fc.string({ maxLength: 8 }), loose);
const flags = fc.oneof(fc.array(fc.string({ maxLength: 4 }), { minLength: 0, maxLength: 55 }), fc.array(loose, { maxLength: 3 }), loose);

const evaluateBody = fc.oneof(
  fc.record({ flagKey, context }, { requiredKeys: [] }),
  fc.record({ flagKey, context, extra: loose }, { requiredKeys: ["flagKey"] }),
  loose,
);
const batchBody = fc.oneof(fc.record({ flags, context }, { requiredKeys: [] }), fc.record({ flags, context, flag: loose }, { requiredKeys: ["flags"] }), loose);

/** Bodies of the shape clients send (valid, and a few not). */
const cleanContext = fc.dictionary(fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.constant("a\nb")), fc.oneof(scalar, fc.array(scalar, { maxLength: 3 })), { maxKeys: 5 });

describe("quick acceptance tests agree with the schemas", () => {
  test("isEvaluateRequest: sound over random bodies", () => {
    fc.assert(
      fc.property(evaluateBody, (raw) => {
        const body = viaJson(raw);
        if (isEvaluateRequest(body)) expect(evaluateSchema.Check(body)).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  test("isBatchRequest: sound over random bodies", () => {
    fc.assert(
      fc.property(batchBody, (raw) => {
        const body = viaJson(raw);
        if (isBatchRequest(body)) expect(batchSchema.Check(body)).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  test("on clients' bodies both say the same", () => {
    fc.assert(
      fc.property(fc.record({ flagKey: fc.string({ maxLength: 6 }), context: cleanContext }, { requiredKeys: ["flagKey"] }), (raw) => {
        const body = viaJson(raw);
        expect(isEvaluateRequest(body)).toBe(evaluateSchema.Check(body));
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(fc.record({ flags: fc.array(fc.string({ maxLength: 4 }), { maxLength: 52 }), context: cleanContext }, { requiredKeys: ["flags"] }), (raw) => {
        const body = viaJson(raw);
        expect(isBatchRequest(body)).toBe(batchSchema.Check(body));
      }),
      { numRuns: 3000 },
    );
  });

  test("examples", () => {
    expect(isEvaluateRequest({ flagKey: "a", context: { userId: "u", n: 1, b: true, z: null, l: ["x", 2, false, null] } })).toBe(true);
    expect(isEvaluateRequest({ flagKey: "a" })).toBe(true);
    for (const bad of [null, [], "x", {}, { flagKey: "" }, { flagKey: 1 }, { flagKey: "a", x: 1 }, { flagKey: "a", context: null }, { flagKey: "a", context: [] }, { flagKey: "a", context: { a: {} } }, { flagKey: "a", context: { a: [[1]] } }, { flagKey: "a", context: { a: Infinity } }]) {
      expect(isEvaluateRequest(bad)).toBe(false);
    }
    expect(isBatchRequest({ flags: ["a", "a"], context: {} })).toBe(true);
    for (const bad of [{ flags: [] }, { flags: Array(51).fill("a") }, { flags: [""] }, { flags: [1] }, { flags: "a" }, { flags: ["a"], x: 1 }, {}]) {
      expect(isBatchRequest(bad)).toBe(false);
    }
  });
});
