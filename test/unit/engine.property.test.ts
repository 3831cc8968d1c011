/**
 * Property tests of the evaluation engine: determinism over random flags and contexts,
 * monotonic rollouts, and the spread of rollout and variant buckets over 100,000 userIds.
 * The userIds come from a fixed fast-check seed, so the spread checks cannot flake.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compileFlag, compileState, evaluate } from "../../src/evaluation/engine";
import type { Condition, ContextValue, EvalContext, FlagDefinition, FlagState, Rule, Variant } from "../../src/evaluation/types";

const AT = "2030-01-02T03:04:05.678Z";
const VARIANT_KEYS = ["red", "green", "blue"];

const scalar = fc.oneof(fc.constantFrom("a", "b", "ab", ""), fc.integer({ min: -3, max: 3 }), fc.boolean());
const contextValue: fc.Arbitrary<ContextValue> = fc.oneof(scalar, fc.constant(null), fc.array(scalar, { maxLength: 3 }));
const attribute = fc.constantFrom("a", "b", "userId");
const stringValue = fc.constantFrom("a", "b", "ab", "");
const numberValue = fc.integer({ min: -3, max: 3 });

const condition: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ attribute, operator: fc.constant("equals" as const), value: scalar }),
  fc.record({ attribute, operator: fc.constant("not_equals" as const), value: fc.oneof(stringValue, numberValue) }),
  fc.record({ attribute, operator: fc.constantFrom("in" as const, "not_in" as const), value: fc.array(scalar, { maxLength: 4 }) }),
  fc.record({ attribute, operator: fc.constantFrom("contains" as const, "starts_with" as const), value: stringValue }),
  fc.record({ attribute, operator: fc.constantFrom("greater_than" as const, "less_than" as const), value: numberValue }),
  fc.record({ attribute, operator: fc.constantFrom("is_true" as const, "is_false" as const) }),
);

const variants: fc.Arbitrary<Variant[]> = fc.constantFrom(
  [],
  [{ key: "red" }, { key: "green" }, { key: "blue" }],
  [
    { key: "red", weight: 20 },
    { key: "green", weight: 30.5 },
    { key: "blue", weight: 49.5 },
  ],
);

const flagDefinition: fc.Arbitrary<FlagDefinition> = fc
  .record({
    key: fc.constantFrom("new-checkout", "dark-mode", "a"),
    variants,
    rules: fc.array(
      fc.record({
        conditions: fc.array(condition, { maxLength: 3 }),
        enabled: fc.boolean(),
        variant: fc.option(fc.constantFrom(...VARIANT_KEYS), { nil: null }),
      }),
      { maxLength: 4 },
    ),
  })
  .map(({ key, variants, rules }) => ({
    key,
    variants,
    rules: rules.map((r, i): Rule => ({ ...r, id: `rule_${i}`, name: `rule ${i}`, variant: variants.length ? r.variant : null })),
  }));

const userId = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.constant(null), fc.constant(""));
const context: fc.Arbitrary<EvalContext> = fc.record(
  { a: contextValue, b: contextValue, userId: userId },
  { requiredKeys: [] },
);
/** A percentage with at most 3 decimals, as the API accepts. */
const percentage = fc.integer({ min: 0, max: 100_000 }).map((t) => t / 1000);
const flagState: fc.Arbitrary<FlagState> = fc.record({
  enabled: fc.boolean(),
  rolloutPercentage: fc.option(percentage, { nil: null }),
});

describe("engine properties", () => {
  test("evaluation is deterministic", () => {
    fc.assert(
      fc.property(flagDefinition, flagState, context, (def, state, ctx) => {
        const first = evaluate(compileFlag(def), def.key, compileState(state), ctx, AT);
        const compiled = compileFlag(def);
        const compiledState = compileState(state);
        expect(evaluate(compiled, def.key, compiledState, ctx, AT)).toEqual(first);
        expect(evaluate(compiled, def.key, compiledState, structuredClone(ctx), AT)).toEqual(first);
      }),
      { numRuns: 3000 },
    );
  });

  test("raising the rollout never excludes a user who was included", () => {
    fc.assert(
      fc.property(
        flagDefinition,
        fc.oneof(fc.string({ maxLength: 20 }), fc.integer()),
        percentage,
        percentage,
        (def, id, p, q) => {
          const flag = compileFlag(def);
          const lower = evaluate(flag, def.key, compileState({ enabled: true, rolloutPercentage: Math.min(p, q) }), { userId: id }, AT);
          const higher = evaluate(flag, def.key, compileState({ enabled: true, rolloutPercentage: Math.max(p, q) }), { userId: id }, AT);
          if (lower.enabled) expect(higher.enabled).toBe(true);
        },
      ),
      { numRuns: 3000 },
    );
  });

  const userIds = fc.sample(fc.oneof(fc.uuid(), fc.string({ minLength: 1, maxLength: 16 })), { numRuns: 100_000, seed: 20_240_601 });

  test("a rollout of p % includes p % of users, within 0.5 points", () => {
    for (const key of ["new-checkout", "search-v2"]) {
      const flag = compileFlag({ key, variants: [], rules: [] });
      for (const p of [1, 10, 25, 33.333, 50, 75, 99.5]) {
        const state = compileState({ enabled: true, rolloutPercentage: p });
        let included = 0;
        for (const id of userIds) if (evaluate(flag, key, state, { userId: id }, AT).enabled) included++;
        const share = (included / userIds.length) * 100;
        expect([key, p, Math.abs(share - p) <= 0.5]).toEqual([key, p, true]);
      }
    }
  });

  test("weighted variants split as their weights, within 0.5 points", () => {
    const splits = [
      [50, 50],
      [20, 30, 50],
      [33.333, 33.333, 33.334],
      [1, 9, 90],
    ];
    const state = compileState({ enabled: true, rolloutPercentage: null });
    for (const weights of splits) {
      const keys = weights.map((_, i) => `v${i}`);
      const flag = compileFlag({ key: "pricing-page", variants: weights.map((weight, i) => ({ key: keys[i]!, weight })), rules: [] });
      const counts = new Map<string | null, number>();
      for (const id of userIds) {
        const variant = evaluate(flag, "pricing-page", state, { userId: id }, AT).variant;
        counts.set(variant, (counts.get(variant) ?? 0) + 1);
      }
      expect([...counts.keys()].every((k) => k !== null && keys.includes(k))).toBe(true);
      weights.forEach((weight, i) => {
        const share = ((counts.get(keys[i]!) ?? 0) / userIds.length) * 100;
        expect([weights, i, Math.abs(share - weight) <= 0.5]).toEqual([weights, i, true]);
      });
    }
  });
});
