/** FlagStore (src/modules/flags/store.ts) through its interface. */
import { describe, expect, test } from "bun:test";
import type { FlagFilter, FlagStore, StateRow } from "../../src/modules/flags/store";
import type { Project } from "../../src/modules/projects/store";
import { ALL, AUTHOR, change, flag, onFresh, refuse, Refused, seedFlag, seedProject, T0, T1, T2, type MakeBackend } from "./backend";

export function describeFlagStoreContract(makeBackend: MakeBackend) {
  describe("FlagStore contract", () => {
    const put = (flags: FlagStore, p: Project, key: string, environmentId: string, state: Omit<StateRow, "updatedAt">, at = T1) =>
      flags.putState(AUTHOR, p.id, key, environmentId, (f) => ({ result: { ...state, updatedAt: at }, changes: [change("flag_state", f!.id, key, p, state.enabled ? "enabled" : "disabled")] }));

    test("create and find (every field back as written); a taken key in the project: false, in another project: fine; check refuses", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        const q = await seedProject(b.stores.projects, "p2", "beta");
        const full = flag("f1", "checkout", {
          description: "the new checkout",
          variants: [
            { key: "on", weight: 50 },
            { key: "off", name: "Off", weight: 50 },
          ],
          rules: [{ id: "rule_1", name: "beta", conditions: [{ attribute: "plan", operator: "in", value: ["pro", "team"] }], enabled: true, variant: "on" }],
          bucketBy: "accountId",
        });
        await seedFlag(flags, p, full);
        expect(await flags.find(p.id, "checkout")).toEqual(full);
        expect(await flags.find(p.id, "nope")).toBeUndefined();
        expect(await flags.create(AUTHOR, p.id, flag("f9", "checkout"), change("flag", "f9", "checkout", p))).toBe(false);
        expect(await flags.create(AUTHOR, q.id, flag("f2", "checkout"), change("flag", "f2", "checkout", q))).toBe(true);
        await expect(flags.create(AUTHOR, p.id, flag("f3", "other"), change("flag", "f3", "other", p), (reads) => (reads.links().length === 1 ? refuse() : undefined))).rejects.toBeInstanceOf(Refused);
        expect(await flags.find(p.id, "other")).toBeUndefined();
        expect((await b.stores.audit.page({ resourceType: "flag" }, 10)).entries.map((e) => e.resource.id)).toEqual(["f2", "f1"]);
      });
    });

    test("list: by key; filtered by a state row in an environment, and by its value", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        for (const [id, key] of [["f1", "charlie"], ["f2", "alpha"], ["f3", "bravo"]] as const) await seedFlag(flags, p, flag(id, key));
        await put(flags, p, "charlie", "p1-e1", { enabled: true, rolloutPercentage: 25 });
        await put(flags, p, "alpha", "p1-e1", { enabled: false, rolloutPercentage: null });
        await put(flags, p, "bravo", "p1-e2", { enabled: true, rolloutPercentage: null });
        const keys = async (filter: FlagFilter) => (await flags.list(p.id, filter, ALL)).rows.map((f) => f.key);
        expect(await keys({})).toEqual(["alpha", "bravo", "charlie"]);
        expect(await keys({ environmentId: "p1-e1" })).toEqual(["alpha", "charlie"]);
        expect(await keys({ environmentId: "p1-e1", enabled: true })).toEqual(["charlie"]);
        expect(await keys({ environmentId: "p1-e1", enabled: false })).toEqual(["alpha"]);
        expect(await keys({ environmentId: "p1-e2", enabled: false })).toEqual([]);
        expect(await keys({ q: "FLAG BR" })).toEqual(["bravo"]);
        expect((await flags.list(p.id, {}, ALL)).rows[0]).toEqual({ id: "f2", key: "alpha", name: "Flag alpha", createdAt: T0, updatedAt: T0, stale: null });
        // Paged in the store: the page's rows and the total of the filter.
        const page = await flags.list(p.id, {}, { limit: 1, offset: 1 });
        expect([page.rows.map((f) => f.key), page.total]).toEqual([["bravo"], 3]);
        expect(await flags.list(p.id, { environmentId: "p1-e1" }, { limit: 1, offset: 5 })).toEqual({ rows: [], total: 2 });
        expect(await flags.list("p-none", {}, ALL)).toEqual({ rows: [], total: 0 });
      });
    });

    test("putState inserts then replaces; state and statesOf read it back; no change: nothing written", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        await seedFlag(flags, p, flag("f1", "a"));
        await seedFlag(flags, p, flag("f2", "b"));
        expect(await flags.state("f1", "p1-e1")).toBeUndefined();
        let seen: unknown = "not called";
        await flags.putState(AUTHOR, p.id, "a", "p1-e1", (f, current) => {
          seen = [f?.id, current];
          return { result: { enabled: true, rolloutPercentage: 10, updatedAt: T1 }, changes: [change("flag_state", "f1", "a", p, "enabled")] };
        });
        expect(seen).toEqual(["f1", undefined]);
        await flags.putState(AUTHOR, p.id, "a", "p1-e1", (_f, current) => {
          seen = current;
          return { result: { enabled: false, rolloutPercentage: null, updatedAt: T2 }, changes: [change("flag_state", "f1", "a", p, "disabled")] };
        });
        expect(seen).toEqual({ enabled: true, rolloutPercentage: 10, updatedAt: T1 });
        await flags.putState(AUTHOR, p.id, "a", "p1-e1", () => ({ result: { enabled: true, rolloutPercentage: 99, updatedAt: T2 }, changes: [] }));
        await put(flags, p, "a", "p1-e2", { enabled: true, rolloutPercentage: 50 });
        await put(flags, p, "b", "p1-e2", { enabled: true, rolloutPercentage: null });
        expect(await flags.state("f1", "p1-e1")).toEqual({ enabled: false, rolloutPercentage: null, updatedAt: T2 });
        const states = await flags.statesOf(["f1"]);
        expect(states.sort((x, y) => x.environmentId.localeCompare(y.environmentId))).toEqual([
          { flagId: "f1", environmentId: "p1-e1", enabled: false, rolloutPercentage: null, updatedAt: T2 },
          { flagId: "f1", environmentId: "p1-e2", enabled: true, rolloutPercentage: 50, updatedAt: T1 },
        ]);
        expect((await flags.statesOf(["f1", "f2"])).length).toBe(3);
        expect(await flags.statesOf([])).toEqual([]);
        await expect(flags.putState(AUTHOR, p.id, "a", "p1-e1", () => refuse())).rejects.toBeInstanceOf(Refused);
        expect((await flags.state("f1", "p1-e1"))!.enabled).toBe(false);
      });
    });

    test("update: decide sees the flag and what writes check; the result is stored; a refusal or no change writes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        const f = await seedFlag(flags, p, flag("f1", "a", { variants: [{ key: "x" }, { key: "y" }] }));
        await seedFlag(flags, p, flag("f2", "b", { prerequisites: [{ flagKey: "a", variant: "x" }] }));
        const before = (await b.stores.audit.page({}, 100)).entries.length;
        await expect(flags.update(AUTHOR, p.id, "a", () => refuse())).rejects.toBeInstanceOf(Refused);
        await flags.update(AUTHOR, p.id, "a", (current) => ({ result: { ...current!, name: "unsaved" }, changes: [] }));
        expect(await flags.find(p.id, "a")).toEqual(f);
        expect((await b.stores.audit.page({}, 100)).entries.length).toBe(before);
        let links: unknown;
        const next = { ...f, name: "Renamed", description: "now described", prerequisites: [{ flagKey: "b" }], updatedAt: T1 };
        await flags.update(AUTHOR, p.id, "a", (current, reads) => {
          links = reads.links().sort((x, y) => x.key.localeCompare(y.key));
          expect(reads.segmentKeys()).toEqual(new Set());
          expect(current).toEqual(f);
          return { result: next, changes: [change("flag", f.id, f.key, p, "updated")] };
        });
        expect(links).toEqual([
          { key: "a", variants: ["x", "y"], prerequisites: [] },
          { key: "b", variants: [], prerequisites: [{ flagKey: "a", variant: "x" }] },
        ]);
        expect(await flags.find(p.id, "a")).toEqual(next);
      });
    });

    test("remove: decide sees the states by environment slug and the dependants; the flag goes with its states; a refusal removes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        await seedFlag(flags, p, flag("f1", "a"));
        await seedFlag(flags, p, flag("f2", "b", { prerequisites: [{ flagKey: "a" }] }));
        await seedFlag(flags, p, flag("f3", "c"));
        await put(flags, p, "a", "p1-e2", { enabled: true, rolloutPercentage: 5 });
        let seen: unknown;
        await expect(
          flags.remove(AUTHOR, p.id, "a", (current, states, dependants) => {
            seen = { id: current?.id, states, dependants };
            return refuse();
          }),
        ).rejects.toBeInstanceOf(Refused);
        expect(seen).toEqual({ id: "f1", states: { prod: { enabled: true, rolloutPercentage: 5 } }, dependants: ["b"] });
        expect(await flags.find(p.id, "a")).toBeDefined();
        await flags.remove(AUTHOR, p.id, "c", (current) => change("flag", current!.id, "c", p, "deleted"));
        await flags.remove(AUTHOR, p.id, "b", (current) => change("flag", current!.id, "b", p, "deleted"));
        await flags.remove(AUTHOR, p.id, "a", (current, _s, dependants) => {
          expect(dependants).toEqual([]);
          return change("flag", current!.id, "a", p, "deleted");
        });
        expect(await flags.list(p.id, {}, ALL)).toEqual({ rows: [], total: 0 });
        expect(await flags.statesOf(["f1"])).toEqual([]);
      });
    });
    test("the snapshot's source: projectIds, a project's environments, definitions (by key), states and segments; definition, segment, stateIn; undefined once gone", async () => {
      await onFresh(makeBackend, async (b) => {
        const flags = b.stores.flags;
        const p = await seedProject(b.stores.projects);
        await seedProject(b.stores.projects, "p2", "beta");
        const conditions = [{ attribute: "country", operator: "equals" as const, value: "FR" }];
        await b.stores.segments.create(AUTHOR, p.id, { id: "s1", key: "fr", name: "FR", conditions, included: ["u1"], excluded: [], createdAt: T0, updatedAt: T0 }, change("segment", "s1", "fr", p));
        await seedFlag(flags, p, flag("f1", "zulu", { variants: [{ key: "on" }], bucketBy: "accountId" }));
        await seedFlag(flags, p, flag("f2", "alpha", { prerequisites: [{ flagKey: "zulu" }] }));
        await put(flags, p, "zulu", "p1-e2", { enabled: true, rolloutPercentage: 12.5 });
        expect((await flags.projectIds()).sort()).toEqual(["p1", "p2"]);
        const data = await flags.project(p.id);
        expect({ ...data!, states: undefined }).toEqual({
          slug: "alpha",
          environmentIds: ["p1-e1", "p1-e2"],
          environmentSlugs: ["dev", "prod"],
          flags: [
            { key: "alpha", variants: [], rules: [], bucketBy: null, prerequisites: [{ flagKey: "zulu" }] },
            { key: "zulu", variants: [{ key: "on" }], rules: [], bucketBy: "accountId", prerequisites: null },
          ],
          states: undefined,
          segments: [{ key: "fr", conditions, included: ["u1"], excluded: [] }],
        });
        expect(data!.states).toEqual([{ flagKey: "zulu", environmentId: "p1-e2", state: { enabled: true, rolloutPercentage: 12.5 } }]);
        expect(await flags.definition("f1")).toEqual(data!.flags[1]!);
        expect(await flags.segment("s1")).toEqual(data!.segments![0]!);
        expect(await flags.stateIn("f1", p.id, "prod")).toEqual({ environmentId: "p1-e2", state: { enabled: true, rolloutPercentage: 12.5 } });
        expect(await flags.stateIn("f1", p.id, "dev")).toEqual({ environmentId: "p1-e1", state: null });
        expect(await flags.stateIn("f1", p.id, "nope")).toBeUndefined();
        expect(await flags.project("p-none")).toBeUndefined();
        expect(await flags.definition("f-none")).toBeUndefined();
        expect(await flags.segment("s-none")).toBeUndefined();
      });
    });
  });
}
