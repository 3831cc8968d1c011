/**
 * The local provider's pure parts (packages/openfeature-provider): the definitions it holds
 * (put, patch, which keys changed), the payload checks, the backoff.
 */
import { describe, expect, test } from "bun:test";
import { Definitions, parseDefinitions, parsePatch, type FlagRecord } from "../../packages/openfeature-provider/src/definitions";
import { backoffDelay } from "../../packages/openfeature-provider/src/stream";
import { evaluate } from "../../src/evaluation/engine";

const flag = (key: string, over: Partial<FlagRecord> = {}): FlagRecord => ({
  key,
  variants: [],
  rules: [],
  state: { enabled: true, rolloutPercentage: null },
  ...over,
});

const put = (version: number, flags: FlagRecord[]) => ({ version, project: "default", environment: "production", flags });

describe("Definitions", () => {
  test("the first put loads without a change; later puts name what was added, removed or changed", () => {
    const d = new Definitions();
    expect(d.loaded).toBe(false);
    expect(d.put(put(3, [flag("a"), flag("b")]))).toEqual([]);
    expect(d.loaded).toBe(true);
    expect([d.version, d.project, d.environment]).toEqual([3, "default", "production"]);
    const a = d.flags.get("a");

    const changed = d.put(put(9, [flag("a"), flag("b", { state: { enabled: false, rolloutPercentage: null } }), flag("c")]));
    expect(changed.sort()).toEqual(["b", "c"]);
    expect(d.flags.get("a")).toBe(a!); // unchanged: not compiled again
    expect(d.put(put(10, [flag("c")])).sort()).toEqual(["a", "b"]);
    expect(d.version).toBe(10);
  });

  test("a patch changes, adds and deletes; a repeat of the same record is no change", () => {
    const d = new Definitions();
    d.put(put(1, [flag("a"), flag("b")]));
    expect(d.patch({ version: 2, flags: [flag("a", { state: { enabled: true, rolloutPercentage: 50 } })], deleted: [] })).toEqual(["a"]);
    expect(d.flags.get("a")!.state.threshold).toBe(50_000);
    expect(d.patch({ version: 3, flags: [flag("a", { state: { enabled: true, rolloutPercentage: 50 } })], deleted: [] })).toEqual([]);
    expect(d.patch({ version: 4, flags: [flag("n")], deleted: ["b", "missing"] })).toEqual(["n", "b"]);
    expect([...d.flags.keys()].sort()).toEqual(["a", "n"]);
    expect(d.version).toBe(4);
    // An older patch (replayed) does not move the version back.
    d.patch({ version: 2, flags: [], deleted: [] });
    expect(d.version).toBe(4);
  });

  test("prerequisites: a change names the flags that depend on it, directly or not; the record's prerequisites are part of it", () => {
    const d = new Definitions();
    d.put(put(1, [flag("base"), flag("mid", { prerequisites: [{ flagKey: "base" }] }), flag("top", { prerequisites: [{ flagKey: "mid" }] }), flag("other")]));
    expect(d.patch({ version: 2, flags: [flag("base", { state: { enabled: false, rolloutPercentage: null } })], deleted: [] }).sort()).toEqual(["base", "mid", "top"]);
    expect(d.patch({ version: 3, flags: [flag("other", { state: { enabled: false, rolloutPercentage: null } })], deleted: [] })).toEqual(["other"]);
    expect(d.patch({ version: 4, flags: [flag("top", { prerequisites: [{ flagKey: "base" }] })], deleted: [] })).toEqual(["top"]);
    expect(d.flags.get("top")!.flag.prerequisites).toEqual([{ flagKey: "base", variant: null }]);
    expect(d.put(put(5, [flag("base"), flag("mid", { prerequisites: [{ flagKey: "base" }] }), flag("top", { prerequisites: [{ flagKey: "base" }] })])).sort()).toEqual([
      "base",
      "mid",
      "other",
      "top",
    ]);
    expect(parseDefinitions(JSON.stringify(put(1, [flag("a", { prerequisites: [{ flagKey: 1 }] as never })])))).toBe(
      "definitions: flags[0].prerequisites must be an array of { flagKey, variant? }",
    );
  });

  test("a flag's type: boolean without variants, string with; rules and variants compiled by the engine", () => {
    const d = new Definitions();
    d.put(put(1, [flag("b"), flag("v", { variants: [{ key: "red", weight: 25 }, { key: "blue", weight: 75 }], rules: [{ id: "rule_1", name: "r", enabled: true, variant: "red", conditions: [] }] })]));
    expect(d.flags.get("b")!.type).toBe("boolean");
    const v = d.flags.get("v")!;
    expect(v.type).toBe("string");
    expect(v.flag.cumulativeWeights).toEqual([25_000, 100_000]);
    expect(v.flag.rules.map((r) => r.variant)).toEqual(["red"]);
  });

  test("bucketBy travels: compiled with the flag, and a change of it alone is a change", () => {
    const d = new Definitions();
    d.put(put(1, [flag("a"), flag("b", { bucketBy: "accountId" })]));
    expect([d.flags.get("a")!.flag.bucketBy, d.flags.get("a")!.flag.byUserId]).toEqual(["userId", true]);
    expect([d.flags.get("b")!.flag.bucketBy, d.flags.get("b")!.flag.byUserId]).toEqual(["accountId", false]);
    expect(d.patch({ version: 2, flags: [flag("a", { bucketBy: "orgId" })], deleted: [] })).toEqual(["a"]);
    expect(d.flags.get("a")!.flag.bucketBy).toBe("orgId");
    expect(d.patch({ version: 3, flags: [flag("b")], deleted: [] })).toEqual(["b"]);
    expect(d.flags.get("b")!.flag.byUserId).toBe(true);
    expect(parseDefinitions(JSON.stringify(put(4, [flag("a", { bucketBy: "" })])))).toBe("definitions: flags[0].bucketBy must be an attribute name");
    expect(parseDefinitions(JSON.stringify(put(4, [{ ...flag("a"), bucketBy: 5 } as never])))).toBe("definitions: flags[0].bucketBy must be an attribute name");
  });

  test("a patch before any put is refused", () => {
    expect(() => new Definitions().patch({ version: 1, flags: [], deleted: [] })).toThrow("a patch before any put");
  });
});

