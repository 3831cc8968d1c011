/**
 * The change-event queue (src/modules/change-events/store.ts) with its readers' stores: the
 * plugin host's (src/plugins/runtime-store.ts), the integrations' sending side
 * (src/modules/integrations/store.ts), and what reads over them: MetricsStore and the
 * CredentialStore (src/modules/{metrics,credentials}/store.ts), through their interfaces.
 */
import { describe, expect, test } from "bun:test";
import type { Actor } from "../../src/changes/entry";
import type { FlagChange } from "../../src/modules/webhooks/events";
import { AUTHOR, change, onFresh, seedProject, T0, T1, type ContractBackend, type MakeBackend } from "./backend";
import { integration, plugin } from "./plugins-integrations.contract";

const ACTOR: Actor = { type: "user", id: "u1", label: "zoe@example.com" };
const flagChange = (flagKey: string, current = true): FlagChange => ({ event: "flag.enabled", environment: "dev", flagKey, previous: !current, current });

/** Queues the changes in a commit's transaction, as the queue does in a flag write. */
async function record(b: ContractBackend, p: { id: string; slug: string }, changes: FlagChange[]): Promise<void> {
  await b.changeLog.commit(AUTHOR, async (tx) => {
    await b.beside.changeEvents(tx).record(p, changes, T1, ACTOR);
    return { result: undefined, changes: [] };
  });
}

