/**
 * Unit tests of prerequisites in the engine (issue 31 part 2, docs/targeting.md: Prerequisites):
 * chains, unmet by a disabled prerequisite or by the variant it serves, the depth guard, test
 * overrides on the dependant and on its prerequisites, and a flag without prerequisites
 * answering exactly as before.
 */
import { describe, expect, test } from "bun:test";
import { compileFlag, compileState, DISABLED_STATE, evaluate, type CompiledFlag, type CompiledState } from "../../src/evaluation/engine";
import { resolution } from "../../src/evaluation/openfeature";
import { PREREQUISITE_MAX_DEPTH, type FlagDefinition, type Override } from "../../src/evaluation/types";

const AT = "2030-01-02T03:04:05.678Z";
const ON = compileState({ enabled: true, rolloutPercentage: null });
const OFF = compileState({ enabled: false, rolloutPercentage: null });

type Entries = Map<string, { flag: CompiledFlag; state: CompiledState }>;

function env(defs: (Partial<FlagDefinition> & { key: string; on?: boolean; rollout?: number })[]): Entries {
  const entries: Entries = new Map();
  for (const { on = true, rollout, ...def } of defs) {
    const flag = compileFlag({ variants: [], rules: [], ...def });
    const state = rollout === undefined ? (on ? ON : OFF) : compileState({ enabled: on, rolloutPercentage: rollout });
    entries.set(def.key, { flag, state });
  }
  return entries;
}

function run(entries: Entries, key: string, context: Record<string, string> = { userId: "u1" }, overrides?: Map<string, Override>) {
  const entry = entries.get(key);
  return evaluate(entry?.flag, key, entry?.state ?? DISABLED_STATE, context, AT, overrides?.get(key), undefined, entries, overrides);
}

const FAILED = { enabled: false, variant: null, reason: "PREREQUISITE_FAILED" as const, ruleId: null };

