/**
 * Unit tests of the richer operators and of `bucketBy` (issue 31, docs/targeting.md):
 * greater_than_or_equal, less_than_or_equal, semver_*, matches (RE2: linear, capped input),
 * before/after, and bucketing by an attribute other than userId.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { compileFlag, compileState, evaluate, MATCHES_MAX_INPUT, operandProblem, parseInstant, type CompiledState } from "../../src/evaluation/engine";
import { isResolutionError, resolution } from "../../src/evaluation/openfeature";
import type { Condition, EvalContext, FlagDefinition, Operator } from "../../src/evaluation/types";

const AT = "2030-01-02T03:04:05.678Z";
const ON = compileState({ enabled: true, rolloutPercentage: null });

function matches(operator: Operator, value: Condition["value"], context: EvalContext, attribute = "a"): boolean {
  const f = compileFlag({ key: "f", variants: [], rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [{ attribute, operator, value }] }] });
  return evaluate(f, "f", ON, context, AT).reason === "TARGETING_RULE_MATCH";
}

describe("greater_than_or_equal, less_than_or_equal", () => {
  test("numbers, bounds included", () => {
    expect(matches("greater_than_or_equal", 18, { a: 18 })).toBe(true);
    expect(matches("greater_than_or_equal", 18, { a: 18.5 })).toBe(true);
    expect(matches("greater_than_or_equal", 18, { a: 17.99 })).toBe(false);
    expect(matches("less_than_or_equal", 18, { a: 18 })).toBe(true);
    expect(matches("less_than_or_equal", 18, { a: -1 })).toBe(true);
    expect(matches("less_than_or_equal", 18, { a: 19 })).toBe(false);
  });
  test("missing or of another type: false", () => {
    for (const op of ["greater_than_or_equal", "less_than_or_equal"] as const) {
      for (const a of [undefined, null, "18", true, [18]]) expect([op, a, matches(op, 18, a === undefined ? {} : { a } as EvalContext)]).toEqual([op, a, false]);
    }
  });
});

describe("semver_equals, semver_greater_than, semver_less_than", () => {
  test("semantic version order, prereleases included", () => {
    expect(matches("semver_equals", "1.2.3", { a: "1.2.3" })).toBe(true);
    expect(matches("semver_equals", "1.2.3", { a: "v1.2.3" })).toBe(true);
    expect(matches("semver_equals", "1.2.3", { a: "1.2.3+build.7" })).toBe(true); // build metadata does not order
    expect(matches("semver_equals", "1.2.3", { a: "1.2.4" })).toBe(false);
    expect(matches("semver_greater_than", "1.2.3", { a: "1.10.0" })).toBe(true); // not text order
    expect(matches("semver_greater_than", "1.2.3", { a: "1.2.3" })).toBe(false);
    expect(matches("semver_greater_than", "2.0.0-rc.1", { a: "2.0.0" })).toBe(true);
    expect(matches("semver_less_than", "2.0.0", { a: "2.0.0-rc.1" })).toBe(true);
    expect(matches("semver_less_than", "2.0.0", { a: "1.99.99" })).toBe(true);
    expect(matches("semver_less_than", "2.0.0", { a: "2.0.0" })).toBe(false);
  });
  test("an attribute that is not a valid semantic version, missing or not a string: false", () => {
    for (const op of ["semver_equals", "semver_greater_than", "semver_less_than"] as const) {
      for (const a of ["1.2", "banana", "", "1.2.3.4", 123, true, ["1.2.3"], null]) expect([op, a, matches(op, "1.2.3", { a })]).toEqual([op, a, false]);
      expect(matches(op, "1.2.3", {})).toBe(false);
    }
  });
  test("a stored operand that is not a version never matches (no throw)", () => {
    expect(matches("semver_equals", "nope", { a: "1.2.3" })).toBe(false);
    expect(matches("semver_less_than", 5 as never, { a: "1.2.3" })).toBe(false);
  });
});

describe("matches (RE2)", () => {
  test("searches anywhere unless anchored", () => {
    expect(matches("matches", "@example\\.com$", { a: "ann@example.com" })).toBe(true);
    expect(matches("matches", "@example\\.com$", { a: "ann@example.com.evil" })).toBe(false);
    expect(matches("matches", "pro", { a: "a-pro-plan" })).toBe(true);
    expect(matches("matches", "^pro$", { a: "a-pro-plan" })).toBe(false);
    expect(matches("matches", "(?i)^PRO$", { a: "pro" })).toBe(true);
    expect(matches("matches", "^\\p{Lu}", { a: "Ünïcode" })).toBe(true);
  });
  test("missing, not a string (arrays and numbers included): false", () => {
    for (const a of [5, true, ["pro"], null]) expect(matches("matches", "pro|5|true", { a })).toBe(false);
    expect(matches("matches", ".*", {})).toBe(false);
  });
  test(`an attribute longer than ${MATCHES_MAX_INPUT} characters never matches`, () => {
    expect(matches("matches", "^a", { a: "a".repeat(MATCHES_MAX_INPUT) })).toBe(true);
    expect(matches("matches", "^a", { a: "a".repeat(MATCHES_MAX_INPUT + 1) })).toBe(false);
  });
  test("a classic ReDoS pattern is harmless: RE2 is linear", () => {
    // A backtracking engine (JavaScript's own RegExp) takes about 2^30 steps to fail here.
    const f = compileFlag({ key: "f", variants: [], rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [{ attribute: "a", operator: "matches", value: "(a+)+$" }] }] });
    const context = { a: `${"a".repeat(30)}!` };
    expect(evaluate(f, "f", ON, context, AT).reason).toBe("FLAG_ENABLED"); // no match, and a first run
    const n = 1000;
    const started = performance.now();
    for (let i = 0; i < n; i++) evaluate(f, "f", ON, context, AT);
    const perEvaluation = (performance.now() - started) / n;
    expect(perEvaluation).toBeLessThan(0.5);
    // Linear: 30 times the input, in the same order of time per character.
    const long = { a: `${"a".repeat(MATCHES_MAX_INPUT - 1)}!` };
    const t2 = performance.now();
    for (let i = 0; i < 100; i++) evaluate(f, "f", ON, long, AT);
    expect((performance.now() - t2) / 100).toBeLessThan(5);
  });
  test("a pattern that does not compile as stored never matches (no throw)", () => {
    expect(matches("matches", "(a", { a: "(a" })).toBe(false);
  });
});

describe("before, after", () => {
  const T = "2026-01-01T00:00:00Z";
  const ms = Date.parse(T);
  test("ISO strings and epoch milliseconds, bounds excluded", () => {
    expect(matches("before", T, { a: "2025-12-31T23:59:59.999Z" })).toBe(true);
    expect(matches("before", T, { a: T })).toBe(false);
    expect(matches("before", T, { a: ms - 1 })).toBe(true);
    expect(matches("before", T, { a: ms })).toBe(false);
    expect(matches("after", T, { a: "2026-01-01T00:00:01+00:00" })).toBe(true);
    expect(matches("after", T, { a: "2026-01-01T00:30:00+01:00" })).toBe(false); // 23:30 UTC the day before
    expect(matches("after", T, { a: ms + 1 })).toBe(true);
    expect(matches("after", "2026-01-01T01:00:00+01:00", { a: ms + 1 })).toBe(true); // the same instant as T
  });
  test("an invalid time, missing or another type: false", () => {
    for (const op of ["before", "after"] as const) {
      for (const a of ["yesterday", "", true, [ms], null, Number.NaN]) expect([op, a, matches(op, T, { a })]).toEqual([op, a, false]);
      expect(matches(op, T, {})).toBe(false);
    }
  });
  test("parseInstant: a zone is required, days must exist", () => {
    expect(parseInstant(T)).toBe(ms);
    expect(parseInstant("2026-01-01T01:00:00.5+01:00")).toBe(ms + 500);
    expect(parseInstant("2026-01-01T00:00Z")).toBe(ms);
    for (const bad of ["2026-01-01", "2026-01-01T00:00:00", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01 00:00:00Z", "1767225600000"]) {
      expect([bad, parseInstant(bad)]).toEqual([bad, null]);
    }
  });
});

describe("operandProblem: the write-time check", () => {
  test("says why, or null", () => {
    expect(operandProblem("semver_equals", "1.2.3")).toBeNull();
    expect(operandProblem("semver_greater_than", "1.2")).toContain("semantic version");
    expect(operandProblem("matches", "^a+$")).toBeNull();
    expect(operandProblem("matches", "(a")).toContain("missing closing )");
    expect(operandProblem("matches", "(?<=a)b")).toContain("RE2");
    expect(operandProblem("before", "2026-01-01T00:00:00Z")).toBeNull();
    expect(operandProblem("after", "2026-01-01")).toContain("ISO 8601");
    expect(operandProblem("equals", "(a")).toBeNull();
  });
});

describe("bucketBy", () => {
  const rollout = (p: number): CompiledState => compileState({ enabled: true, rolloutPercentage: p });
  const def = (bucketBy?: string): FlagDefinition => ({ key: "new-checkout", variants: [{ key: "a", weight: 50 }, { key: "b", weight: 50 }], rules: [], ...(bucketBy ? { bucketBy } : {}) });

  test("two users of one account get the same answer; the hash is flagKey:value", () => {
    const f = compileFlag(def("accountId"));
    const byUser = compileFlag(def());
    const answers = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const account = `acct-${i}`;
      const one = evaluate(f, f.key, rollout(50), { userId: `u-${i}-1`, accountId: account }, AT);
      const two = evaluate(f, f.key, rollout(50), { userId: `u-${i}-2`, accountId: account }, AT);
      expect({ ...two, evaluatedAt: "" }).toEqual({ ...one, evaluatedAt: "" });
      // The same as a flag bucketed by userId given the account as its userId.
      expect(evaluate(byUser, f.key, rollout(50), { userId: account }, AT)).toEqual(one);
      answers.add(`${one.enabled}:${one.variant}`);
    }
    expect(answers.size).toBe(3); // excluded, a, b
  });

  test("a number buckets as its decimal string; a missing or unusable attribute as a missing userId", () => {
    const f = compileFlag(def("accountId"));
    const byUser = compileFlag(def());
    expect(evaluate(f, f.key, rollout(50), { accountId: 1e21 }, AT)).toEqual(evaluate(byUser, f.key, rollout(50), { userId: "1000000000000000000000" }, AT));
    for (const accountId of [undefined, null, "", true, ["x"]]) {
      const context = (accountId === undefined ? { userId: "u1" } : { userId: "u1", accountId }) as EvalContext;
      expect(evaluate(f, f.key, rollout(99.999), context, AT).reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
      expect(evaluate(f, f.key, rollout(100), context, AT)).toMatchObject({ enabled: true, variant: "a" });
      expect(evaluate(f, f.key, ON, context, AT).variant).toBe("a");
    }
  });

  test("the user given apart (the local provider's targeting key) does not stand for another attribute", () => {
    const f = compileFlag(def("accountId"));
    const context = { accountId: "acct-7" };
    expect(evaluate(f, f.key, rollout(50), context, AT, undefined, "someone")).toEqual(evaluate(f, f.key, rollout(50), context, AT));
    expect(evaluate(f, f.key, rollout(50), {}, AT, undefined, "someone").reason).toBe("PERCENTAGE_ROLLOUT_EXCLUDED");
  });

  test("bucketBy userId is the default: the bucketing vectors hold", () => {
    const { cases } = JSON.parse(readFileSync(join(import.meta.dir, "..", "fixtures", "bucketing-vectors.json"), "utf8")) as {
      cases: { flagKey: string; userId: string; rolloutPercentage: number; included: boolean; variants: { key: string; weight: number }[] | null; variant: string | null }[];
    };
    for (const v of cases) {
      for (const bucketBy of [undefined, "userId"]) {
        const f = compileFlag({ key: v.flagKey, variants: v.variants ?? [], rules: [], bucketBy });
        const r = evaluate(f, v.flagKey, rollout(v.rolloutPercentage), { userId: v.userId }, AT);
        expect({ v, enabled: r.enabled, variant: r.variant }).toEqual({ v, enabled: v.included, variant: v.variant });
      }
    }
  });

  test("OpenFeature: TARGETING_KEY_MISSING only for a flag bucketed by userId", () => {
    const byAccount = compileFlag(def("accountId"));
    const byUser = compileFlag(def());
    const r1 = resolution(evaluate(byAccount, byAccount.key, rollout(50), {}, AT), byAccount, false, undefined);
    expect(isResolutionError(r1)).toBe(false);
    const r2 = resolution(evaluate(byUser, byUser.key, rollout(50), {}, AT), byUser, false, undefined);
    expect(isResolutionError(r2) && r2.errorCode).toBe("TARGETING_KEY_MISSING");
  });
});
