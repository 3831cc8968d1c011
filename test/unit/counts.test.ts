/**
 * Evaluation counters (src/evaluation/counts.ts) and how the snapshot keeps them: one per flag
 * and environment, kept across definition and state changes and environment changes, dropped
 * with the flag or the environment.
 */
import { describe, expect, test } from "bun:test";
import { FlagCounter } from "../../src/evaluation/counts";
import { Snapshot, type ProjectData } from "../../src/evaluation/snapshot";
import type { EvaluationResult } from "../../src/evaluation/types";

const r = (enabled: boolean, variant: string | null, reason: EvaluationResult["reason"]): EvaluationResult => ({ flagKey: "f", enabled, variant, reason, ruleId: null, evaluatedAt: "" });

describe("FlagCounter", () => {
  test("counts by variant (on/off without one) and reason; drain gives the increments once; lastAt skips test overrides", () => {
    const c = new FlagCounter("p", "e", "f");
    c.add(r(true, null, "FLAG_ENABLED"), 10);
    c.add(r(true, null, "FLAG_ENABLED"), 11);
    c.add(r(false, null, "FLAG_DISABLED"), 12);
    c.add(r(true, "blue", "TARGETING_RULE_MATCH"), 13);
    c.add(r(true, null, "TEST_OVERRIDE"), 99);
    expect(c.lastAt).toBe(13);
    expect(c.cells()).toEqual([
      { variant: "on", reason: "TEST_OVERRIDE", count: 1 },
      { variant: "on", reason: "FLAG_ENABLED", count: 2 },
      { variant: "off", reason: "FLAG_DISABLED", count: 1 },
      { variant: "blue", reason: "TARGETING_RULE_MATCH", count: 1 },
    ]);
    expect(c.drain()).toHaveLength(4);
    expect(c.drain()).toEqual([]);
    c.add(r(true, "blue", "TARGETING_RULE_MATCH"), 14);
    const taken = c.drain();
    expect(taken).toEqual([{ variant: "blue", reason: "TARGETING_RULE_MATCH", count: 1 }]);
    // A flush that failed gives them back.
    c.undrain(taken);
    expect(c.drain()).toEqual(taken);
    expect(c.cells().find((x) => x.variant === "blue")!.count).toBe(2);
  });
});

describe("the snapshot's counters", () => {
  const data = (flags: string[], envs = ["e1", "e2"]): ProjectData => ({
    slug: "proj",
    environmentIds: envs,
    environmentSlugs: envs.map((e) => `${e}-slug`),
    flags: flags.map((key) => ({ key, variants: [], rules: [] })),
    states: [],
  });

  test("kept across a definition, a state and the project's reload; gone with the flag and the environment", () => {
    const s = new Snapshot();
    s.setProject("p", data(["a", "b"]));
    const counter = s.environment("e1")!.get("a")!.counter;
    counter.add(r(true, null, "FLAG_ENABLED"), 1);
    s.putFlag("p", { key: "a", variants: [{ key: "x" }], rules: [] });
    s.setState("p", "a", "e1", { enabled: true, rolloutPercentage: null });
    s.setProject("p", data(["a", "b"], ["e1", "e2", "e3"]));
    expect(s.environment("e1")!.get("a")!.counter).toBe(counter);
    expect(s.environment("e2")!.get("a")!.counter).not.toBe(counter);
    const labelled = [...s.labelledCounters()].map((l) => `${l.projectSlug}/${l.environmentSlug}/${l.counter.flagKey}`).sort();
    expect(labelled).toEqual(["proj/e1-slug/a", "proj/e1-slug/b", "proj/e2-slug/a", "proj/e2-slug/b", "proj/e3-slug/a", "proj/e3-slug/b"]);
    s.removeFlag("p", "a");
    s.setProject("p", data(["a", "b"], ["e1"]));
    expect(s.environment("e1")!.get("a")!.counter).not.toBe(counter);
    expect([...s.labelledCounters()]).toHaveLength(2);
    s.removeProject("p");
    expect([...s.labelledCounters()]).toHaveLength(0);
  });
});
