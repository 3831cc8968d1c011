/**
 * Installed plugins and their lifecycle (decisions §11). The API writes what the operator asked
 * for (package, version, configuration, enabled) with its change-log entry; the plugin host
 * (src/plugins/host.ts) runs it and settles its status (`installing` -> `active` or `error`)
 * without an entry: status is runtime state, shown by GET .../status.
 *
 *   install                      -> installing -> active | error
 *   PATCH { enabled: false }     -> disabled (deactivate called, instance freed)
 *   PATCH { enabled: true }      -> installing (from disabled or error; events committed while it
 *                                   was off are not handed over)
 *   PATCH { config } | { version } on an enabled plugin -> installing (restarted; its event feed
 *                                   goes on from where it was); on a disabled one -> installing too
 *   a failed activate, a crash, a cap hit, 3 failing hooks in a row -> error (the host)
 *
 * Secrets (configSchema properties with `"secret": true`) show as "********" in every record,
 * log line and change-log entry; a PATCH that sends "********" keeps the stored value. A key
 * once stored as a secret stays one for that plugin (`secretKeys`, stored with it): a version
 * whose schema no longer marks it cannot show the value.
 */
import { diff, noteSecretChange, SECRET, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { notFound, validationError, type ErrorDetail } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Catalog, CatalogPackage } from "../../plugins/catalog";
import { maskConfig, patchConfig, secretKeys, secretValues } from "../../lib/config-secrets";
import { secretForms } from "../../lib/secret-text";
import { validateConfig } from "../../plugins/manifest";
import { pluginLease, type PluginHost, type PluginRun } from "../../plugins/host";
import type { RuntimeStore } from "../../plugins/runtime-store";
import type { LeaseStore } from "../leases/store";
import { requireProject } from "../projects/service";
import type { ProjectReader } from "../projects/store";
import type { PluginStatus } from "./model";
import type { PluginStore, PluginWrite, StoredPlugin } from "./store";

export interface PluginRecord {
  id: string;
  packageName: string;
  version: string;
  status: PluginStatus;
  config: Record<string, unknown>;
  errorMessage: string | null;
  installedAt: string;
  updatedAt: string;
}

export interface NewPluginInput {
  packageName: string;
  version?: string;
  config?: Record<string, unknown>;
}

export interface PluginPatchInput {
  enabled?: boolean;
  config?: Record<string, unknown>;
  version?: string;
}

export interface PluginServiceDeps {
  plugins: PluginStore;
  projects: ProjectReader;
  catalog: Pick<Catalog, "get">;
  host: Pick<PluginHost, "start" | "stop" | "live">;
  /** Where a plugin whose package left the catalog is put in error at start. */
  runtime: Pick<RuntimeStore, "setStatus">;
  /** Which node runs a plugin: the holder of its lease (GET .../status shows it). */
  leases: Pick<LeaseStore, "holder">;
  clock: Clock;
  log: Logger;
}

const LATEST = "latest";

/** Every value of a plugin whose package is gone is masked: which ones are secret is unknown. */
const maskAll = (config: Record<string, unknown>) => Object.fromEntries(Object.keys(config).map((k) => [k, SECRET]));

export type PluginService = ReturnType<typeof pluginService>;

