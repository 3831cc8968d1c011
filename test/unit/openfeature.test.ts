/**
 * The OpenFeature mapping (src/evaluation/openfeature.ts): the local provider's fast path (a
 * context evaluated as it is, its targeting key handed to the engine as the user) answers as the
 * server's path (the context converted by toEvalContext), for random flags and contexts, and the
 * contexts it must not take as they are go the converting way.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compileFlag, compileState, evaluate } from "../../src/evaluation/engine";
import { evaluableAsIs, isIdentified, isResolutionError, resolution, toEvalContext } from "../../src/evaluation/openfeature";
import type { FlagDefinition } from "../../src/evaluation/types";

const FLAG: FlagDefinition = {
  key: "f",
  variants: [
    { key: "a", weight: 30 },
    { key: "b", weight: 70 },
  ],
  rules: [
    { id: "r1", name: "by user", enabled: true, variant: "a", conditions: [{ attribute: "userId", operator: "starts_with", value: "u1" }] },
    { id: "r2", name: "by key", enabled: true, variant: "b", conditions: [{ attribute: "targetingKey", operator: "equals", value: "tk-7" }] },
    { id: "r3", name: "by plan", enabled: true, variant: null, conditions: [{ attribute: "plan", operator: "in", value: ["pro", "team"] }] },
  ],
};
const flag = compileFlag(FLAG);
const scalar = fc.oneof(fc.constantFrom("u1", "u12", "tk-7", "pro", "team", ""), fc.integer({ min: -5, max: 20 }), fc.boolean(), fc.constant(null));
const context = fc.record(
  {
    targetingKey: fc.oneof(fc.constantFrom("u1", "u15", "tk-7", "x", ""), fc.constant(null)),
    userId: scalar,
    plan: fc.oneof(scalar, fc.array(scalar, { maxLength: 3 })),
  },
  { requiredKeys: [] },
);

describe("evaluableAsIs: the context as it is answers as the converted one", () => {
  test("random contexts and states: same result and same OpenFeature resolution", () => {
    fc.assert(
      fc.property(context, fc.boolean(), fc.option(fc.integer({ min: 0, max: 100 }), { nil: null }), (ctx, enabled, rollout) => {
        const state = compileState({ enabled, rolloutPercentage: rollout });
        const converted = toEvalContext(ctx);
        if (isResolutionError(converted)) throw new Error(converted.errorDetails);
        const slow = evaluate(flag, "f", state, converted, "");
        const slowResolution = resolution(slow, flag, isIdentified(converted), "e");
        if (!evaluableAsIs(ctx)) return;
        const userId = typeof ctx.targetingKey === "string" ? ctx.targetingKey : undefined;
        const fast = evaluate(flag, "f", state, ctx, "", undefined, userId);
        expect(fast).toEqual(slow);
        expect(resolution(fast, flag, userId !== undefined || isIdentified(ctx), "e")).toEqual(slowResolution);
      }),
      { numRuns: 2000 },
    );
  });

  test("what it refuses goes the converting way: a Date, an object, an empty targeting key", () => {
    expect(evaluableAsIs({ targetingKey: "u1", at: new Date(0) })).toBe(false);
    expect(evaluableAsIs({ targetingKey: "u1", nested: { a: 1 } })).toBe(false);
    expect(evaluableAsIs({ targetingKey: "u1", list: [[1]] })).toBe(false);
    expect(evaluableAsIs({ targetingKey: "" })).toBe(false);
    expect(evaluableAsIs({ targetingKey: 5 })).toBe(false);
    expect(evaluableAsIs({ targetingKey: "u1", plan: "pro", tags: ["a", 1, null] })).toBe(true);
    expect(toEvalContext({ at: new Date(0) })).toEqual({ at: "1970-01-01T00:00:00.000Z" });
  });
});
