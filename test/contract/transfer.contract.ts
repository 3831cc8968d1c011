/** TransferStore (src/modules/transfer/store.ts) through its interface. */
import { describe, expect, test } from "bun:test";
import type { TransferStore } from "../../src/modules/transfer/store";
import { AUTHOR, change, flag, onFresh, refuse, Refused, seedFlag, seedProject, type MakeBackend } from "./backend";

export function describeTransferStoreContract(makeBackend: MakeBackend) {
  describe("TransferStore contract", () => {
    test("snapshot: every table's rows as stored, no local column; write: inserts and updates with their entries; a refusal writes nothing", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const transfer: TransferStore = b.stores.transfer;
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "one", { rules: [{ id: "rule_1", name: "r", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }], enabled: true, variant: null }] }));
        const before = await transfer.snapshot();
        expect(before.projects.map((r) => [r.id, r.slug])).toEqual([["p1", "alpha"]]);
        expect(before.environments.map((r) => r.id).sort()).toEqual(["p1-e1", "p1-e2"]);
        expect(before.flags).toEqual([expect.objectContaining({ id: "f1", key: "one", projectId: "p1", rules: [{ id: "rule_1", name: "r", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }], enabled: true, variant: null }] })]);
        expect(before.settings).toEqual([]);

        await expect(transfer.write(AUTHOR, () => refuse())).rejects.toBeInstanceOf(Refused);
        const renamed = { ...before.flags[0]!, name: "Renamed" };
        const state = { flagId: "f1", environmentId: "p1-e2", enabled: true, rolloutPercentage: 12.5, updatedAt: "2026-11-22T10:00:00.000Z" };
        const plugin = { id: "pl1", projectId: "p1", packageName: "@x/y", version: "1.0.0", enabled: false, status: "disabled", config: { token: "t" }, secretKeys: ["token"], errorMessage: null, eventsHandled: 0, errors: 0, lastEventAt: null, evaluationsDropped: 0, installedAt: "2026-11-22T10:00:00.000Z", seq: 7, updatedAt: "2026-11-22T10:00:00.000Z" };
        const seen: unknown[] = [];
        const result = await transfer.write(AUTHOR, (current) => {
          seen.push(current.flags.map((f) => f.name));
          return { result: "done", upserts: { flags: { insert: [], update: [renamed] }, flagStates: { insert: [state], update: [] }, plugins: { insert: [plugin], update: [] } }, changes: [change("flag", "f1", "one", { id: "p1", slug: "alpha" }, "updated")] };
        });
        expect(result).toBe("done");
        expect(seen).toEqual([["Flag one"]]);
        const after = await transfer.snapshot();
        expect(after.flags[0]!.name).toBe("Renamed");
        expect(after.flagStates).toEqual([state]);
        expect(after.plugins).toEqual([plugin]); // eventPosition is the database's own: never in a snapshot
        expect(published.at(-1)!.map((e) => [e.resource.type, e.action])).toEqual([["flag", "updated"]]);
      });
    });
  });
}
