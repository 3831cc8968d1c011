/**
 * Unit tests of the evaluation engine and its hash (decisions §6, §7): operator semantics,
 * rule order, variants, every reason, overrides, userId handling, and the shared bucketing
 * vectors that SDKs evaluating locally must reproduce.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import {
  type CompiledState,
  DISABLED_STATE,
  bucketOf,
  compileFlag,
  compileState,
  decimalString,
  evaluate,
  variantBucketOf,
} from "../../src/evaluation/engine";
import { murmur3 } from "../../src/evaluation/murmur3";
import { OPERATORS, SEGMENT_OPERATORS, type Condition, type EvalContext, type EvaluationResult, type Operator, type Override, type Rule, type Variant } from "../../src/evaluation/types";

const AT = "2030-01-02T03:04:05.678Z";
const ON = compileState({ enabled: true, rolloutPercentage: null });
const rollout = (rolloutPercentage: number): CompiledState => compileState({ enabled: true, rolloutPercentage });

let ruleCount = 0;
function rule(conditions: Condition[], extra: Partial<Rule> = {}): Rule {
  ruleCount++;
  return { id: `rule_${ruleCount}`, name: `rule ${ruleCount}`, conditions, enabled: true, variant: null, ...extra };
}

function flag(rules: Rule[] = [], variants: Variant[] = [], key = "my-flag") {
  return compileFlag({ key, variants, rules });
}

function run(
  f: ReturnType<typeof flag> | undefined,
  context: EvalContext = {},
  state: CompiledState = ON,
  override?: Override,
) {
  return evaluate(f, f?.key ?? "my-flag", state, context, AT, override);
}

/** Whether a one-condition rule matches the context. */
function matches(operator: Operator, value: Condition["value"], context: EvalContext, attribute = "a"): boolean {
  const condition: Condition = value === undefined ? { attribute, operator } : { attribute, operator, value };
  return run(flag([rule([condition])]), context).reason === "TARGETING_RULE_MATCH";
}

/** MurmurHash3 x86 32 written out plainly with BigInt arithmetic: an independent reference. */
function referenceMurmur3(text: string, seed: number): number {
  const M = 0xffffffffn;
  const mul = (a: bigint, b: bigint) => (a * b) & M;
  const rotl = (x: bigint, r: bigint) => ((x << r) | (x >> (32n - r))) & M;
  const bytes = new TextEncoder().encode(text);
  let h = BigInt(seed >>> 0);
  const blocks = Math.floor(bytes.length / 4);
  for (let b = 0; b < blocks; b++) {
    let k = 0n;
    for (let j = 3; j >= 0; j--) k = (k << 8n) | BigInt(bytes[b * 4 + j]!);
    k = mul(rotl(mul(k, 0xcc9e2d51n), 15n), 0x1b873593n);
    h = (mul(rotl(h ^ k, 13n), 5n) + 0xe6546b64n) & M;
  }
  let k = 0n;
  for (let j = bytes.length - 1; j >= blocks * 4; j--) k = (k << 8n) | BigInt(bytes[j]!);
  if (bytes.length % 4 !== 0) h ^= mul(rotl(mul(k, 0xcc9e2d51n), 15n), 0x1b873593n);
  h ^= BigInt(bytes.length);
  h ^= h >> 16n;
  h = mul(h, 0x85ebca6bn);
  h ^= h >> 13n;
  h = mul(h, 0xc2b2ae35n);
  h ^= h >> 16n;
  return Number(h);
}

