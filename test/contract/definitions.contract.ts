/** DefinitionsStore (src/modules/streams/store.ts): what the definitions and change streams read, through its interface. */
import { describe, expect, test } from "bun:test";
import type { DefinitionsStore } from "../../src/modules/streams/store";
import { AUTHOR, change, flag, onFresh, seedFlag, seedProject, T0, T1, type MakeBackend } from "./backend";

export function describeDefinitionsStoreContract(makeBackend: MakeBackend) {
  describe("DefinitionsStore contract", () => {
    test("environment: its flags by key with their state there and the segments they use, at the log's position; records; resume as a patch or the whole", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const defs: DefinitionsStore = b.stores.definitions;
        const p = await seedProject(b.stores.projects);
        const cond = { attribute: "", operator: "in_segment" as const, value: "beta" };
        await b.stores.segments.create(AUTHOR, p.id, { id: "s1", key: "beta", name: "Beta", conditions: [], included: ["u1"], excluded: [], createdAt: T0, updatedAt: T0 }, change("segment", "s1", "beta", p));
        await seedFlag(b.stores.flags, p, flag("f2", "zed", { variants: [{ key: "x" }], bucketBy: "team" }));
        await seedFlag(b.stores.flags, p, flag("f1", "abc", { rules: [{ id: "r1", name: "beta", conditions: [cond], enabled: true, variant: null }], prerequisites: [{ flagKey: "zed" }] }));
        await b.stores.flags.putState(AUTHOR, p.id, "zed", "p1-e2", () => ({ result: { enabled: true, rolloutPercentage: 40, updatedAt: T1 }, changes: [{ ...change("flag_state", "f2", "zed", p, "enabled"), environment: "prod" }] }));
        const position = published.at(-1)!.at(-1)!.position;
        const prod = await defs.environment("p1-e2");
        expect(prod).toEqual({
          version: position,
          project: "alpha",
          environment: "prod",
          flags: [
            { key: "abc", variants: [], rules: [{ id: "r1", name: "beta", conditions: [cond], enabled: true, variant: null }], prerequisites: [{ flagKey: "zed" }], state: { enabled: false, rolloutPercentage: null } },
            { key: "zed", variants: [{ key: "x" }], rules: [], bucketBy: "team", state: { enabled: true, rolloutPercentage: 40 } },
          ],
          segments: [{ key: "beta", conditions: [], included: ["u1"], excluded: [] }],
        });
        expect((await defs.environment("p1-e1"))!.flags.map((f) => f.state.enabled)).toEqual([false, false]);
        expect(await defs.environment("nope")).toBeUndefined();

        const some = await defs.records(p.id, "p1-e2", ["zed", "missing"]);
        expect(some).toEqual({ flags: [prod!.flags[1]!], segments: [] });
        expect((await defs.records(p.id, "p1-e2", [], ["beta"])).flags.map((f) => f.key)).toEqual(["abc"]);

        // After the position of a state write in dev: nothing in prod touched.
        expect(await defs.resume("p1-e2", position, 10)).toEqual({ kind: "patch", position, last: 0, flags: [], deleted: [], segments: [] });
        await b.stores.flags.remove(AUTHOR, p.id, "zed", () => change("flag", "f2", "zed", p, "deleted"));
        const patch = await defs.resume("p1-e2", position, 10);
        expect(patch).toMatchObject({ kind: "patch", flags: [], deleted: ["zed"] });
        expect(patch!.position).toBeGreaterThan(position);
        const whole = await defs.resume("p1-e2", position, 0);
        expect(whole).toMatchObject({ kind: "full", definitions: { project: "alpha", environment: "prod" } });
        expect(whole?.kind === "full" && whole.definitions.flags.map((f) => f.key)).toEqual(["abc"]);
        expect(await defs.resume("nope", 0, 10)).toBeUndefined();
      });
    });
  });
}