describe("payload checks", () => {
  test("definitions: the shape the engine relies on, or a message", () => {
    const ok = { version: 7, project: "p", environment: "e", flags: [flag("a")] };
    expect(parseDefinitions(JSON.stringify(ok))).toEqual(ok);
    expect(parseDefinitions("not json")).toBe("definitions: not a JSON object");
    expect(parseDefinitions(JSON.stringify({ ...ok, version: -1 }))).toBe("definitions: version must be a non-negative integer");
    expect(parseDefinitions(JSON.stringify({ ...ok, environment: 1 }))).toBe("definitions: project and environment must be strings");
    expect(parseDefinitions(JSON.stringify({ ...ok, flags: [{ key: "a", variants: [], rules: [] }] }))).toBe("definitions: flags[0].state must be { enabled, rolloutPercentage }");
    expect(parseDefinitions(JSON.stringify({ ...ok, flags: [{ ...flag("a"), rules: [{ name: "no id", conditions: [] }] }] }))).toBe(
      "definitions: flags[0].rules must be rules with an id and conditions",
    );
  });

  test("patch: flags and deleted default to none", () => {
    expect(parsePatch(JSON.stringify({ version: 5 }))).toEqual({ version: 5, flags: [], deleted: [] });
    expect(parsePatch(JSON.stringify({ version: 5, deleted: [1] }))).toBe("patch: deleted must be an array of flag keys");
    expect(parsePatch(JSON.stringify({ version: "5" }))).toBe("patch: version must be a non-negative integer");
  });
});

test("backoff: full jitter under a cap that doubles per attempt up to the maximum", () => {
  expect(backoffDelay(0, 100, 10_000, () => 0.999)).toBe(99);
  expect(backoffDelay(3, 100, 10_000, () => 0.5)).toBe(400);
  expect(backoffDelay(20, 100, 10_000, () => 0.999)).toBe(9990);
  expect(backoffDelay(5000, 100, 10_000, () => 0.999)).toBe(9990);
  expect(backoffDelay(2, 100, 10_000, () => 0)).toBe(0);
});

describe("Definitions: segments (docs/targeting.md, Segments)", () => {
  const inBeta = (key: string) =>
    flag(key, { rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [{ attribute: "userId", operator: "in_segment", value: "beta" }] }] });
  const beta = (included: string[]) => ({ key: "beta", conditions: [], included, excluded: [] });
  const reason = (d: Definitions, key: string, userId: string) => {
    const e = d.flags.get(key)!;
    return evaluate(e.flag, key, e.state, {}, "t", undefined, userId).reason;
  };

  test("a put compiles the flags against its segments; a patch with a changed segment recompiles the flags it carries", () => {
    const d = new Definitions();
    d.put({ ...put(1, [inBeta("a"), inBeta("b"), flag("c")]), segments: [beta(["u1"])] });
    expect(reason(d, "a", "u1")).toBe("TARGETING_RULE_MATCH");
    expect(reason(d, "a", "u2")).toBe("FLAG_ENABLED");
    const c = d.flags.get("c");
    // The server sends every flag that uses the segment, with the segment.
    expect(d.patch({ version: 2, flags: [inBeta("a"), inBeta("b")], deleted: [], segments: [beta(["u2"])] }).sort()).toEqual(["a", "b"]);
    expect(reason(d, "a", "u2")).toBe("TARGETING_RULE_MATCH");
    expect(reason(d, "b", "u1")).toBe("FLAG_ENABLED");
    expect(d.flags.get("c")).toBe(c!);
    // The same segment again: no change.
    expect(d.patch({ version: 3, flags: [inBeta("a")], deleted: [], segments: [beta(["u2"])] })).toEqual([]);
  });

  test("a put whose segment changed names the flags that use it", () => {
    const d = new Definitions();
    d.put({ ...put(1, [inBeta("a"), flag("c")]), segments: [beta(["u1"])] });
    expect(d.put({ ...put(2, [inBeta("a"), flag("c")]), segments: [beta(["u1", "u3"])] })).toEqual(["a"]);
    expect(reason(d, "a", "u3")).toBe("TARGETING_RULE_MATCH");
  });

  test("payload checks: segments are optional, and checked when sent", () => {
    const payload = { version: 1, project: "p", environment: "e", flags: [] };
    expect(parseDefinitions(JSON.stringify(payload))).toEqual(payload);
    expect(parseDefinitions(JSON.stringify({ ...payload, segments: [beta(["u"])] }))).toEqual({ ...payload, segments: [beta(["u"])] });
    expect(parseDefinitions(JSON.stringify({ ...payload, segments: [{ key: "s", conditions: [], included: [1], excluded: [] }] }))).toBe(
      "definitions: segments[0] must have a key, conditions, included and excluded",
    );
    expect(parsePatch(JSON.stringify({ version: 2, segments: "x" }))).toBe("patch: segments must be an array");
  });
});
