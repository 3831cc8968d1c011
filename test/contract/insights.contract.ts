/** InsightsStore (src/modules/insights/store.ts) through its interface: counts and their roll-up, last evaluations, staleness. */
import { describe, expect, test } from "bun:test";
import type { InsightsStore } from "../../src/modules/insights/store";
import { ALL, AUTHOR, change, flag, onFresh, seedFlag, seedProject, T0, T1, type MakeBackend } from "./backend";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export function describeInsightsStoreContract(makeBackend: MakeBackend) {
  describe("InsightsStore contract", () => {
    test("flushes add up per hourly bucket; counts by hour and by day; roll-up makes days and drops old days; last evaluations keep the latest", async () => {
      await onFresh(makeBackend, async (b) => {
        const insights: InsightsStore = b.stores.insights;
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        const day0 = Date.parse("2026-11-20T00:00:00.000Z");
        const h = (n: number) => day0 + n * HOUR;
        const batch = (key: string, on: number, off: number, lastAt: number) => ({
          projectId: p.id,
          environmentId: "p1-e1",
          flagKey: key,
          cells: [
            { variant: "on", reason: "TARGETING_RULE_MATCH" as const, count: on },
            { variant: "off", reason: "FLAG_ENABLED" as const, count: off },
          ].filter((c) => c.count > 0),
          lastAt,
        });
        await insights.writeNow(h(1), [batch("a", 2, 1, h(1) + 5), batch("gone", 9, 9, h(1))]);
        await insights.writeNow(h(1), [batch("a", 3, 0, h(1) + 1)]);
        await insights.writeNow(h(2), [batch("a", 1, 1, h(2) + 7)]);
        await insights.writeNow(h(25), [batch("a", 4, 0, 0)]);
        const sorted = (rows: { bucket: number; variant: string; count: number }[]) => rows.map((r) => [r.bucket, r.variant, r.count]).sort((x, y) => String(x).localeCompare(String(y)));
        expect(sorted(await insights.counts("f1", "p1-e1", "hour", h(0), h(3)))).toEqual(sorted([
          { bucket: h(1), variant: "on", count: 5 },
          { bucket: h(1), variant: "off", count: 1 },
          { bucket: h(2), variant: "on", count: 1 },
          { bucket: h(2), variant: "off", count: 1 },
        ]));
        expect(await insights.counts("f1", "p1-e2", "hour", h(0), h(3))).toEqual([]);
        const byDay = sorted(await insights.counts("f1", "p1-e1", "day", day0, day0 + 2 * DAY));
        expect(byDay).toEqual(sorted([
          { bucket: day0, variant: "on", count: 6 },
          { bucket: day0, variant: "off", count: 2 },
          { bucket: day0 + DAY, variant: "on", count: 4 },
        ]));
        expect(await insights.lastEvaluated(["f1", "f-none"])).toEqual([{ flagId: "f1", environmentId: "p1-e1", at: h(2) + 7 }]);

        // Hours of day 0 become one daily bucket: the daily view is unchanged, the hourly one empty there.
        const rolled = await insights.rollup(day0 + DAY, 0);
        expect(rolled).toEqual({ rolled: 4, deleted: 0 });
        expect(await insights.counts("f1", "p1-e1", "hour", h(0), h(3))).toEqual([]);
        expect(sorted(await insights.counts("f1", "p1-e1", "day", day0, day0 + 2 * DAY))).toEqual(byDay);
        expect(await insights.rollup(day0 + DAY, day0 + DAY)).toEqual({ rolled: 0, deleted: 2 });
        expect(sorted(await insights.counts("f1", "p1-e1", "day", day0, day0 + 2 * DAY))).toEqual(sorted([{ bucket: day0 + DAY, variant: "on", count: 4 }]));
      });
    });

    test("staleness: set with its entries, read per flag and per project, cleared; candidates; observedSince is kept from the first call", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const insights: InsightsStore = b.stores.insights;
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        await seedFlag(b.stores.flags, p, flag("f2", "b"));
        await b.stores.flags.putState(AUTHOR, p.id, "b", "p1-e2", () => ({ result: { enabled: true, rolloutPercentage: 100, updatedAt: T1 }, changes: [change("flag_state", "f2", "b", p, "enabled")] }));
        expect(insights.observedSinceNow(T0)).toBe(T0);
        expect(insights.observedSinceNow(T1)).toBe(T0);
        const stale = { reason: "not_evaluated" as const, since: T1 };
        await insights.setStale(AUTHOR, [
          { project: p, flagId: "f1", key: "a", before: null, after: stale },
          { project: p, flagId: "f-gone", key: "gone", before: null, after: stale },
        ]);
        expect(published.at(-1)!.map((e) => [e.resource.id, e.changes.stale])).toEqual([["f1", { before: null, after: stale }]]);
        expect(await insights.staleOf("f1")).toEqual(stale);
        expect(await insights.staleOf("f2")).toBeNull();
        expect((await b.stores.flags.list(p.id, { stale: true }, ALL)).rows.map((f) => [f.key, f.stale])).toEqual([["a", stale]]);
        const candidates = await insights.staleCandidates();
        expect(candidates.map((c) => [c.projectSlug, c.key, c.stale])).toEqual([["alpha", "a", stale], ["alpha", "b", null]]);
        expect(candidates[0]).toMatchObject({ projectId: "p1", staleAfterDays: 30, flagId: "f1", createdAt: T0, variants: [], rules: [], prerequisites: null, lastEvaluatedAt: null, lastStateChange: null });
        expect(candidates[0]!.states).toEqual([{ enabled: false, rolloutPercentage: null }, { enabled: false, rolloutPercentage: null }]);
        expect(candidates[1]).toMatchObject({ lastStateChange: T1, states: [{ enabled: false, rolloutPercentage: null }, { enabled: true, rolloutPercentage: 100 }] });
        await insights.setStale(AUTHOR, [{ project: p, flagId: "f1", key: "a", before: stale, after: null }]);
        expect(await insights.staleOf("f1")).toBeNull();
        expect(await b.stores.flags.list(p.id, { stale: true }, ALL)).toEqual({ rows: [], total: 0 });
      });
    });
  });
}