describe("murmur3", () => {
  test("published reference values", () => {
    expect(murmur3("")).toBe(0);
    expect(murmur3("", 1)).toBe(0x514e28b7);
    expect(murmur3("", 0xffffffff)).toBe(0x81f16f39);
    expect(murmur3("\0\0\0\0")).toBe(0x2362f9de);
    expect(murmur3("aaaa", 0x9747b28c)).toBe(0x5a97808a);
    expect(murmur3("abc", 0x9747b28c)).toBe(0xc84a62dd);
    expect(murmur3("Hello, world!", 0x9747b28c)).toBe(0x24884cba);
    expect(murmur3("The quick brown fox jumps over the lazy dog", 0x9747b28c)).toBe(0x2fa826cd);
    expect(murmur3("hello")).toBe(613153351);
  });

  test("agrees with a plain BigInt implementation on every tail length, ASCII or not", () => {
    const samples = ["", "a", "ab", "abc", "abcd", "abcde", "é", "éa", "日本", "ü-ñ-日本", "😀", "a😀b", "\u007f\u0080", "\ud800"];
    samples.push("é".repeat(1000), "x".repeat(1001) + "日");
    for (const s of samples) {
      for (const seed of [0, 1, 0x9747b28c]) expect(murmur3(s, seed)).toBe(referenceMurmur3(s, seed));
    }
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), fc.nat(), (s, seed) => {
        expect(murmur3(s, seed)).toBe(referenceMurmur3(s, seed));
      }),
      { numRuns: 500 },
    );
  });

  test("always an unsigned 32-bit integer", () => {
    for (const s of ["new-checkout:user-1", "x", "日本"]) {
      const h = murmur3(s);
      expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
    }
  });
});

interface Vector {
  flagKey: string;
  userId: string;
  hash: number;
  bucket: number;
  rolloutPercentage: number;
  included: boolean;
  variants: { key: string; weight: number }[] | null;
  variant: string | null;
}
/**
 * A copy of the contract's `bucketing-vectors.json` (../shared/spec/ beside the repository),
 * kept in the repository so that a clone tests alone; the test below checks that the copy still
 * equals the contract wherever the contract is at hand.
 */
const FIXTURE = join(import.meta.dir, "../fixtures/bucketing-vectors.json");
const CONTRACT = join(import.meta.dir, "../../../shared/spec/bucketing-vectors.json");
const vectors = (JSON.parse(readFileSync(FIXTURE, "utf8")) as { cases: Vector[] }).cases;

describe("bucketing vectors (the spec's bucketing-vectors.json)", () => {
  test.skipIf(!existsSync(CONTRACT))("the copy in test/fixtures equals the contract's file", () => {
    expect(readFileSync(FIXTURE, "utf8")).toBe(readFileSync(CONTRACT, "utf8"));
  });

  test("the file has cases, some with variants and one non-ASCII", () => {
    expect(vectors.length).toBeGreaterThan(0);
    expect(vectors.some((v) => v.variants !== null)).toBe(true);
    expect(vectors.some((v) => /[^\x00-\x7f]/.test(v.userId))).toBe(true);
  });

  for (const v of vectors) {
    test(`${v.flagKey} / ${v.userId}`, () => {
      expect(murmur3(`${v.flagKey}:${v.userId}`)).toBe(v.hash);
      expect(bucketOf(v.flagKey, v.userId)).toBe(v.bucket);
      const f = flag([], v.variants ?? [], v.flagKey);
      const result = run(f, { userId: v.userId }, rollout(v.rolloutPercentage));
      expect(result.enabled).toBe(v.included);
      expect(result.reason).toBe(v.included ? "PERCENTAGE_ROLLOUT" : "PERCENTAGE_ROLLOUT_EXCLUDED");
      expect(result.variant).toBe(v.variant);
      if (v.variants !== null) {
        // The variant is picked from its own hash, not the rollout bucket.
        const h2 = variantBucketOf(v.flagKey, v.userId);
        let sum = 0;
        const expected = v.variants.find((x) => (sum += Math.round(x.weight * 1000)) > h2)?.key;
        expect(expected).toBe(v.variant ?? undefined);
        expect(run(f, { userId: v.userId }).variant).toBe(v.variant);
      }
    });
  }
});