describe("prerequisites", () => {
  test("met: the flag resolves as usual; unmet: PREREQUISITE_FAILED, off, no variant, no rule", () => {
    const e = env([
      { key: "base" },
      { key: "dep", prerequisites: [{ flagKey: "base" }], variants: [{ key: "a" }, { key: "b" }], rules: [{ id: "rule_x", name: "", enabled: true, variant: "b", conditions: [] }] },
    ]);
    expect(run(e, "dep")).toEqual({ flagKey: "dep", enabled: true, variant: "b", reason: "TARGETING_RULE_MATCH", ruleId: "rule_x", evaluatedAt: AT });
    e.set("base", { flag: e.get("base")!.flag, state: OFF });
    expect(run(e, "dep")).toEqual({ flagKey: "dep", ...FAILED, evaluatedAt: AT });
  });

  test("the flag's own disabled state comes first: FLAG_DISABLED, not PREREQUISITE_FAILED", () => {
    const e = env([{ key: "base", on: false }, { key: "dep", on: false, prerequisites: [{ flagKey: "base" }] }]);
    expect(run(e, "dep").reason).toBe("FLAG_DISABLED");
  });

  test("unmet by the variant served; met by it", () => {
    const e = env([
      { key: "plan", variants: [{ key: "free" }, { key: "pro" }], rules: [{ id: "rule_p", name: "", enabled: true, variant: "pro", conditions: [{ attribute: "tier", operator: "equals", value: "gold" }] }] },
      { key: "dep", prerequisites: [{ flagKey: "plan", variant: "pro" }] },
    ]);
    expect(run(e, "dep", { userId: "u1" })).toMatchObject(FAILED); // plan serves "free"
    expect(run(e, "dep", { userId: "u1", tier: "gold" })).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
  });

  test("unmet by a rollout that excludes the user; the same context decides", () => {
    const e = env([{ key: "base", rollout: 50 }, { key: "dep", prerequisites: [{ flagKey: "base" }] }]);
    const seen = { met: 0, unmet: 0 };
    for (let i = 0; i < 200; i++) {
      const ctx = { userId: `user-${i}` };
      const base = run(e, "base", ctx);
      const dep = run(e, "dep", ctx);
      if (base.enabled) {
        seen.met++;
        expect(dep.reason).toBe("FLAG_ENABLED");
      } else {
        seen.unmet++;
        expect(dep).toMatchObject(FAILED);
      }
    }
    expect(seen.met).toBeGreaterThan(50);
    expect(seen.unmet).toBeGreaterThan(50);
  });

  test("chains: every link must be met; an unknown prerequisite is unmet", () => {
    const e = env([
      { key: "c" },
      { key: "b", prerequisites: [{ flagKey: "c" }] },
      { key: "a", prerequisites: [{ flagKey: "b" }] },
      { key: "x", prerequisites: [{ flagKey: "gone" }] },
    ]);
    expect(run(e, "a").reason).toBe("FLAG_ENABLED");
    e.set("c", { flag: e.get("c")!.flag, state: OFF });
    expect(run(e, "a")).toMatchObject(FAILED);
    expect(run(e, "b")).toMatchObject(FAILED);
    expect(run(e, "x")).toMatchObject(FAILED);
  });

  test("several prerequisites: all must be met", () => {
    const e = env([{ key: "p1" }, { key: "p2", on: false }, { key: "dep", prerequisites: [{ flagKey: "p1" }, { flagKey: "p2" }] }]);
    expect(run(e, "dep")).toMatchObject(FAILED);
    e.set("p2", { flag: e.get("p2")!.flag, state: ON });
    expect(run(e, "dep").enabled).toBe(true);
  });

  test(`depth: a chain of ${PREREQUISITE_MAX_DEPTH} edges evaluates; deeper, or a cycle in stored data, is unmet rather than endless`, () => {
    const chain = (edges: number) =>
      env(Array.from({ length: edges + 1 }, (_, i) => ({ key: `f${i}`, ...(i < edges ? { prerequisites: [{ flagKey: `f${i + 1}` }] } : {}) })));
    expect(run(chain(PREREQUISITE_MAX_DEPTH), "f0").reason).toBe("FLAG_ENABLED");
    expect(run(chain(PREREQUISITE_MAX_DEPTH + 1), "f0")).toMatchObject(FAILED);
    const cycle = env([{ key: "a", prerequisites: [{ flagKey: "b" }] }, { key: "b", prerequisites: [{ flagKey: "a" }] }]);
    expect(run(cycle, "a")).toMatchObject(FAILED);
  });

  test("overrides: one on the dependant wins; one on a prerequisite applies to it", () => {
    const e = env([{ key: "base", on: false }, { key: "plan", variants: [{ key: "free" }, { key: "pro" }] }, { key: "dep", prerequisites: [{ flagKey: "base" }, { flagKey: "plan", variant: "pro" }] }]);
    expect(run(e, "dep")).toMatchObject(FAILED);
    expect(run(e, "dep", undefined, new Map<string, Override>([["dep", true]]))).toMatchObject({ enabled: true, reason: "TEST_OVERRIDE" });
    expect(run(e, "dep", undefined, new Map<string, Override>([["base", true]]))).toMatchObject(FAILED); // plan still serves free
    expect(run(e, "dep", undefined, new Map<string, Override>([["base", true], ["plan", "pro"]]))).toMatchObject({ enabled: true, reason: "FLAG_ENABLED" });
    expect(run(e, "dep", undefined, new Map<string, Override>([["base", true], ["plan", false]]))).toMatchObject(FAILED);
  });

  test("without the environment's entries a prerequisite is never found", () => {
    const e = env([{ key: "base" }, { key: "dep", prerequisites: [{ flagKey: "base" }] }]);
    const { flag, state } = e.get("dep")!;
    expect(evaluate(flag, "dep", state, {}, AT)).toMatchObject(FAILED);
  });

  test("a flag without prerequisites shares the empty array and answers as before", () => {
    const a = compileFlag({ key: "f", variants: [], rules: [] });
    const b = compileFlag({ key: "g", variants: [], rules: [], prerequisites: [] });
    expect(a.prerequisites.length).toBe(0);
    expect(a.prerequisites).toBe(b.prerequisites);
    expect(evaluate(a, "f", ON, {}, AT)).toEqual({ flagKey: "f", enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: AT });
  });

  test("OpenFeature: TARGETING_MATCH, no value for a flag with variants, false for a boolean one", () => {
    const e = env([{ key: "base", on: false }, { key: "dep", prerequisites: [{ flagKey: "base" }] }, { key: "multi", variants: [{ key: "a" }], prerequisites: [{ flagKey: "base" }] }]);
    expect(resolution(run(e, "dep"), e.get("dep")!.flag, true)).toMatchObject({ value: false, reason: "TARGETING_MATCH", metadata: { reason: "PREREQUISITE_FAILED" } });
    const multi = resolution(run(e, "multi"), e.get("multi")!.flag, true);
    expect(multi).toMatchObject({ reason: "TARGETING_MATCH", metadata: { reason: "PREREQUISITE_FAILED" } });
    expect("value" in multi).toBe(false);
  });
});
