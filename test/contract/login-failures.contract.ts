/** LoginFailureStore (src/modules/auth/store.ts) through its interface. */
import { describe, expect, test } from "bun:test";
import type { LoginFailureStore } from "../../src/modules/auth/store";
import { onFresh, T0, T1, T2, type MakeBackend } from "./backend";

export function describeLoginFailureStoreContract(makeBackend: MakeBackend) {
  describe("LoginFailureStore contract", () => {
    test("fail counts within a window and starts again after it; clear; prune removes ended windows only", async () => {
      await onFresh(makeBackend, async (b) => {
        const failures: LoginFailureStore = b.stores.loginFailures;
        const cutoff = "2026-11-22T09:45:00.000Z"; // T0 - 15 min: a window that began then has ended
        expect(await failures.get("a@example.com")).toBeUndefined();
        expect(await failures.fail("a@example.com", T0, cutoff)).toEqual({ firstAt: T0, count: 1 });
        expect(await failures.fail("a@example.com", T1, cutoff)).toEqual({ firstAt: T0, count: 2 });
        expect(await failures.get("a@example.com")).toEqual({ firstAt: T0, count: 2 });
        // A window that began at the cutoff (or before) has ended: the count starts again.
        expect(await failures.fail("a@example.com", T2, T0)).toEqual({ firstAt: T2, count: 1 });
        expect(await failures.fail("b@example.com", T0, cutoff)).toEqual({ firstAt: T0, count: 1 });
        await failures.fail("c@example.com", T1, cutoff);
        await failures.clear("c@example.com");
        expect(await failures.get("c@example.com")).toBeUndefined();
        expect(await failures.prune(T0)).toBe(1); // b's window (began at T0), not a's (T2)
        expect(await failures.get("b@example.com")).toBeUndefined();
        expect(await failures.get("a@example.com")).toEqual({ firstAt: T2, count: 1 });
      });
    });

    test("failures counted at once are each counted once", async () => {
      await onFresh(makeBackend, async (b) => {
        const counts = await Promise.all(Array.from({ length: 12 }, () => b.stores.loginFailures.fail("a@example.com", T0, "2026-11-22T09:45:00.000Z")));
        expect(counts.map((c) => c.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
      });
    });
  });
}