describe("operators", () => {
  test("equals: strict, of a string, a number or a boolean", () => {
    expect(matches("equals", "x", { a: "x" })).toBe(true);
    expect(matches("equals", "x", { a: "X" })).toBe(false);
    expect(matches("equals", "5", { a: 5 })).toBe(false);
    expect(matches("equals", 5, { a: 5 })).toBe(true);
    expect(matches("equals", 5, { a: "5" })).toBe(false);
    expect(matches("equals", 0, { a: false })).toBe(false);
    expect(matches("equals", 1.5, { a: 1.5 })).toBe(true);
    expect(matches("equals", true, { a: true })).toBe(true);
    expect(matches("equals", true, { a: "true" })).toBe(false);
    expect(matches("equals", true, { a: 1 })).toBe(false);
    expect(matches("equals", false, { a: false })).toBe(true);
    expect(matches("equals", "x", { a: ["x"] })).toBe(false);
  });

  test("not_equals: a present value that differs, without coercion", () => {
    expect(matches("not_equals", "x", { a: "y" })).toBe(true);
    expect(matches("not_equals", "x", { a: "x" })).toBe(false);
    expect(matches("not_equals", "5", { a: 5 })).toBe(true);
    expect(matches("not_equals", 5, { a: "5" })).toBe(true);
    expect(matches("not_equals", 5, { a: 5 })).toBe(false);
    expect(matches("not_equals", 5, { a: 6 })).toBe(true);
    expect(matches("not_equals", "x", { a: false })).toBe(true);
    // An array is a present value, and never === a scalar.
    expect(matches("not_equals", "x", { a: ["x"] })).toBe(true);
  });

  test("in: a scalar attribute found in the list, by type", () => {
    const list = ["a", 1, true];
    expect(matches("in", list, { a: "a" })).toBe(true);
    expect(matches("in", list, { a: 1 })).toBe(true);
    expect(matches("in", list, { a: true })).toBe(true);
    expect(matches("in", list, { a: "1" })).toBe(false);
    expect(matches("in", list, { a: "true" })).toBe(false);
    expect(matches("in", list, { a: 2 })).toBe(false);
    expect(matches("in", list, { a: false })).toBe(false);
    expect(matches("in", list, { a: ["a"] })).toBe(false);
    expect(matches("in", [], { a: "a" })).toBe(false);
  });

  test("not_in: a present attribute absent from the list (an array never is in it)", () => {
    const list = ["a", 1, true];
    expect(matches("not_in", list, { a: "b" })).toBe(true);
    expect(matches("not_in", list, { a: "1" })).toBe(true);
    expect(matches("not_in", list, { a: 2 })).toBe(true);
    expect(matches("not_in", list, { a: false })).toBe(true);
    expect(matches("not_in", list, { a: "a" })).toBe(false);
    expect(matches("not_in", list, { a: 1 })).toBe(false);
    expect(matches("not_in", list, { a: true })).toBe(false);
    expect(matches("not_in", list, { a: ["b"] })).toBe(true);
    expect(matches("not_in", list, { a: ["a"] })).toBe(true);
    expect(matches("not_in", [], { a: "a" })).toBe(true);
    expect(matches("not_in", list, { a: null })).toBe(false);
    expect(matches("not_in", list, {})).toBe(false);
  });

  test("on a present attribute, not_equals and not_in are the negations of equals and in; on a missing one all four are false", () => {
    const present: EvalContext["a"][] = ["a", "b", 1, 2, 0, true, false, [], ["a"], [1, "b"]];
    for (const a of present) {
      expect({ a, not_equals: matches("not_equals", "a", { a }) }).toEqual({ a, not_equals: !matches("equals", "a", { a }) });
      expect({ a, not_in: matches("not_in", ["a", 1, true], { a }) }).toEqual({ a, not_in: !matches("in", ["a", 1, true], { a }) });
    }
    for (const context of [{}, { a: null }] as EvalContext[]) {
      for (const operator of ["equals", "not_equals"] as const) expect(matches(operator, "a", context)).toBe(false);
      for (const operator of ["in", "not_in"] as const) expect(matches(operator, ["a"], context)).toBe(false);
    }
  });

  test("contains: substring of a string, element of an array", () => {
    expect(matches("contains", "lo w", { a: "hello world" })).toBe(true);
    expect(matches("contains", "", { a: "anything" })).toBe(true);
    expect(matches("contains", "xyz", { a: "hello" })).toBe(false);
    expect(matches("contains", "Hello", { a: "hello" })).toBe(false);
    expect(matches("contains", "staff", { a: ["users", "staff"] })).toBe(true);
    expect(matches("contains", "staff", { a: ["staffers"] })).toBe(false);
    expect(matches("contains", "1", { a: [1, 2] })).toBe(false);
    expect(matches("contains", "2", { a: 123 })).toBe(false);
    expect(matches("contains", "tr", { a: true })).toBe(false);
    expect(matches("contains", "x", { a: [] })).toBe(false);
  });

  test("starts_with: a string attribute with that prefix", () => {
    expect(matches("starts_with", "he", { a: "hello" })).toBe(true);
    expect(matches("starts_with", "hello", { a: "hello" })).toBe(true);
    expect(matches("starts_with", "lo", { a: "hello" })).toBe(false);
    expect(matches("starts_with", "He", { a: "hello" })).toBe(false);
    expect(matches("starts_with", "1", { a: 12 })).toBe(false);
    expect(matches("starts_with", "he", { a: ["hello"] })).toBe(false);
  });

  test("greater_than and less_than: numbers only", () => {
    expect(matches("greater_than", 5, { a: 10 })).toBe(true);
    expect(matches("greater_than", 5, { a: 5 })).toBe(false);
    expect(matches("greater_than", 5, { a: 5.001 })).toBe(true);
    expect(matches("greater_than", -1, { a: 0 })).toBe(true);
    expect(matches("greater_than", 5, { a: "10" })).toBe(false);
    expect(matches("greater_than", 0, { a: true })).toBe(false);
    expect(matches("greater_than", 5, { a: [10] })).toBe(false);
    expect(matches("less_than", 5, { a: 3 })).toBe(true);
    expect(matches("less_than", 5, { a: 5 })).toBe(false);
    expect(matches("less_than", 5, { a: 4.999 })).toBe(true);
    expect(matches("less_than", 5, { a: "3" })).toBe(false);
    expect(matches("less_than", 1, { a: false })).toBe(false);
  });

  test("is_true and is_false: exactly true / false; the value is ignored", () => {
    for (const value of [undefined, true, false]) {
      expect(matches("is_true", value, { a: true })).toBe(true);
      expect(matches("is_true", value, { a: false })).toBe(false);
      expect(matches("is_true", value, { a: "true" })).toBe(false);
      expect(matches("is_true", value, { a: 1 })).toBe(false);
      expect(matches("is_true", value, { a: [true] })).toBe(false);
      expect(matches("is_false", value, { a: false })).toBe(true);
      expect(matches("is_false", value, { a: true })).toBe(false);
      expect(matches("is_false", value, { a: 0 })).toBe(false);
      expect(matches("is_false", value, { a: "" })).toBe(false);
      expect(matches("is_false", value, { a: "false" })).toBe(false);
    }
  });

  const EVERY_OPERATOR: [Operator, Condition["value"]][] = [
    ["equals", "x"],
    ["not_equals", "x"],
    ["not_equals", 5],
    ["in", ["x", 1]],
    ["not_in", ["x", 1]],
    ["contains", "x"],
    ["starts_with", "x"],
    ["greater_than", 0],
    ["less_than", 0],
    ["is_true", undefined],
    ["is_false", undefined],
    ["greater_than_or_equal", 0],
    ["less_than_or_equal", 0],
    ["semver_equals", "1.2.3"],
    ["semver_greater_than", "0.0.0"],
    ["semver_less_than", "99.0.0"],
    ["matches", ".*"],
    ["before", "2999-01-01T00:00:00Z"],
    ["after", "1970-01-01T00:00:00Z"],
  ];

  test("EVERY_OPERATOR names every operator but the segment ones (they read membership, not the attribute: describe segments)", () => {
    expect(new Set(EVERY_OPERATOR.map(([op]) => op))).toEqual(new Set(OPERATORS.filter((op) => !SEGMENT_OPERATORS.has(op))));
  });

  test("a missing attribute fails every operator, not_equals and not_in included", () => {
    for (const [operator, value] of EVERY_OPERATOR) {
      expect([operator, matches(operator, value, {})]).toEqual([operator, false]);
      expect([operator, matches(operator, value, { b: "x", other: 1 })]).toEqual([operator, false]);
    }
  });

  test("a null attribute counts as missing", () => {
    for (const [operator, value] of EVERY_OPERATOR) {
      expect([operator, matches(operator, value, { a: null })]).toEqual([operator, false]);
    }
  });

  test("Object.prototype members are not attributes", () => {
    for (const attribute of ["toString", "__proto__", "constructor", "hasOwnProperty"]) {
      for (const [operator, value] of EVERY_OPERATOR) {
        expect([attribute, operator, matches(operator, value, {}, attribute)]).toEqual([attribute, operator, false]);
      }
    }
  });

  test("userId is an attribute like any other", () => {
    expect(matches("equals", "u1", { userId: "u1" }, "userId")).toBe(true);
    expect(matches("starts_with", "u", { userId: "u1" }, "userId")).toBe(true);
    expect(matches("equals", "42", { userId: 42 }, "userId")).toBe(false);
  });
});

