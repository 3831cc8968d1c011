/** ProjectStore (src/modules/projects/store.ts), with its environments, through its interface. */
import { describe, expect, test } from "bun:test";
import type { ProjectStore } from "../../src/modules/projects/store";
import type { FlagStore } from "../../src/modules/flags/store";
import { AUTHOR, change, env, flag, onFresh, project, refuse, Refused, seedFlag, seedProject, T1, type MakeBackend } from "./backend";

export function describeProjectStoreContract(makeBackend: MakeBackend) {
  describe("ProjectStore contract", () => {
    test("create, bySlug, list by slug with environments in the order added, count; a taken slug: false", async () => {
      await onFresh(makeBackend, async (b) => {
        const projects: ProjectStore = b.stores.projects;
        const z = project("pz", "zeta", [env("ez2", "staging"), env("ez1", "dev")]);
        expect(await projects.create(AUTHOR, z, change("project", "pz", "zeta"))).toBe(true);
        const a = await seedProject(projects, "pa", "alpha");
        expect(await projects.create(AUTHOR, project("px", "zeta"), change("project", "px", "zeta"))).toBe(false);
        expect(await projects.count()).toBe(2);
        expect(await projects.bySlug("zeta")).toEqual(z);
        expect(await projects.bySlug("nope")).toBeUndefined();
        const all = await projects.list();
        expect(all.map((p) => p.slug)).toEqual(["alpha", "zeta"]);
        expect(all[1]!.environments.map((e) => e.slug)).toEqual(["staging", "dev"]);
        expect(await projects.list("pa")).toEqual([a]);
        expect((await b.stores.audit.page({}, 10)).entries.map((e) => e.resource.id)).toEqual(["pa", "pz"]);
      });
    });

    test("update writes what decide returns; a refusal writes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const projects: ProjectStore = b.stores.projects;
        const p = await seedProject(projects);
        const updated = await projects.update(AUTHOR, "alpha", (current) => ({
          result: { ...current!, name: "Renamed", staleAfterDays: 7, updatedAt: T1 },
          changes: [change("project", p.id, p.slug, null, "updated")],
        }));
        expect(updated.name).toBe("Renamed");
        await expect(projects.update(AUTHOR, "alpha", () => refuse())).rejects.toBeInstanceOf(Refused);
        expect(await projects.bySlug("alpha")).toMatchObject({ name: "Renamed", staleAfterDays: 7, updatedAt: T1 });
        expect((await b.stores.audit.page({}, 10)).entries.length).toBe(2);
      });
    });

    test("environments: create (appended last), update, remove with its flag states; a taken slug refuses", async () => {
      await onFresh(makeBackend, async (b) => {
        const projects: ProjectStore = b.stores.projects;
        const flags: FlagStore = b.stores.flags;
        const p = await seedProject(projects);
        const created = await projects.createEnvironment(AUTHOR, "alpha", (current) => {
          expect(current?.id).toBe(p.id);
          return { result: env("p1-e3", "qa"), changes: [change("environment", "p1-e3", "qa", p)] };
        });
        expect(created.slug).toBe("qa");
        await expect(projects.createEnvironment(AUTHOR, "alpha", () => ({ result: env("p1-e4", "qa"), changes: [change("environment", "p1-e4", "qa", p)] }))).rejects.toThrow();
        await projects.updateEnvironment(AUTHOR, "alpha", (current) => ({ result: { ...current!.environments[2]!, name: "Quality" }, changes: [change("environment", "p1-e3", "qa", p, "updated")] }));
        expect((await projects.bySlug("alpha"))!.environments.map((e) => [e.slug, e.name])).toEqual([["dev", "DEV"], ["prod", "PROD"], ["qa", "Quality"]]);

        const f = await seedFlag(flags, p, flag("f1", "checkout"));
        for (const e of ["p1-e1", "p1-e3"])
          await flags.putState(AUTHOR, p.id, "checkout", e, () => ({ result: { enabled: true, rolloutPercentage: null, updatedAt: T1 }, changes: [change("flag_state", f.id, f.key, p, "enabled")] }));
        let contents: unknown;
        await projects.removeEnvironment(AUTHOR, "alpha", "qa", (current, c) => {
          contents = c;
          return { result: current!.environments.find((e) => e.slug === "qa")!, changes: [change("environment", "p1-e3", "qa", p, "deleted")] };
        });
        expect(contents).toEqual({ flags: ["checkout"], apiKeys: [] });
        expect((await projects.bySlug("alpha"))!.environments.map((e) => e.slug)).toEqual(["dev", "prod"]);
        expect((await flags.statesOf([f.id])).map((s) => s.environmentId)).toEqual(["p1-e1"]);
      });
    });

    test("remove: the project and everything in it; decide sees its contents; a refusal removes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const projects: ProjectStore = b.stores.projects;
        const p = await seedProject(projects);
        await seedProject(projects, "p2", "beta");
        await seedFlag(b.stores.flags, p, flag("f2", "zz"));
        await seedFlag(b.stores.flags, p, flag("f1", "aa"));
        await expect(projects.remove(AUTHOR, "alpha", () => refuse())).rejects.toBeInstanceOf(Refused);
        expect(await projects.count()).toBe(2);
        let seen: unknown;
        await projects.remove(AUTHOR, "alpha", (current, contents) => {
          seen = { id: current?.id, flags: contents.flags, apiKeys: contents.apiKeys, webhooks: contents.webhooks };
          return change("project", p.id, p.slug, p, "deleted");
        });
        expect(seen).toEqual({ id: "p1", flags: ["aa", "zz"], apiKeys: [], webhooks: [] });
        expect(await projects.bySlug("alpha")).toBeUndefined();
        expect(await b.stores.flags.find("p1", "aa")).toBeUndefined();
        expect((await projects.list()).map((x) => x.slug)).toEqual(["beta"]);
      });
    });
  });
}
