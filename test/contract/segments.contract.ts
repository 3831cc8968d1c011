/** SegmentStore (src/modules/segments/store.ts) through its interface. */
import { describe, expect, test } from "bun:test";
import type { Segment, SegmentStore } from "../../src/modules/segments/store";
import { ALL, AUTHOR, change, flag, onFresh, refuse, Refused, seedFlag, seedProject, T0, T1, type MakeBackend } from "./backend";

const segment = (id: string, key: string, over: Partial<Segment> = {}): Segment => ({
  id,
  key,
  name: `Segment ${key}`,
  conditions: [{ attribute: "country", operator: "equals", value: "FR" }],
  included: ["u1"],
  excluded: [],
  createdAt: T0,
  updatedAt: T0,
  ...over,
});

export function describeSegmentStoreContract(makeBackend: MakeBackend) {
  describe("SegmentStore contract", () => {
    test("create, find, list by key; a taken key: false; update; a refusal writes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const segments: SegmentStore = b.stores.segments;
        const p = await seedProject(b.stores.projects);
        const s = segment("s1", "zeta", { description: "French" });
        expect(await segments.create(AUTHOR, p.id, s, change("segment", "s1", "zeta", p))).toBe(true);
        expect(await segments.create(AUTHOR, p.id, segment("s2", "alpha"), change("segment", "s2", "alpha", p))).toBe(true);
        expect(await segments.create(AUTHOR, p.id, segment("s3", "zeta"), change("segment", "s3", "zeta", p))).toBe(false);
        expect(await segments.find(p.id, "zeta")).toEqual(s);
        expect((await segments.list(p.id, {}, ALL)).rows.map((x) => [x.id, x.key])).toEqual([["s2", "alpha"], ["s1", "zeta"]]);
        expect(await segments.list(p.id, {}, { limit: 1, offset: 1 })).toMatchObject({ rows: [{ id: "s1", key: "zeta" }], total: 2 });
        await expect(segments.update(AUTHOR, p.id, "zeta", () => refuse())).rejects.toBeInstanceOf(Refused);
        const next = { ...s, name: "Renamed", included: ["u1", "u2"], excluded: ["u3"], updatedAt: T1 };
        await segments.update(AUTHOR, p.id, "zeta", (current) => {
          expect(current).toEqual(s);
          return { result: next, changes: [change("segment", "s1", "zeta", p, "updated")] };
        });
        expect(await segments.find(p.id, "zeta")).toEqual(next);
      });
    });

    test("remove: decide sees the flags whose rules name it; a refusal keeps it", async () => {
      await onFresh(makeBackend, async (b) => {
        const segments: SegmentStore = b.stores.segments;
        const p = await seedProject(b.stores.projects);
        await segments.create(AUTHOR, p.id, segment("s1", "beta"), change("segment", "s1", "beta", p));
        const uses = (id: string) => ({ id, name: id, conditions: [{ attribute: "", operator: "in_segment" as const, value: "beta" }], enabled: id !== "r2", variant: null });
        await seedFlag(b.stores.flags, p, flag("f1", "b-flag", { rules: [uses("r1"), { ...uses("r0"), conditions: [] }, uses("r2")] }));
        await seedFlag(b.stores.flags, p, flag("f2", "a-flag", { rules: [uses("r3")] }));
        await seedFlag(b.stores.flags, p, flag("f3", "c-flag"));
        let seen: unknown;
        await expect(
          segments.remove(AUTHOR, p.id, "beta", (current, used) => {
            seen = { id: current?.id, used };
            return refuse();
          }),
        ).rejects.toBeInstanceOf(Refused);
        expect(seen).toEqual({ id: "s1", used: [{ flagKey: "a-flag", ruleIds: ["r3"] }, { flagKey: "b-flag", ruleIds: ["r1", "r2"] }] });
        expect(await segments.find(p.id, "beta")).toBeDefined();
        await segments.remove(AUTHOR, p.id, "beta", (current) => change("segment", current!.id, "beta", p, "deleted"));
        expect(await segments.find(p.id, "beta")).toBeUndefined();
        expect(await segments.list(p.id, {}, ALL)).toEqual({ rows: [], total: 0 });
      });
    });
  });
}
