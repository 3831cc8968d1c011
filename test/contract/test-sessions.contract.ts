/** TestSessionStore (src/modules/testing/store.ts) through its interface. */
import { describe, expect, test } from "bun:test";
import type { SessionRow, TestSessionStore } from "../../src/modules/testing/store";
import { onFresh, seedProject, T0, T1, T2, type MakeBackend } from "./backend";

const session = (id: string, expiresAt: string): SessionRow => ({ id, token: `tok-${id}`, projectId: "p1", label: id === "s1" ? "e2e" : null, createdAt: T0, expiresAt });

export function describeTestSessionStoreContract(makeBackend: MakeBackend) {
  describe("TestSessionStore contract", () => {
    test("create, overrides put (replacing) and removed, the live ones with their overrides, expired removed with theirs, remove", async () => {
      await onFresh(makeBackend, async (b) => {
        const sessions: TestSessionStore = b.stores.testSessions;
        await seedProject(b.stores.projects);
        await sessions.create(session("s1", T2));
        await sessions.create(session("s2", T1));
        await sessions.create(session("s3", T2));
        await sessions.putOverrides("s1", [["a", true], ["b", "blue"]], T0);
        await sessions.putOverrides("s1", [["b", "green"], ["c", false]], T0);
        await sessions.putOverrides("s2", [["a", false]], T0);
        await sessions.removeOverride("s1", "c");
        const live = async (now: string) => (await sessions.live(Date.parse(now))).sort((x, y) => x.id.localeCompare(y.id));
        const s1 = (await live(T0))[0]!;
        expect(s1).toMatchObject(session("s1", T2));
        expect(s1.overrides.sort()).toEqual([["a", true], ["b", "green"]]);
        expect((await live(T0)).map((s) => s.id)).toEqual(["s1", "s2", "s3"]);
        expect((await live(T1)).map((s) => s.id)).toEqual(["s1", "s3"]);
        expect(await sessions.removeExpired(Date.parse(T1))).toBe(1);
        expect((await live(T0)).map((s) => s.id)).toEqual(["s1", "s3"]);
        // One session by id, expired or not, with its overrides; none once it is gone.
        expect(await sessions.session("s1")).toEqual({ ...session("s1", T2), overrides: [["a", true], ["b", "green"]] });
        expect(await sessions.session("s2")).toBeUndefined();
        expect(await sessions.session("s3")).toEqual({ ...session("s3", T2), overrides: [] });
        await sessions.remove("s1");
        expect(await sessions.session("s1")).toBeUndefined();
        expect((await live(T0)).map((s) => [s.id, s.overrides])).toEqual([["s3", []]]);
      });
    });
  });
}
