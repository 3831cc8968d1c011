/** The change log (src/changes/log.ts), through its interface: commit, create, participants, publication. */
import { describe, expect, test } from "bun:test";
import type { ChangeEntry } from "../../src/changes/entry";
import { AUTHOR, change, onFresh, project, refuse, Refused, T0, type ContractBackend, type MakeBackend } from "./backend";

export function describeChangeLogContract(makeBackend: MakeBackend) {
  describe("ChangeLog contract", () => {
    const entries = async (b: ContractBackend) => (await b.stores.audit.page({}, 100)).entries;

    test("a commit appends its entries with strictly increasing positions, at the clock's time, by its author, and publishes them in commit order", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const first = await b.changeLog.commit(AUTHOR, async () => ({ result: "one", changes: [change("user", "u1", "a@x"), change("user", "u2", "b@x")] }));
        const second = await b.changeLog.commit(AUTHOR, async () => ({ result: "two", changes: [change("user", "u3", "c@x")] }));
        expect([first, second]).toEqual(["one", "two"]);
        expect(published.map((batch) => batch.map((e) => e.resource.id))).toEqual([["u1", "u2"], ["u3"]]);
        const flat = published.flat();
        for (let i = 1; i < flat.length; i++) expect(flat[i]!.position).toBeGreaterThan(flat[i - 1]!.position);
        expect(flat[0]).toMatchObject({ at: T0, actor: AUTHOR.actor, requestId: "req_contract", resource: { type: "user", id: "u1", key: "a@x" }, action: "created" });
        // What is read back is what was published: newest first.
        const stored = await entries(b);
        expect(stored.map((e) => [e.position, e.resource.id])).toEqual(flat.map((e) => [e.position, e.resource.id]).reverse());
      });
    });

    test("a commit of 5,000 entries (an import) appends them all, in order, in one publication", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const many = Array.from({ length: 5000 }, (_, i) => change("flag", `f${i}`, `flag-${i}`));
        await b.changeLog.commit(AUTHOR, async () => ({ result: undefined, changes: many }));
        expect(published).toHaveLength(1);
        expect(published[0]!.map((e) => e.resource.id)).toEqual(many.map((c) => c.resource.id));
        const positions = published[0]!.map((e) => e.position);
        for (let i = 1; i < positions.length; i++) expect(positions[i]!).toBeGreaterThan(positions[i - 1]!);
        expect((await b.stores.audit.page({}, 1)).entries[0]).toMatchObject({ position: positions.at(-1), resource: { id: "f4999" } });
      });
    });

    test("a commit without changes appends nothing and publishes nothing", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        expect(await b.changeLog.commit(AUTHOR, async () => ({ result: 7, changes: [] }))).toBe(7);
        expect(published).toEqual([]);
        expect(await entries(b)).toEqual([]);
      });
    });

    test("a write that throws stores nothing and appends nothing; participants and subscribers never hear of it", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        let participated = 0;
        b.changeLog.participate(async () => void participated++);
        // A write that refuses, by itself or in a store's decide.
        const p = project("p1", "alpha");
        await expect(
          b.changeLog.commit(AUTHOR, async () => {
            refuse();
          }),
        ).rejects.toBeInstanceOf(Refused);
        await expect(b.stores.projects.update(AUTHOR, "alpha", () => refuse())).rejects.toBeInstanceOf(Refused);
        expect(await b.stores.projects.list()).toEqual([]);
        expect(participated).toBe(0);
        expect(published).toEqual([]);
        expect(await entries(b)).toEqual([]);
        // The log still takes the next write.
        expect(await b.stores.projects.create(AUTHOR, p, change("project", "p1", "alpha"))).toBe(true);
        expect((await entries(b)).map((e) => e.resource.id)).toEqual(["p1"]);
      });
    });

    test("a participant sees the entries in the transaction; its effect runs after the commit, after publication", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const order: string[] = [];
        let seen: ChangeEntry[] = [];
        b.changeLog.participate(async (_tx, es) => {
          seen = [...es];
          order.push("participant");
          return () => {
            order.push(`effect:${published.length}`);
          };
        });
        await b.changeLog.commit(AUTHOR, async () => ({ result: undefined, changes: [change("user", "u1", "a@x")] }));
        expect(seen.map((e) => e.resource.id)).toEqual(["u1"]);
        expect(order).toEqual(["participant", "effect:1"]);
      });
    });

    test("a participant that throws rolls the whole write back: nothing stored, nothing appended, no effect, nothing published", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        let effects = 0;
        b.changeLog.participate(async () => () => void effects++);
        b.changeLog.participate(async (_tx, es) => {
          if (es.some((e) => e.resource.id === "p2")) throw new Error("participant refuses");
          return undefined;
        });
        expect(await b.stores.projects.create(AUTHOR, project("p1", "alpha"), change("project", "p1", "alpha"))).toBe(true);
        await expect(b.stores.projects.create(AUTHOR, project("p2", "beta"), change("project", "p2", "beta"))).rejects.toThrow("participant refuses");
        expect((await b.stores.projects.list()).map((p) => p.slug)).toEqual(["alpha"]);
        expect((await entries(b)).map((e) => e.resource.id)).toEqual(["p1"]);
        expect(effects).toBe(1);
        expect(published.map((batch) => batch.map((e) => e.resource.id))).toEqual([["p1"]]);
      });
    });

    test("create: false on a unique violation, with nothing appended; concurrent commits are serialised in call order", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        expect(await b.stores.projects.create(AUTHOR, project("p1", "alpha"), change("project", "p1", "alpha"))).toBe(true);
        expect(await b.stores.projects.create(AUTHOR, project("p2", "alpha"), change("project", "p2", "alpha"))).toBe(false);
        const ids = ["u1", "u2", "u3", "u4", "u5"];
        await Promise.all(ids.map((id) => b.changeLog.commit(AUTHOR, async () => ({ result: id, changes: [change("user", id, null)] }))));
        const flat = published.flat();
        expect(flat.map((e) => e.resource.id)).toEqual(["p1", ...ids]);
        for (let i = 1; i < flat.length; i++) expect(flat[i]!.position).toBeGreaterThan(flat[i - 1]!.position);
        expect((await entries(b)).length).toBe(6);
      });
    });
  });
}
