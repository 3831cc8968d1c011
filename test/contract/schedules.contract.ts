/** ScheduleStore (src/modules/schedules/store.ts) through its interface, with its change-log participant. */
import { describe, expect, test } from "bun:test";
import type { Schedule, ScheduleStore } from "../../src/modules/schedules/store";
import type { Project } from "../../src/modules/projects/store";
import { AUTHOR, change, flag, onFresh, refuse, Refused, seedFlag, seedProject, T0, T1, T2, type MakeBackend } from "./backend";

const schedule = (p: Project, id: string, at: string, over: Partial<Schedule> = {}): Schedule => ({
  id,
  projectId: p.id,
  flagId: "f1",
  flagKey: "a",
  environmentId: "p1-e1",
  environment: "dev",
  at,
  state: { enabled: true, rolloutPercentage: 20 },
  status: "pending",
  createdBy: AUTHOR.actor,
  createdAt: T0,
  appliedAt: null,
  error: null,
  ...over,
});

export function describeScheduleStoreContract(makeBackend: MakeBackend) {
  describe("ScheduleStore contract", () => {
    async function seed(schedules: ScheduleStore, p: Project): Promise<Schedule[]> {
      const rows = [schedule(p, "sch_c", T2), schedule(p, "sch_b", T1), schedule(p, "sch_a", T2, { flagId: "f2", flagKey: "b", state: { enabled: false } })];
      await schedules.create(AUTHOR, rows, rows.map((s) => change("schedule", s.id, s.flagKey, p)));
      return rows;
    }

    test("create (all in one commit), find, list by at then id, filtered by flag and status; countPending; due", async () => {
      await onFresh(makeBackend, async (b, { published }) => {
        const schedules: ScheduleStore = b.stores.schedules;
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        await seedFlag(b.stores.flags, p, flag("f2", "b"));
        const rows = await seed(schedules, p);
        expect(published.at(-1)!.map((e) => e.resource.id)).toEqual(["sch_c", "sch_b", "sch_a"]);
        expect(await schedules.find(p.id, "sch_a")).toEqual(rows[2]!);
        expect(await schedules.find("p-other", "sch_a")).toBeUndefined();
        expect((await schedules.list(p.id, {})).map((s) => s.id)).toEqual(["sch_b", "sch_a", "sch_c"]);
        expect((await schedules.list(p.id, { flagId: "f1" })).map((s) => s.id)).toEqual(["sch_b", "sch_c"]);
        expect(await schedules.countPending()).toBe(3);
        expect(await schedules.countPending(T1)).toBe(1);
        expect((await schedules.due(T2, 2)).map((s) => s.id)).toEqual(["sch_b", "sch_a"]);
        expect(await schedules.due(T0, 10)).toEqual([]);
      });
    });

    test("update: cancel is stored; a refusal or no change writes nothing; markApplied moves a pending one only", async () => {
      await onFresh(makeBackend, async (b) => {
        const schedules: ScheduleStore = b.stores.schedules;
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        await seedFlag(b.stores.flags, p, flag("f2", "b"));
        await seed(schedules, p);
        await expect(schedules.update(AUTHOR, p.id, "sch_b", () => refuse())).rejects.toBeInstanceOf(Refused);
        await schedules.update(AUTHOR, p.id, "sch_b", (current) => ({ result: { ...current!, status: "failed" }, changes: [] }));
        expect((await schedules.find(p.id, "sch_b"))!.status).toBe("pending");
        const cancelled = await schedules.update(AUTHOR, p.id, "sch_b", (current) => ({ result: { ...current!, status: "cancelled" }, changes: [change("schedule", "sch_b", "a", p, "updated")] }));
        expect(cancelled.status).toBe("cancelled");
        expect((await schedules.list(p.id, { status: "cancelled" })).map((s) => s.id)).toEqual(["sch_b"]);
        await schedules.markApplied("sch_b", T2);
        expect((await schedules.find(p.id, "sch_b"))!.status).toBe("cancelled");
        await schedules.markApplied("sch_c", T2);
        expect(await schedules.find(p.id, "sch_c")).toMatchObject({ status: "applied", appliedAt: T2 });
        expect(await schedules.countPending()).toBe(1);
      });
    });

    test("its participant marks a schedule applied by the schedule's own state write, in that commit; another request's write does not", async () => {
      await onFresh(makeBackend, async (b, { clock }) => {
        const schedules = b.stores.schedules;
        b.changeLog.participate(schedules.participant);
        const p = await seedProject(b.stores.projects);
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        await seedFlag(b.stores.flags, p, flag("f2", "b"));
        await seed(schedules, p);
        clock.ms = Date.parse(T1);
        const putBy = (requestId: string) =>
          b.stores.flags.putState({ actor: AUTHOR.actor, requestId }, p.id, "a", "p1-e1", () => ({ result: { enabled: true, rolloutPercentage: 20, updatedAt: T1 }, changes: [change("flag_state", "f1", "a", p, "enabled")] }));
        await putBy("req_other");
        await putBy("sch_c"); // its time has not come
        expect((await schedules.list(p.id, { status: "pending" })).map((s) => s.id)).toEqual(["sch_b", "sch_a", "sch_c"]);
        await putBy("sch_b");
        expect(await schedules.find(p.id, "sch_b")).toMatchObject({ status: "applied", appliedAt: T1 });
        expect(await schedules.countPending()).toBe(2);
      });
    });
  });
}
