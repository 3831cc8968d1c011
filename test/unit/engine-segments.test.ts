/**
 * Segments in the engine (docs/targeting.md, Segments): membership (included, excluded,
 * conditions), in_segment / not_in_segment in flag rules, the user id as bucketing reads it,
 * `evaluate`'s explicit user, a segment's conditions that may not name segments, and the
 * snapshot compiling again the flags that use a changed segment.
 */
import { describe, expect, test } from "bun:test";
import { compileFlag, compileSegment, compileState, evaluate, isMember, type SegmentTable } from "../../src/evaluation/engine";
import { Snapshot } from "../../src/evaluation/snapshot";
import type { Condition, EvalContext, FlagDefinition, Rule, SegmentDefinition } from "../../src/evaluation/types";

const AT = "2030-01-01T00:00:00.000Z";
const ON = compileState({ enabled: true, rolloutPercentage: null });

const seg = (def: Partial<SegmentDefinition> & { key?: string } = {}) =>
  compileSegment({ key: def.key ?? "beta", conditions: def.conditions ?? [], included: def.included ?? [], excluded: def.excluded ?? [] });

const PRO: Condition = { attribute: "plan", operator: "equals", value: "pro" };

describe("membership", () => {
  test("included: a member whatever the conditions and excluded", () => {
    const s = seg({ included: ["u1"], excluded: ["u1"], conditions: [PRO] });
    expect(isMember(s, { userId: "u1", plan: "free" })).toBe(true);
  });

  test("excluded: not a member even when the conditions match", () => {
    const s = seg({ excluded: ["u2"], conditions: [PRO] });
    expect(isMember(s, { userId: "u2", plan: "pro" })).toBe(false);
    expect(isMember(s, { userId: "u3", plan: "pro" })).toBe(true);
  });

  test("conditions: all must match; none: only included users are members", () => {
    const s = seg({ conditions: [PRO, { attribute: "country", operator: "in", value: ["FR", "DE"] }] });
    expect(isMember(s, { userId: "u", plan: "pro", country: "FR" })).toBe(true);
    expect(isMember(s, { userId: "u", plan: "pro", country: "US" })).toBe(false);
    expect(isMember(seg(), { userId: "u", plan: "pro" })).toBe(false);
    expect(isMember(seg({ included: ["u"] }), { userId: "u" })).toBe(true);
  });

  test("without a user id: only the conditions decide", () => {
    const s = seg({ included: ["u1"], conditions: [PRO] });
    expect(isMember(s, { plan: "pro" })).toBe(true);
    expect(isMember(s, { plan: "free" })).toBe(false);
    expect(isMember(seg({ included: [""] }), { userId: "" })).toBe(false); // an empty id is no id, as in bucketing
  });

  test("the user id as bucketing reads it: a number in decimal form; not a boolean or an array", () => {
    const s = seg({ included: ["42", "1000000000000000000000", "0.5"] });
    expect(isMember(s, { userId: 42 })).toBe(true);
    expect(isMember(s, { userId: 1e21 })).toBe(true);
    expect(isMember(s, { userId: 0.5 })).toBe(true);
    expect(isMember(s, { userId: "42" })).toBe(true);
    expect(isMember(s, { userId: 43 })).toBe(false);
    expect(isMember(seg({ included: ["true"] }), { userId: true })).toBe(false);
    expect(isMember(seg({ included: ["a"] }), { userId: ["a"] })).toBe(false);
  });

  test("the user given apart (evaluate's userId) stands for the context's userId, in lists and conditions", () => {
    const s = seg({ included: ["given"], excluded: ["ctx"], conditions: [{ attribute: "userId", operator: "starts_with", value: "g" }] });
    expect(isMember(s, { userId: "ctx" }, "given")).toBe(true);
    expect(isMember(seg({ excluded: ["given"], conditions: [PRO] }), { userId: "other", plan: "pro" }, "given")).toBe(false);
    expect(isMember(seg({ conditions: [{ attribute: "userId", operator: "starts_with", value: "g" }] }), { userId: "x" }, "gx")).toBe(true);
  });

  test("a segment's condition naming a segment never matches (refused at write time)", () => {
    const s = seg({ conditions: [{ attribute: "userId", operator: "not_in_segment", value: "other" }] });
    expect(isMember(s, { userId: "u" })).toBe(false);
  });

  test("10,000 ids: a Set, not a list", () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => `user-${i}`);
    const s = seg({ included: ids });
    expect(s.included).toBeInstanceOf(Set);
    expect(s.included.size).toBe(10_000);
    expect(isMember(s, { userId: "user-9999" })).toBe(true);
    expect(isMember(s, { userId: "user-10000" })).toBe(false);
  });
});

