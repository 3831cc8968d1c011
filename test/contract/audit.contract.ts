/** AuditStore (src/modules/audit/store.ts): the change log as it is read, through its interface. */
import { describe, expect, test } from "bun:test";
import type { AuditStore } from "../../src/modules/audit/store";
import { AUTHOR, change, onFresh, type MakeBackend } from "./backend";

export function describeAuditStoreContract(makeBackend: MakeBackend) {
  describe("AuditStore contract", () => {
    test("entries appear as committed, newest first, positions increasing; filters; keyset paging; after; latestChange; prune", async () => {
      await onFresh(makeBackend, async (b, { clock }) => {
        const audit: AuditStore = b.stores.audit;
        const p = { id: "p1", slug: "alpha" };
        const other = { actor: { type: "user" as const, id: "usr_1", label: "ann@example.com" }, requestId: "req_2" };
        const at = (h: number) => `2026-11-22T${String(10 + h).padStart(2, "0")}:00:00.000Z`;
        const writes = [
          [AUTHOR, change("flag", "f1", "a", p)],
          [other, change("flag", "f1", "a", p, "updated")],
          [AUTHOR, change("user", "u1", "x@example.com")],
          [other, { ...change("flag_state", "f1", "a", p, "enabled"), environment: "prod" }],
          [AUTHOR, change("flag", "f2", "b", { id: "p2", slug: "beta" })],
        ] as const;
        for (const [i, [author, draft]] of writes.entries()) {
          clock.ms = Date.parse(at(i));
          await b.changeLog.commit(author, async () => ({ result: undefined, changes: [draft] }));
        }
        const all = (await audit.page({}, 100)).entries;
        expect(all.map((e) => e.resource.id)).toEqual(["f2", "f1", "u1", "f1", "f1"]);
        for (let i = 1; i < all.length; i++) expect(all[i]!.position).toBeLessThan(all[i - 1]!.position);
        expect(all[1]).toMatchObject({ at: at(3), actor: other.actor, requestId: "req_2", project: p, environment: "prod", action: "enabled", resource: { type: "flag_state", id: "f1", key: "a" } });
        const pos = all.map((e) => e.position).reverse() as [number, number, number, number, number]; // oldest first
        const ids = async (f: Parameters<AuditStore["page"]>[0], limit = 100) => (await audit.page(f, limit)).entries.map((e) => e.position);
        expect(await ids({ projectId: "p1" })).toEqual([pos[3], pos[1], pos[0]]);
        expect(await ids({ resourceType: "flag" })).toEqual([pos[4], pos[1], pos[0]]);
        expect(await ids({ resourceKey: "a" })).toEqual([pos[3], pos[1], pos[0]]);
        expect(await ids({ actorId: "usr_1" })).toEqual([pos[3], pos[1]]);
        expect(await ids({ actorEmail: "ann@example.com" })).toEqual([pos[3], pos[1]]);
        expect(await ids({ action: "updated" })).toEqual([pos[1]]);
        expect(await ids({ since: at(1), until: at(3) })).toEqual([pos[2], pos[1]]);
        expect(await ids({ projectId: "p1", resourceType: "flag", action: "created" })).toEqual([pos[0]]);
        // Keyset pages: each below the last of the one before.
        expect(await ids({}, 2)).toEqual([pos[4], pos[3]]);
        expect(await ids({ before: pos[3] }, 2)).toEqual([pos[2], pos[1]]);
        expect(await ids({ before: pos[1] }, 2)).toEqual([pos[0]]);
        expect((await audit.page({ projectId: "p1" }, 100)).resumeBelow).toBeNull();
        // Oldest first after a position.
        const after = await audit.after({}, pos[1], 2);
        expect(after.entries.map((e) => e.position)).toEqual([pos[2], pos[3]]);
        expect((await audit.after({}, pos[3], 10)).entries.map((e) => e.position)).toEqual([pos[4]]);
        expect((await audit.after({ resourceKey: "a" }, pos[0], 10)).entries.map((e) => e.position)).toEqual([pos[1], pos[3]]);
        // The latest change of a resource (of its state in an environment).
        expect((await audit.latestChange({ type: "flag", id: "f1", key: "a" }, null))?.position).toBe(pos[1]);
        expect((await audit.latestChange({ type: "flag_state", id: "f1", key: "a" }, "prod"))?.position).toBe(pos[3]);
        expect(await audit.latestChange({ type: "flag_state", id: "f1", key: "a" }, "dev")).toBeUndefined();
        // Retention: older than the cutoff, in batches; the newest always stays.
        expect(await audit.prune(at(2), 1)).toBe(2);
        expect(await ids({})).toEqual([pos[4], pos[3], pos[2]]);
        expect(await audit.prune(at(9), 10)).toBe(2);
        expect(await ids({})).toEqual([pos[4]]);
        await b.changeLog.commit(AUTHOR, async () => ({ result: undefined, changes: [change("user", "u9", null)] }));
        const [newest] = await ids({});
        expect(newest).toBeGreaterThan(pos[4]);
      });
    });
  });
}
