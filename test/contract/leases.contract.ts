/**
 * LeaseStore (src/modules/leases/store.ts) through its interface. `exclusive`: several nodes
 * share the backend (PostgreSQL), so a live lease of another holder is refused; on SQLite (one
 * process) every `acquire` is granted at once.
 */
import { describe, expect, test } from "bun:test";
import { onFresh, type MakeBackend } from "./backend";

export function describeLeaseStoreContract(makeBackend: MakeBackend, opts: { exclusive: boolean }): void {
  describe("LeaseStore", () => {
    test("acquire, renew and release by the holder; another holder can neither renew nor release it", async () => {
      await onFresh(makeBackend, async (b) => {
        const leases = b.stores.leases;
        expect(await leases.holder("plugin:p1")).toBeNull();
        expect(await leases.acquire("plugin:p1", "node-a", 10_000)).toBe(true);
        expect(await leases.holder("plugin:p1")).toBe("node-a");
        // Its own lease again: granted (renewed).
        expect(await leases.acquire("plugin:p1", "node-a", 10_000)).toBe(true);
        expect(await leases.renew("plugin:p1", "node-a", 10_000)).toBe(true);
        expect(await leases.renew("plugin:p1", "node-b", 10_000)).toBe(false);
        await leases.release("plugin:p1", "node-b");
        expect(await leases.holder("plugin:p1")).toBe("node-a");
        // Names are independent.
        expect(await leases.acquire("integration:i1", "node-b", 10_000)).toBe(true);
        expect(await leases.holder("integration:i1")).toBe("node-b");
        await leases.release("plugin:p1", "node-a");
        expect(await leases.holder("plugin:p1")).toBeNull();
        expect(await leases.renew("plugin:p1", "node-a", 10_000)).toBe(false);
        expect(await leases.acquire("plugin:p1", "node-b", 10_000)).toBe(true);
        expect(await leases.holder("plugin:p1")).toBe("node-b");
      });
    });

    test(opts.exclusive ? "another holder's live lease is refused; once it lapses it is taken over, and the old holder's renewal fails" : "one process: acquire is granted at once, whoever held it; the previous holder's renewal fails", async () => {
      await onFresh(makeBackend, async (b) => {
        const leases = b.stores.leases;
        expect(await leases.acquire("plugin:p1", "node-a", 300)).toBe(true);
        if (opts.exclusive) {
          expect(await leases.acquire("plugin:p1", "node-b", 300)).toBe(false);
          expect(await leases.holder("plugin:p1")).toBe("node-a");
          await Bun.sleep(400);
          expect(await leases.holder("plugin:p1")).toBeNull(); // lapsed
        }
        expect(await leases.acquire("plugin:p1", "node-b", 10_000)).toBe(true);
        expect(await leases.holder("plugin:p1")).toBe("node-b");
        expect(await leases.renew("plugin:p1", "node-a", 10_000)).toBe(false);
      });
    });

    if (opts.exclusive) test("ten holders racing for one lease: exactly one is granted", async () => {
      await onFresh(makeBackend, async (b) => {
        const granted = await Promise.all(Array.from({ length: 10 }, (_, i) => b.stores.leases.acquire("integration:i1", `node-${i}`, 10_000)));
        expect(granted.filter(Boolean)).toHaveLength(1);
        expect(await b.stores.leases.holder("integration:i1")).toBe(`node-${granted.indexOf(true)}`);
      });
    });
  });
}