describe("rules", () => {
  test("conditions of a rule are AND-ed", () => {
    const f = flag([
      rule([
        { attribute: "country", operator: "equals", value: "FR" },
        { attribute: "age", operator: "greater_than", value: 17 },
      ]),
    ]);
    expect(run(f, { country: "FR", age: 30 }).reason).toBe("TARGETING_RULE_MATCH");
    expect(run(f, { country: "FR", age: 10 }).reason).toBe("FLAG_ENABLED");
    expect(run(f, { country: "DE", age: 30 }).reason).toBe("FLAG_ENABLED");
    expect(run(f, { country: "FR" }).reason).toBe("FLAG_ENABLED");
  });

  test("a rule without conditions matches everyone", () => {
    const r = rule([]);
    const f = flag([r]);
    for (const context of [{}, { userId: "u" }, { x: null }] as EvalContext[]) {
      expect(run(f, context)).toEqual({
        flagKey: "my-flag",
        enabled: true,
        variant: null,
        reason: "TARGETING_RULE_MATCH",
        ruleId: r.id,
        evaluatedAt: AT,
      });
    }
  });

  test("disabled rules are skipped", () => {
    const off = rule([], { enabled: false });
    const on = rule([{ attribute: "a", operator: "equals", value: 1 }]);
    const f = flag([off, on]);
    expect(f.rules.map((r) => r.id)).toEqual([on.id]);
    expect(run(f, { a: 1 }).ruleId).toBe(on.id);
    expect(run(f, { a: 2 }).reason).toBe("FLAG_ENABLED");
  });

  test("the first matching rule wins", () => {
    const first = rule([{ attribute: "a", operator: "greater_than", value: 10 }]);
    const second = rule([{ attribute: "a", operator: "greater_than", value: 0 }]);
    const third = rule([]);
    const f = flag([first, second, third]);
    expect(run(f, { a: 20 }).ruleId).toBe(first.id);
    expect(run(f, { a: 5 }).ruleId).toBe(second.id);
    expect(run(f, { a: -5 }).ruleId).toBe(third.id);
  });

  test("a rule match skips the rollout, even for an excluded user", () => {
    const r = rule([{ attribute: "vip", operator: "is_true" }]);
    const f = flag([r]);
    expect(run(f, { userId: "u", vip: true }, rollout(0))).toMatchObject({
      enabled: true,
      reason: "TARGETING_RULE_MATCH",
      ruleId: r.id,
    });
    expect(run(f, { userId: "u" }, rollout(0)).reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
  });
});

describe("variants", () => {
  const WEIGHTED: Variant[] = [
    { key: "red", weight: 20 },
    { key: "green", weight: 30 },
    { key: "blue", weight: 50 },
  ];
  const UNWEIGHTED: Variant[] = [{ key: "on", name: "On" }, { key: "off" }];
  const pickFor = (userId: string) => {
    const h2 = variantBucketOf("my-flag", userId);
    return h2 < 20000 ? "red" : h2 < 50000 ? "green" : "blue";
  };

  test("compiles weights to running sums of thousandths", () => {
    expect(flag([], WEIGHTED).cumulativeWeights).toEqual([20000, 50000, 100000]);
    expect(flag([], [{ key: "a", weight: 33.333 }, { key: "b", weight: 33.333 }, { key: "c", weight: 33.334 }]).cumulativeWeights).toEqual([
      33333, 66666, 100000,
    ]);
    expect(flag([], UNWEIGHTED).cumulativeWeights).toBeNull();
    expect(flag().cumulativeWeights).toBeNull();
  });

  test("a bucket equal to a running sum belongs to the next variant", () => {
    expect(variantBucketOf("my-flag", "u47706")).toBe(50000);
    expect(run(flag([], WEIGHTED), { userId: "u47706" }).variant).toBe("blue");
  });

  test("a matched rule serves its variant", () => {
    const r = rule([], { variant: "blue" });
    for (let i = 0; i < 20; i++) expect(run(flag([r], WEIGHTED), { userId: `u${i}` }).variant).toBe("blue");
  });

  test("a matched rule without a variant picks by weight", () => {
    const f = flag([rule([])], WEIGHTED);
    const seen = new Set<string | null>();
    for (let i = 0; i < 200; i++) {
      const result = run(f, { userId: `u${i}` });
      expect(result.variant).toBe(pickFor(`u${i}`));
      seen.add(result.variant);
    }
    expect(seen).toEqual(new Set(["red", "green", "blue"]));
  });

  test("PERCENTAGE_ROLLOUT and FLAG_ENABLED pick by weight", () => {
    const f = flag([], WEIGHTED);
    for (let i = 0; i < 50; i++) {
      expect(run(f, { userId: `u${i}` }).variant).toBe(pickFor(`u${i}`));
      expect(run(f, { userId: `u${i}` }, rollout(100))).toMatchObject({ reason: "PERCENTAGE_ROLLOUT", variant: pickFor(`u${i}`) });
    }
  });

  test("unweighted variants: the first one", () => {
    const f = flag([rule([{ attribute: "a", operator: "equals", value: 1 }])], UNWEIGHTED);
    for (let i = 0; i < 20; i++) {
      expect(run(f, { userId: `u${i}`, a: 1 }).variant).toBe("on");
      expect(run(f, { userId: `u${i}` }).variant).toBe("on");
      expect(run(f, { userId: `u${i}` }, rollout(100)).variant).toBe("on");
    }
  });

  test("without a usable userId the weighted pick falls back to the first variant", () => {
    const f = flag([rule([{ attribute: "a", operator: "equals", value: 1 }])], WEIGHTED);
    for (const context of [{}, { userId: null }, { userId: "" }, { userId: true }, { userId: ["u1"] }] as EvalContext[]) {
      expect(run(f, context).variant).toBe("red");
      expect(run(f, { ...context, a: 1 }).variant).toBe("red");
      expect(run(f, context, rollout(100)).variant).toBe("red");
    }
  });

  test("disabled, excluded and not-found results have no variant", () => {
    const f = flag([], WEIGHTED);
    expect(run(f, { userId: "u" }, DISABLED_STATE).variant).toBeNull();
    expect(run(f, { userId: "u" }, rollout(0)).variant).toBeNull();
    expect(evaluate(undefined, "nope", ON, { userId: "u" }, AT).variant).toBeNull();
  });

  test("boolean flags never have a variant, even when a rule names one", () => {
    const f = flag([rule([], { variant: "ghost" })]);
    expect(run(f, { userId: "u" })).toMatchObject({ reason: "TARGETING_RULE_MATCH", variant: null });
    expect(run(flag(), { userId: "u" }, rollout(100))).toMatchObject({ reason: "PERCENTAGE_ROLLOUT", variant: null });
    expect(run(flag(), { userId: "u" })).toMatchObject({ reason: "FLAG_ENABLED", variant: null });
  });
});

describe("reasons", () => {
  const r = rule([{ attribute: "plan", operator: "equals", value: "pro" }]);
  const f = flag([r]);
  const base = { flagKey: "my-flag", evaluatedAt: AT };

  test("FLAG_DISABLED: disabled in the environment, checked before the rules", () => {
    expect(run(f, { plan: "pro" }, compileState({ enabled: false, rolloutPercentage: 100 }))).toEqual({
      ...base,
      enabled: false,
      variant: null,
      reason: "FLAG_DISABLED",
      ruleId: null,
    });
    expect(run(f, { plan: "pro" }, DISABLED_STATE).reason).toBe("FLAG_DISABLED");
  });

  test("TARGETING_RULE_MATCH", () => {
    expect(run(f, { plan: "pro" })).toEqual({ ...base, enabled: true, variant: null, reason: "TARGETING_RULE_MATCH", ruleId: r.id });
  });

  test("PERCENTAGE_ROLLOUT and PERCENTAGE_ROLLOUT_EXCLUDED", () => {
    // new-checkout / user-1 is bucket 40631 (vectors).
    const g = flag([], [], "new-checkout");
    expect(evaluate(g, "new-checkout", rollout(40.632), { userId: "user-1" }, AT)).toEqual({
      flagKey: "new-checkout",
      enabled: true,
      variant: null,
      reason: "PERCENTAGE_ROLLOUT",
      ruleId: null,
      evaluatedAt: AT,
    });
    expect(evaluate(g, "new-checkout", rollout(40.631), { userId: "user-1" }, AT)).toEqual({
      flagKey: "new-checkout",
      enabled: false,
      variant: null,
      reason: "PERCENTAGE_ROLLOUT_EXCLUDED",
      ruleId: null,
      evaluatedAt: AT,
    });
  });

  test("FLAG_ENABLED: enabled, no rule matched, no rollout", () => {
    expect(run(f, { plan: "free" })).toEqual({ ...base, enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null });
    expect(run(flag(), {})).toEqual({ ...base, enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null });
  });

  test("FLAG_NOT_FOUND: whatever the state", () => {
    for (const state of [ON, DISABLED_STATE, rollout(50)]) {
      expect(evaluate(undefined, "ghost", state, { userId: "u" }, AT)).toEqual({
        flagKey: "ghost",
        enabled: false,
        variant: null,
        reason: "FLAG_NOT_FOUND",
        ruleId: null,
        evaluatedAt: AT,
      });
    }
  });
});

describe("overrides", () => {
  const f = flag([rule([])], [{ key: "a" }, { key: "b" }]);
  const expected = (enabled: boolean, variant: string | null, flagKey = "my-flag"): EvaluationResult => ({
    flagKey,
    enabled,
    variant,
    reason: "TEST_OVERRIDE",
    ruleId: null,
    evaluatedAt: AT,
  });

  test("a boolean sets enabled, with no variant, whatever the state", () => {
    for (const state of [ON, DISABLED_STATE, rollout(0)]) {
      expect(run(f, { userId: "u" }, state, true)).toEqual(expected(true, null));
      expect(run(f, { userId: "u" }, state, false)).toEqual(expected(false, null));
    }
  });

  test("a string serves that variant, enabled", () => {
    expect(run(f, {}, DISABLED_STATE, "b")).toEqual(expected(true, "b"));
    expect(run(flag(), {}, ON, "anything")).toEqual(expected(true, "anything"));
  });

  test("an override wins over FLAG_NOT_FOUND", () => {
    expect(evaluate(undefined, "ghost", DISABLED_STATE, {}, AT, true)).toEqual(expected(true, null, "ghost"));
    expect(evaluate(undefined, "ghost", DISABLED_STATE, {}, AT, false)).toEqual(expected(false, null, "ghost"));
    expect(evaluate(undefined, "ghost", DISABLED_STATE, {}, AT, "v")).toEqual(expected(true, "v", "ghost"));
  });
});

describe("state and userId", () => {
  test("compileState", () => {
    expect(compileState(null)).toBe(DISABLED_STATE);
    expect(DISABLED_STATE).toEqual({ enabled: false, threshold: null });
    expect(compileState({ enabled: true, rolloutPercentage: null })).toEqual({ enabled: true, threshold: null });
    expect(compileState({ enabled: true, rolloutPercentage: 33.5 }).threshold).toBe(33500);
    expect(compileState({ enabled: true, rolloutPercentage: 0.001 }).threshold).toBe(1);
    expect(compileState({ enabled: true, rolloutPercentage: 12.345 }).threshold).toBe(12345);
    expect(compileState({ enabled: false, rolloutPercentage: 100 })).toEqual({ enabled: false, threshold: 100000 });
  });

  test("included when the bucket is below the threshold, at both ends of the range", () => {
    expect(bucketOf("my-flag", "u217836")).toBe(0);
    expect(bucketOf("my-flag", "u59712")).toBe(99999);
    const f = flag();
    expect(run(f, { userId: "u217836" }, rollout(0)).enabled).toBe(false);
    expect(run(f, { userId: "u217836" }, rollout(0.001)).enabled).toBe(true);
    expect(run(f, { userId: "u59712" }, rollout(99.999)).enabled).toBe(false);
    expect(run(f, { userId: "u59712" }, rollout(100)).enabled).toBe(true);
  });

  test("a numeric userId buckets as its decimal string", () => {
    // dark-mode / "42" is bucket 78303 (vectors).
    const f = flag([], [{ key: "x", weight: 50 }, { key: "y", weight: 50 }], "dark-mode");
    for (const p of [10, 78.303, 78.304, 90]) {
      expect(evaluate(f, "dark-mode", rollout(p), { userId: 42 }, AT)).toEqual(
        evaluate(f, "dark-mode", rollout(p), { userId: "42" }, AT),
      );
    }
    expect(evaluate(f, "dark-mode", rollout(78.303), { userId: 42 }, AT).enabled).toBe(false);
    expect(evaluate(f, "dark-mode", rollout(78.304), { userId: 42 }, AT).enabled).toBe(true);
    for (const n of [0, -7, 1.5, 123456789012]) {
      expect(run(f, { userId: n }, rollout(50))).toEqual(run(f, { userId: String(n) }, rollout(50)));
    }
    for (const p of [0, 25, 50, 75, 99.999]) {
      expect(run(f, { userId: 1e21 }, rollout(p))).toEqual(run(f, { userId: "1000000000000000000000" }, rollout(p)));
    }
  });

  test("decimal strings never use an exponent", () => {
    const cases: [number, string][] = [
      [42, "42"], [-0, "0"], [1.5, "1.5"], [0.000001, "0.000001"], [1e21, "1000000000000000000000"],
      [-2.5e22, "-25000000000000000000000"], [1e-7, "0.0000001"], [-1.25e-8, "-0.0000000125"], [123e-20, "0.00000000000000000123"],
    ];
    for (const [n, s] of cases) expect(decimalString(n)).toBe(s);
    fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
      const s = decimalString(n);
      return !/e/i.test(s) && Number(s) === n;
    }));
  });

  test("without a usable userId a rollout of 100 includes and anything lower excludes", () => {
    const f = flag();
    for (const context of [{}, { userId: null }, { userId: "" }, { userId: true }, { userId: false }, { userId: ["u1"] }] as EvalContext[]) {
      expect(run(f, context, rollout(100)).reason).toBe("PERCENTAGE_ROLLOUT");
      expect(run(f, context, rollout(100)).enabled).toBe(true);
      for (const p of [99.999, 50, 0]) {
        expect(run(f, context, rollout(p))).toMatchObject({ enabled: false, reason: "PERCENTAGE_ROLLOUT_EXCLUDED" });
      }
    }
  });

  test("rollouts of 0 and 100 exclude and include everyone", () => {
    const f = flag();
    for (let i = 0; i < 200; i++) {
      expect(run(f, { userId: `u${i}` }, rollout(0)).enabled).toBe(false);
      expect(run(f, { userId: `u${i}` }, rollout(100)).enabled).toBe(true);
    }
  });

  test("the result carries the caller's flagKey and evaluatedAt", () => {
    const result = evaluate(flag(), "as-asked", ON, {}, "2000-01-01T00:00:00.000Z");
    expect(result.flagKey).toBe("as-asked");
    expect(result.evaluatedAt).toBe("2000-01-01T00:00:00.000Z");
  });
});