export function describeChangeEventQueueContract(makeBackend: MakeBackend) {
  describe("Change-event queue contract", () => {
    test("wants a reader; records in order with payload and actor; readers move forward only; prune keeps the high-water mark", async () => {
      await onFresh(makeBackend, async (b) => {
        const events = b.beside.changeEvents();
        const runtime = b.stores.pluginRuntime;
        const p = await seedProject(b.stores.projects);
        expect(await events.latest()).toBe(0);
        expect(await events.wants(p.id)).toBe(false);
        await b.stores.plugins.install(AUTHOR, plugin("pl1"), change("plugin", "pl1", "audit-mirror", p));
        expect(await events.wants(p.id)).toBe(true);

        await record(b, p, [flagChange("a"), flagChange("b", false)]);
        await record(b, p, [flagChange("c")]);
        const queued = await events.after(p.id, 0, 10);
        expect(queued.map((e) => JSON.parse(e.payload).data.flagKey)).toEqual(["a", "b", "c"]);
        const [first, second, third] = queued.map((e) => e.position);
        expect(first! < second! && second! < third!).toBe(true);
        expect(JSON.parse(queued[1]!.payload)).toMatchObject({ event: "flag.enabled", projectSlug: "alpha", environment: "dev", timestamp: T1, data: { currentState: { enabled: false } } });
        expect(JSON.parse(queued[0]!.actor)).toEqual(ACTOR);
        expect((await events.after(p.id, first!, 1)).map((e) => e.position)).toEqual([second!]);
        expect(await events.latest()).toBe(third!);

        // The plugin host: its position (from its install: 0), forward only; counters added; status.
        expect(await runtime.positionOf("pl1")).toBe(0);
        expect(await runtime.eventsAfter(p.id, 0, 10)).toHaveLength(3);
        await runtime.handed("pl1", second!, { handled: 2, errors: 1, lastEventAt: T1 });
        await runtime.handed("pl1", first!, { handled: 1, errors: 0, lastEventAt: null });
        expect(await runtime.positionOf("pl1")).toBe(second!);
        expect(await b.stores.plugins.find("pl1")).toMatchObject({ eventsHandled: 3, errors: 1, lastEventAt: T1 });
        await runtime.addDropped("pl1", 0);
        await runtime.addDropped("pl1", 5);
        expect(await runtime.droppedOf("pl1")).toBe(5);
        expect(await runtime.positionOf("gone")).toBe(0);
        expect(await runtime.droppedOf("gone")).toBe(0);
        expect([await runtime.runnable("pl1"), await runtime.runnable("gone")]).toEqual([true, false]);
        await runtime.setStatus("pl1", { status: "error", errorMessage: "boom" });
        expect(await b.stores.plugins.find("pl1")).toMatchObject({ status: "error", errorMessage: "boom" });
        expect(await runtime.runnable("pl1")).toBe(false);
        await runtime.setStatus("pl1", { status: "active" });
        expect(await b.stores.plugins.find("pl1")).toMatchObject({ status: "active", errorMessage: null });

        // Prune: what every enabled reader is past.
        await runtime.pruneEvents();
        expect((await events.after(p.id, 0, 10)).map((e) => e.position)).toEqual([third!]);
        // An integration created now starts past everything queued.
        await b.stores.integrations.create(AUTHOR, integration("in1"), change("integration", "in1", "datadog", p));
        expect(await b.beside.integrationRuntime.enabled()).toEqual([{ id: "in1", projectId: p.id, type: "datadog", config: expect.any(String), position: third! }]);
        expect(JSON.parse((await b.beside.integrationRuntime.enabled())[0]!.config)).toEqual(integration("in1").config);
        // No enabled reader left: every row goes, the newest position stays.
        await b.stores.plugins.update(AUTHOR, "pl1", (c) => ({ result: { ...c!, enabled: false, status: "disabled" }, changes: [change("plugin", "pl1", "audit-mirror", p, "updated")] }));
        await runtime.setStatus("pl1", { status: "active" });
        expect(await b.stores.plugins.find("pl1")).toMatchObject({ status: "disabled" });
        await b.stores.integrations.update(AUTHOR, "in1", (c) => ({ result: { ...c!, enabled: false }, changes: [change("integration", "in1", "datadog", p, "updated")] }));
        expect(await events.wants(p.id)).toBe(false);
        await events.prune();
        expect(await events.after(p.id, 0, 10)).toEqual([]);
        expect(await events.latest()).toBe(third!);
        await b.stores.plugins.install(AUTHOR, plugin("pl2"), change("plugin", "pl2", "audit-mirror", p));
        expect(await runtime.positionOf("pl2")).toBe(third!);
        await record(b, p, [flagChange("d")]);
        expect((await events.after(p.id, third!, 10)).map((e) => e.position)).toEqual([await events.latest()]);
        expect(await events.latest()).toBeGreaterThan(third!);
      });
    });

    test("the integrations' sending side: enabled oldest first, stats added with the position (never back), events after a position", async () => {
      await onFresh(makeBackend, async (b) => {
        const runtime = b.beside.integrationRuntime;
        const p = await seedProject(b.stores.projects);
        await b.stores.integrations.create(AUTHOR, integration("in2", T1), change("integration", "in2", "datadog", p));
        await b.stores.integrations.create(AUTHOR, integration("in1", T0, { enabled: false }), change("integration", "in1", "datadog", p));
        await b.stores.integrations.create(AUTHOR, integration("in3", T0, { type: "slack" }), change("integration", "in3", "slack", p));
        expect((await runtime.enabled()).map((i) => i.id)).toEqual(["in2", "in3"]);
        await record(b, p, [flagChange("a"), flagChange("b")]);
        const [a, bb] = (await runtime.eventsAfter(p.id, 0, 10)).map((e) => e.position);
        await runtime.addStats("in2", { sent: 2, failed: 1, lastError: "429", lastSentAt: T1 }, bb);
        await runtime.addStats("in2", { sent: 1, failed: 0, lastError: null, lastSentAt: null }, a);
        await runtime.addStats("in3", { sent: 0, failed: 3, lastError: "down", lastSentAt: null });
        expect(await b.stores.integrations.find("in2")).toMatchObject({ sent: 3, failed: 1, lastError: "429", lastSentAt: T1 });
        expect((await runtime.enabled()).map((i) => [i.id, i.position])).toEqual([["in2", bb!], ["in3", 0]]);
        expect([await runtime.positionOf("in2"), await runtime.positionOf("in3"), await runtime.positionOf("gone")]).toEqual([bb!, 0, 0]);
        expect(await runtime.eventsAfter(p.id, a!, 10)).toHaveLength(1);

        // What /metrics reads over them.
        const metrics = b.stores.metrics;
        expect(await metrics.queuedChangeEvents()).toBe(2);
        expect(await metrics.pendingDeliveries()).toBe(0);
        expect(await metrics.changeLogPosition()).toBe(await b.stores.audit.position());
        expect(await metrics.changeLogPosition()).toBeGreaterThan(0);
        const byType = await metrics.integrationEvents();
        expect(byType.sort((x, y) => x.type.localeCompare(y.type))).toEqual([{ type: "datadog", sent: 3, failed: 1 }, { type: "slack", sent: 0, failed: 3 }]);
        await b.stores.plugins.install(AUTHOR, plugin("pl1"), change("plugin", "pl1", "audit-mirror", p));
        await b.stores.plugins.install(AUTHOR, plugin("pl2", T0, { status: "active" }), change("plugin", "pl2", "audit-mirror", p));
        await b.stores.plugins.install(AUTHOR, plugin("pl3", T0, { status: "active" }), change("plugin", "pl3", "audit-mirror", p));
        expect((await metrics.pluginsByStatus()).sort((x, y) => x.status.localeCompare(y.status))).toEqual([{ status: "active", n: 2 }, { status: "installing", n: 1 }]);
      });
    });

    test("credentials: load with slugs and unexpired revocations, revoke twice, last uses, the JWT secret's first writer wins, no change seen when nothing was written", async () => {
      await onFresh(makeBackend, async (b) => {
        const credentials = b.beside.credentials;
        const p = await seedProject(b.stores.projects);
        await b.stores.users.create(AUTHOR, { id: "u1", email: "zoe@example.com", role: "admin", passwordHash: "h", tokensValidAfter: null, createdAt: T0, updatedAt: T0 }, change("user", "u1", "zoe@example.com"));
        const row = { id: "k1", name: "ci", scope: "eval" as const, projectId: p.id, environmentId: "p1-e2", keyPrefix: "fs_", keyHash: "hash1", previousHash: null, previousExpiresAt: null, createdAt: T0, lastUsedAt: null };
        await b.stores.apiKeys.create(AUTHOR, row, change("api_key", "k1", "ci", p));
        const now = Date.parse(T1);
        await credentials.revoke("j1", now + 1000);
        await credentials.revoke("j1", now + 1000);
        await credentials.revoke("j2", now - 1000);
        const loaded = await credentials.load(now);
        expect(loaded.apiKeys).toEqual([{ id: "k1", name: "ci", scope: "eval", keyHash: "hash1", previousHash: null, previousExpiresAt: null, projectId: p.id, projectSlug: "alpha", environmentId: "p1-e2", environmentSlug: "prod" }]);
        expect(loaded.users).toEqual([{ id: "u1", email: "zoe@example.com", role: "admin", tokensValidAfter: null }]);
        expect(loaded.adminKeys).toEqual([]);
        expect(loaded.revoked).toEqual([{ jti: "j1", expiresAt: new Date(now + 1000).toISOString() }]);
        expect(loaded.position).toBe(await b.stores.metrics.changeLogPosition());
        expect(await credentials.externalCredentialChange(loaded.position)).toEqual({ changed: false, position: loaded.position });

        await credentials.recordUse([{ kind: "apiKey", id: "k1", at: now }], now);
        expect((await b.stores.apiKeys.find("k1"))?.lastUsedAt).toBe(T1);
        expect((await credentials.load(now - 5000)).revoked.map((r) => r.jti)).toEqual(["j1"]);

        expect(await credentials.jwtSecret(() => "first", now)).toBe("first");
        expect(await credentials.jwtSecret(() => "second", now)).toBe("first");
      });
    });
  });
}