export function pluginService({ plugins, projects, catalog, host, runtime, leases, clock, log }: PluginServiceDeps) {
  const packageOf = (p: { packageName: string; version: string }) => catalog.get(p.packageName, p.version);
  const masked = (p: StoredPlugin): Record<string, unknown> => {
    const pkg = packageOf(p);
    return pkg ? maskConfig(pkg, p.config, p.secretKeys) : maskAll(p.config);
  };
  /**
   * The keys of `config` stored as secrets: those kept before, and those `pkg` marks secret
   * (every key when the package is gone: which ones are secret is unknown).
   */
  const storedSecrets = (pkg: CatalogPackage | undefined, config: Record<string, unknown>, kept: readonly string[]): string[] => {
    const marked = pkg ? secretKeys(pkg, kept) : [...kept, ...Object.keys(config)];
    return [...new Set(marked.filter((k) => kept.includes(k) || Object.hasOwn(config, k)))].sort();
  };
  const recordOf = (p: StoredPlugin): PluginRecord => ({
    id: p.id,
    packageName: p.packageName,
    version: p.version,
    status: p.status,
    config: masked(p),
    errorMessage: p.status === "error" ? p.errorMessage : null,
    installedAt: p.installedAt,
    updatedAt: p.updatedAt,
  });
  /** What the change log holds of a plugin: what the operator chose, secrets masked. */
  const fieldsOf = (p: StoredPlugin) => ({ packageName: p.packageName, version: p.version, enabled: p.enabled, status: p.status, config: masked(p) });
  const change = (p: StoredPlugin, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft => ({
    project: { id: p.projectId, slug: p.projectSlug },
    environment: null,
    resource: { type: "plugin", id: p.id, key: p.packageName },
    action,
    changes,
  });

  /** The catalog version asked for: unknown package or version 404. */
  const resolve = (packageName: string, version: string): CatalogPackage => {
    const pkg = catalog.get(packageName, version);
    if (pkg) return pkg;
    if (version !== LATEST && catalog.get(packageName, LATEST)) throw notFound(`Version ${version} of plugin package ${packageName}`);
    throw notFound(`Plugin package ${packageName}`);
  };

  const checkConfig = (pkg: CatalogPackage, config: Record<string, unknown>) => {
    const details: ErrorDetail[] = validateConfig(pkg, config).map((d) => ({ path: `body.${d.path}`, message: d.message }));
    if (details.length > 0) throw validationError(`Invalid configuration for ${pkg.packageName} ${pkg.version}`, details);
  };

  const start = (p: StoredPlugin, pkg: CatalogPackage) => {
    const secrets = secretForms(secretValues(pkg, p.config, p.secretKeys));
    const run: PluginRun = { id: p.id, projectId: p.projectId, projectSlug: p.projectSlug, packageName: p.packageName, version: p.version, source: pkg.source, config: p.config, secrets };
    host.start(run);
  };

  const requirePlugin = async (slug: string, pluginId: string): Promise<StoredPlugin> => {
    const project = await requireProject(projects, slug);
    const plugin = await plugins.find(pluginId);
    if (!plugin || plugin.projectId !== project.id) throw notFound(`Plugin ${pluginId}`);
    return plugin;
  };

  return {
    /** GET /v1/projects/{slug}/plugins: oldest first. */
    async list(slug: string): Promise<PluginRecord[]> {
      return (await plugins.list((await requireProject(projects, slug)).id)).map(recordOf);
    },

    async get(slug: string, pluginId: string): Promise<PluginRecord> {
      return recordOf(await requirePlugin(slug, pluginId));
    },

    /** POST /v1/projects/{slug}/plugins: stored as `installing`, then activated off the request. */
    async install(author: Author, slug: string, input: NewPluginInput): Promise<PluginRecord> {
      const project = await requireProject(projects, slug);
      const pkg = resolve(input.packageName, input.version ?? LATEST);
      const config = input.config ?? {};
      checkConfig(pkg, config);
      const now = iso(clock.now());
      const plugin: StoredPlugin = {
        id: newId("plugin"),
        projectId: project.id,
        projectSlug: project.slug,
        packageName: pkg.packageName,
        version: pkg.version,
        enabled: true,
        status: "installing",
        config,
        secretKeys: storedSecrets(pkg, config, []),
        errorMessage: null,
        installedAt: now,
        updatedAt: now,
        eventsHandled: 0,
        errors: 0,
        lastEventAt: null,
        evaluationsDropped: 0,
      };
      await plugins.install(author, plugin, change(plugin, "created", whole(fieldsOf(plugin), "created")));
      start(plugin, pkg);
      return recordOf(plugin);
    },

    /** PATCH: enabled, config (merged key by key), version; see the lifecycle above. */
    async update(author: Author, slug: string, pluginId: string, input: PluginPatchInput): Promise<PluginRecord> {
      await requirePlugin(slug, pluginId);
      let target: CatalogPackage | undefined;
      const updated = await plugins.update(author, pluginId, (current) => {
        if (!current) throw notFound(`Plugin ${pluginId}`);
        // A plugin being disabled needs no package: one whose package left the catalog can still be turned off.
        const reconfigured = input.config !== undefined || input.version !== undefined;
        const pkg = reconfigured || input.enabled === true || (input.enabled === undefined && current.enabled) ? resolve(current.packageName, input.version ?? current.version) : undefined;
        // What was stored as a secret under the running version stays one under the next.
        let secrets = storedSecrets(packageOf(current), current.config, current.secretKeys);
        let config = current.config;
        if (pkg && reconfigured) {
          config = patchConfig(pkg, current.config, input.config ?? {}, secrets);
          checkConfig(pkg, config);
          secrets = storedSecrets(pkg, config, secrets);
        }
        const version = pkg?.version ?? current.version;
        const changedRun = version !== current.version || JSON.stringify(config) !== JSON.stringify(current.config);
        // A new configuration or version turns a disabled plugin on again, unless the same PATCH says otherwise.
        const enabled = input.enabled ?? (changedRun || current.enabled);
        const revived = enabled && (!current.enabled || current.status === "error");
        const status: PluginStatus = !enabled ? "disabled" : changedRun || revived ? "installing" : current.status;
        const next: PluginWrite = {
          ...current,
          version,
          enabled,
          status,
          config,
          secretKeys: secrets,
          errorMessage: status === "error" ? current.errorMessage : null,
          updatedAt: iso(clock.now()),
          feedFromNow: revived,
        };
        const changes = diff(fieldsOf(current), fieldsOf(next));
        noteSecretChange(changes, { before: current.config, after: config }, { before: masked(current), after: masked(next) });
        if (Object.keys(changes).length === 0) return { result: current, changes: [] };
        target = status === "installing" ? pkg : undefined;
        return { result: next, changes: [change(next, "updated", changes)] };
      });
      if (!updated.enabled) void host.stop(pluginId);
      else if (target) start(updated, target);
      return recordOf(updated);
    },

    /** DELETE: deactivated, then removed with its entry. */
    async remove(author: Author, slug: string, pluginId: string): Promise<void> {
      await requirePlugin(slug, pluginId);
      await plugins.remove(author, pluginId, (current) => {
        if (!current) throw notFound(`Plugin ${pluginId}`);
        return change(current, "deleted", whole(fieldsOf(current), "deleted"));
      });
      await host.stop(pluginId);
    },

    /**
     * GET .../status: the stored status and counters (the same from every node), the node that
     * runs it (its lease's holder), and the logs kept in that node's memory: this node's when it
     * runs the plugin, none otherwise.
     */
    async status(slug: string, pluginId: string) {
      const p = await requirePlugin(slug, pluginId);
      const live = host.live(pluginId);
      return {
        id: p.id,
        status: p.status,
        errorMessage: p.status === "error" ? p.errorMessage : null,
        node: p.enabled ? await leases.holder(pluginLease(p.id)) : null,
        logs: live?.logs ?? [],
        stats: { eventsHandled: p.eventsHandled, errors: p.errors, lastEventAt: p.lastEventAt, evaluationsDropped: live?.evaluationsDropped ?? p.evaluationsDropped },
      };
    },

    /**
     * After a commit that wrote the plugin, on every node (its own and, through the change feed,
     * the others'): the node that runs it restarts it with what is stored now, or stops it;
     * the others want its lease (or no longer), so that they can take over.
     */
    async reconcile(pluginId: string): Promise<void> {
      const p = await plugins.find(pluginId);
      const pkg = p && p.enabled && p.status !== "error" ? packageOf(p) : undefined;
      if (p && pkg) start(p, pkg);
      else if (!p || !p.enabled || p.status === "error") await host.stop(pluginId);
    },

    /** At start: the plugins that were enabled (and not in error) are activated again (on the node that gets each one's lease). */
    async activateAll(): Promise<number> {
      let started = 0;
      for (const p of await plugins.toActivate()) {
        const pkg = packageOf(p);
        if (!pkg) {
          const errorMessage = `package ${p.packageName} ${p.version} is no longer in the catalog`;
          await runtime.setStatus(p.id, { status: "error", errorMessage });
          log.warn("plugin not activated", { plugin: p.id, error: errorMessage });
          continue;
        }
        start(p, pkg);
        started++;
      }
      return started;
    },
  };
}
