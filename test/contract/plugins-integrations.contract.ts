/** PluginStore, DownloadStore and IntegrationStore (src/modules/{plugins,marketplace,integrations}/store.ts) through their interfaces. */
import { describe, expect, test } from "bun:test";
import type { IntegrationStore, StoredIntegration } from "../../src/modules/integrations/store";
import type { DownloadStore } from "../../src/modules/marketplace/store";
import type { PluginStore, StoredPlugin } from "../../src/modules/plugins/store";
import { AUTHOR, change, onFresh, refuse, Refused, seedProject, T0, T1, type MakeBackend } from "./backend";

export const plugin = (id: string, installedAt = T0, over: Partial<StoredPlugin> = {}): StoredPlugin => ({
  id,
  projectId: "p1",
  projectSlug: "alpha",
  packageName: "audit-mirror",
  version: "1.0.0",
  enabled: true,
  status: "installing",
  config: { target: "x" },
  secretKeys: [],
  errorMessage: null,
  installedAt,
  updatedAt: installedAt,
  eventsHandled: 0,
  errors: 0,
  lastEventAt: null,
  evaluationsDropped: 0,
  ...over,
});

export const integration = (id: string, createdAt = T0, over: Partial<StoredIntegration> = {}): StoredIntegration => ({
  id,
  projectId: "p1",
  projectSlug: "alpha",
  type: "datadog",
  config: { site: "datadoghq.eu", apiKey: "k" },
  enabled: true,
  sent: 0,
  failed: 0,
  lastError: null,
  lastSentAt: null,
  createdAt,
  updatedAt: createdAt,
  ...over,
});

export function describePluginStoreContract(makeBackend: MakeBackend) {
  describe("PluginStore and DownloadStore contract", () => {
    test("install (counted as a download), find, list oldest first, toActivate, update (a refusal writes nothing), remove", async () => {
      await onFresh(makeBackend, async (b) => {
        const plugins: PluginStore = b.stores.plugins;
        const downloads: DownloadStore = b.stores.pluginDownloads;
        const p = await seedProject(b.stores.projects);
        expect(await downloads.counts()).toEqual(new Map());
        await plugins.install(AUTHOR, plugin("pl2", T1, { status: "active" }), change("plugin", "pl2", "audit-mirror", p));
        await plugins.install(AUTHOR, plugin("pl1", T0, { packageName: "slack", secretKeys: ["token"] }), change("plugin", "pl1", "slack", p));
        await plugins.install(AUTHOR, plugin("pl3", T1, { status: "error", errorMessage: "boom" }), change("plugin", "pl3", "audit-mirror", p));
        expect(await downloads.counts()).toEqual(new Map([["audit-mirror", 2], ["slack", 1]]));
        expect(await plugins.find("pl1")).toEqual(plugin("pl1", T0, { packageName: "slack", secretKeys: ["token"] }));
        expect((await plugins.list(p.id)).map((x) => x.id)).toEqual(["pl1", "pl2", "pl3"]);
        expect((await plugins.toActivate()).map((x) => x.id).sort()).toEqual(["pl1", "pl2"]);
        await expect(plugins.update(AUTHOR, "pl1", () => refuse())).rejects.toBeInstanceOf(Refused);
        const disabled = await plugins.update(AUTHOR, "pl1", (c) => ({ result: { ...c!, enabled: false, status: "disabled", config: { target: "y" }, updatedAt: T1 }, changes: [change("plugin", "pl1", "slack", p, "updated")] }));
        expect(disabled).toMatchObject({ enabled: false, status: "disabled", config: { target: "y" }, updatedAt: T1 });
        expect(await plugins.find("pl1")).toEqual(disabled);
        expect((await plugins.toActivate()).map((x) => x.id)).toEqual(["pl2"]);
        await plugins.remove(AUTHOR, "pl2", (c) => change("plugin", c!.id, "audit-mirror", p, "deleted"));
        expect(await plugins.find("pl2")).toBeUndefined();
        expect((await plugins.list(p.id)).map((x) => x.id)).toEqual(["pl1", "pl3"]);
        expect((await downloads.counts()).get("audit-mirror")).toBe(2);
      });
    });
  });
}

export function describeIntegrationStoreContract(makeBackend: MakeBackend) {
  describe("IntegrationStore contract", () => {
    test("create, find, list oldest first, update (a refusal writes nothing), remove, and with its project", async () => {
      await onFresh(makeBackend, async (b) => {
        const store: IntegrationStore = b.stores.integrations;
        const p = await seedProject(b.stores.projects);
        await store.create(AUTHOR, integration("in2", T1, { type: "slack", config: { url: "https://hooks.slack.com/x" } }), change("integration", "in2", "slack", p));
        await store.create(AUTHOR, integration("in1"), change("integration", "in1", "datadog", p));
        expect(await store.find("in1")).toEqual(integration("in1"));
        expect((await store.list(p.id)).map((i) => i.id)).toEqual(["in1", "in2"]);
        await expect(store.update(AUTHOR, "in1", () => refuse())).rejects.toBeInstanceOf(Refused);
        const updated = await store.update(AUTHOR, "in1", (c) => ({ result: { ...c!, enabled: false, config: { site: "datadoghq.com", apiKey: "k2" }, updatedAt: T1 }, changes: [change("integration", "in1", "datadog", p, "updated")] }));
        expect(await store.find("in1")).toEqual(updated);
        expect(updated).toMatchObject({ enabled: false, config: { site: "datadoghq.com", apiKey: "k2" } });
        await expect(store.remove(AUTHOR, "in2", () => refuse())).rejects.toBeInstanceOf(Refused);
        await store.remove(AUTHOR, "in2", (c) => change("integration", c!.id, "slack", p, "deleted"));
        expect((await store.list(p.id)).map((i) => i.id)).toEqual(["in1"]);
        await b.stores.projects.remove(AUTHOR, "alpha", () => change("project", "p1", "alpha", p, "deleted"));
        expect(await store.find("in1")).toBeUndefined();
      });
    });
  });
}
