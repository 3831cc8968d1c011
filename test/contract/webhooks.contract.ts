/** WebhookStore (src/modules/webhooks/store.ts) through its interface, its deliveries queued by the outbox participant. */
import { describe, expect, test } from "bun:test";
import { Outbox } from "../../src/modules/webhooks/outbox";
import type { StoredWebhook, WebhookStore } from "../../src/modules/webhooks/store";
import { AUTHOR, change, flag, onFresh, refuse, Refused, seedFlag, seedProject, T0, T1, type MakeBackend } from "./backend";

const webhook = (id: string, createdAt = T0, over: Partial<StoredWebhook> = {}): StoredWebhook => ({
  id,
  projectId: "p1",
  projectSlug: "alpha",
  url: `https://hooks.example.com/${id}`,
  events: ["flag.created"],
  environments: ["prod"],
  description: null,
  enabled: true,
  secret: `secret-of-${id}-0123456789`,
  createdAt,
  updatedAt: createdAt,
  ...over,
});

export function describeWebhookStoreContract(makeBackend: MakeBackend) {
  describe("WebhookStore contract", () => {
    test("create, find with its secret, list oldest first without it, update (a refusal writes nothing), remove", async () => {
      await onFresh(makeBackend, async (b) => {
        const hooks: WebhookStore = b.stores.webhooks;
        const p = await seedProject(b.stores.projects);
        await hooks.create(AUTHOR, webhook("w2", T1), change("webhook", "w2", null, p));
        await hooks.create(AUTHOR, webhook("w1", T0, { description: "first", environments: [] }), change("webhook", "w1", null, p));
        expect(await hooks.find("w1")).toEqual(webhook("w1", T0, { description: "first", environments: [] }));
        const { secret: _s, projectId: _p, ...record } = webhook("w1", T0, { description: "first", environments: [] });
        expect((await hooks.list(p.id))[0]).toEqual(record);
        expect((await hooks.list(p.id)).map((w) => w.id)).toEqual(["w1", "w2"]);
        await expect(hooks.update(AUTHOR, "w1", () => refuse())).rejects.toBeInstanceOf(Refused);
        await hooks.update(AUTHOR, "w1", (c) => ({ result: { ...c!, enabled: false, events: ["flag.deleted", "flag.enabled"], updatedAt: T1 }, changes: [change("webhook", "w1", null, p, "updated")] }));
        expect(await hooks.find("w1")).toMatchObject({ enabled: false, events: ["flag.deleted", "flag.enabled"], updatedAt: T1 });
        await expect(hooks.remove(AUTHOR, "w2", () => refuse())).rejects.toBeInstanceOf(Refused);
        await hooks.remove(AUTHOR, "w2", (c) => change("webhook", c!.id, null, p, "deleted"));
        expect(await hooks.find("w2")).toBeUndefined();
        expect((await hooks.list(p.id)).map((w) => w.id)).toEqual(["w1"]);
      });
    });

    test("deliveries: queued in the commit for each taker, newest first, by status; redeliver and attemptNow; removed with the webhook", async () => {
      await onFresh(makeBackend, async (b, { clock }) => {
        const hooks = b.stores.webhooks;
        const kicked: string[] = [];
        const outbox = new Outbox((tx: Parameters<typeof hooks.outboxRows>[0]) => hooks.outboxRows(tx), { kick: (ids) => void kicked.push(...(ids ?? [])) });
        b.changeLog.participate(outbox.participant);
        const p = await seedProject(b.stores.projects);
        await hooks.create(AUTHOR, webhook("w1"), change("webhook", "w1", null, p));
        await hooks.create(AUTHOR, webhook("w2", T0, { events: ["flag.deleted"] }), change("webhook", "w2", null, p));
        await seedFlag(b.stores.flags, p, flag("f1", "a"));
        clock.ms += 1000;
        await seedFlag(b.stores.flags, p, flag("f2", "b"));
        expect(kicked).toEqual(["w1", "w1"]);
        const list = await hooks.deliveries("w1", { limit: 10 });
        expect(list.map((d) => [d.event, d.status, d.attempts, d.createdAt])).toEqual([
          ["flag.created", "pending", 0, "2026-11-22T10:00:01.000Z"],
          ["flag.created", "pending", 0, T0],
        ]);
        expect(await hooks.deliveries("w1", { limit: 1 })).toEqual([list[0]!]);
        expect(await hooks.deliveries("w1", { limit: 10, status: "failed" })).toEqual([]);
        expect(await hooks.deliveries("w2", { limit: 10 })).toEqual([]);

        clock.ms = Date.parse(T1);
        await expect(hooks.redeliver(list[1]!.id, () => refuse())).rejects.toBeInstanceOf(Refused);
        const again = await hooks.redeliver(list[1]!.id, (original, w) => {
          expect([original?.id, w?.id]).toEqual([list[1]!.id, "w1"]);
          return T1;
        });
        expect(again).toMatchObject({ webhookId: "w1", eventId: list[1]!.eventId, status: "pending", redeliveryOf: list[1]!.id, nextAttemptAt: T1 });
        expect((await hooks.deliveries("w1", { limit: 10 }))[0]!.id).toBe(again.id);
        const due = await hooks.attemptNow(list[0]!.id, () => T1);
        expect(due.nextAttemptAt).toBe(T1);
        expect((await hooks.attemptNow(list[0]!.id, () => null)).nextAttemptAt).toBe(T1);
        await hooks.remove(AUTHOR, "w1", (c) => change("webhook", c!.id, null, p, "deleted"));
        expect(await hooks.deliveries("w1", { limit: 10 })).toEqual([]);
      });
    });
  });
}