describe("in_segment and not_in_segment in flag rules", () => {
  const beta = seg({ key: "beta", included: ["u1"], excluded: ["u2"], conditions: [PRO] });
  const table: SegmentTable = new Map([["beta", beta]]);
  const rule = (operator: "in_segment" | "not_in_segment", value = "beta"): Rule => ({
    id: "rule_1",
    name: "",
    conditions: [{ attribute: "userId", operator, value }],
    enabled: true,
    variant: null,
  });
  const run = (r: Rule, context: EvalContext, userId?: string, segments = table) =>
    evaluate(compileFlag({ key: "f", variants: [], rules: [r] }, segments), "f", ON, context, AT, undefined, userId).reason;

  test("in_segment matches members; not_in_segment the others", () => {
    for (const [context, member] of [
      [{ userId: "u1" }, true],
      [{ userId: "u2", plan: "pro" }, false],
      [{ userId: "u3", plan: "pro" }, true],
      [{ userId: "u3", plan: "free" }, false],
      [{}, false],
      [{ plan: "pro" }, true],
    ] as [EvalContext, boolean][]) {
      expect([context, run(rule("in_segment"), context)]).toEqual([context, member ? "TARGETING_RULE_MATCH" : "FLAG_ENABLED"]);
      expect([context, run(rule("not_in_segment"), context)]).toEqual([context, member ? "FLAG_ENABLED" : "TARGETING_RULE_MATCH"]);
    }
  });

  test("evaluate's explicit user", () => {
    expect(run(rule("in_segment"), { userId: "u2" }, "u1")).toBe("TARGETING_RULE_MATCH");
    expect(run(rule("in_segment"), { userId: "u1" }, "u2")).toBe("FLAG_ENABLED");
  });

  test("the compiled condition holds the compiled segment: the same object, no lookup on evaluate", () => {
    const flag = compileFlag({ key: "f", variants: [], rules: [rule("in_segment")] }, table);
    expect(flag.rules[0]!.conditions[0]!.value).toBe(beta);
  });

  test("an unknown segment never matches, either way", () => {
    expect(run(rule("in_segment", "nope"), { userId: "u1" })).toBe("FLAG_ENABLED");
    expect(run(rule("not_in_segment", "nope"), { userId: "u9" })).toBe("FLAG_ENABLED");
    expect(run(rule("in_segment"), { userId: "u1" }, undefined, new Map())).toBe("FLAG_ENABLED");
  });
});

describe("the snapshot: a segment change recompiles the flags that use it", () => {
  const ENV = "env_1";
  const uses = (key: string, segment = "beta"): FlagDefinition => ({
    key,
    variants: [],
    rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [{ attribute: "userId", operator: "in_segment", value: segment }] }],
  });
  const plain: FlagDefinition = { key: "plain", variants: [], rules: [] };
  const reason = (s: Snapshot, key: string, userId: string) => {
    const e = s.environment(ENV)!.get(key)!;
    return evaluate(e.flag, key, e.state, { userId }, AT).reason;
  };

  test("putSegment: users compiled again, others untouched; a flag that stops using it is no longer recompiled", () => {
    const s = new Snapshot();
    s.setProject("p", {
      slug: "p",
      environmentIds: [ENV],
      environmentSlugs: ["production"],
      flags: [uses("a"), uses("b"), uses("c", "other"), plain],
      states: ["a", "b", "c", "plain"].map((flagKey) => ({ flagKey, environmentId: ENV, state: { enabled: true, rolloutPercentage: null } })),
      segments: [
        { key: "beta", conditions: [], included: ["u1"], excluded: [] },
        { key: "other", conditions: [], included: [], excluded: [] },
      ],
    });
    expect(reason(s, "a", "u1")).toBe("TARGETING_RULE_MATCH");
    const untouched = [s.environment(ENV)!.get("c")!.flag, s.environment(ENV)!.get("plain")!.flag];
    expect(s.putSegment("p", { key: "beta", conditions: [], included: ["u2"], excluded: [] }).sort()).toEqual(["a", "b"]);
    expect([reason(s, "a", "u1"), reason(s, "a", "u2"), reason(s, "b", "u2")]).toEqual(["FLAG_ENABLED", "TARGETING_RULE_MATCH", "TARGETING_RULE_MATCH"]);
    expect([s.environment(ENV)!.get("c")!.flag, s.environment(ENV)!.get("plain")!.flag]).toEqual(untouched);
    expect(s.environment(ENV)!.get("a")!.state.enabled).toBe(true); // the state kept
    s.putFlag("p", { ...plain, key: "a" });
    s.removeFlag("p", "b");
    expect(s.putSegment("p", { key: "beta", conditions: [], included: [], excluded: [] })).toEqual([]);
  });
});
