/**
 * All SQL of installed plugins behind `PluginStore` (asynchronous at its boundary, synchronous
 * SQLite inside). Their events come from the change-event queue (../change-events/), which
 * plugins share with integrations; a plugin's `event_position` starts at its newest row.
 * The plugin host's own reads and writes of a running plugin (status, position, counters) are
 * src/plugins/runtime-store.ts: runtime state, no change-log entry.
 *
 * Writes of the API take the author and a pure `decide` of what is stored now (throws to
 * refuse; no change, nothing written), committed with their change-log entry.
 */
import { asc, eq, sql } from "drizzle-orm";
import { nextSeq } from "../../db/client";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { SqliteChangeLog, Written } from "../../changes/sqlite";
import { plugins, projects } from "../../db/schema";
import { SqliteChangeEventStore } from "../change-events/store";
import type { PluginStatus } from "./model";

/** A plugin as stored: its configuration in clear (the API masks its secrets), its project, its counters. */
export interface StoredPlugin {
  id: string;
  projectId: string;
  projectSlug: string;
  packageName: string;
  version: string;
  /** What the operator asked for; a plugin in `error` is still enabled. */
  enabled: boolean;
  status: PluginStatus;
  config: Record<string, unknown>;
  /** The config keys ever stored while the package marked them secret: masked whatever a later version's schema says. */
  secretKeys: string[];
  errorMessage: string | null;
  installedAt: string;
  updatedAt: string;
  eventsHandled: number;
  errors: number;
  lastEventAt: string | null;
  evaluationsDropped: number;
}

/** A write of the API: the plugin as it is to be stored, and whether its event feed starts from now. */
export interface PluginWrite extends StoredPlugin {
  /** Enabled again (from disabled or error): what was committed while it was off is not handed over. */
  feedFromNow?: boolean;
}

export interface PluginStore {
  find(pluginId: string): Promise<StoredPlugin | undefined>;
  /** The project's plugins, oldest first. */
  list(projectId: string): Promise<StoredPlugin[]>;
  /** What a start activates again: enabled and not in error. */
  toActivate(): Promise<StoredPlugin[]>;
  /** Stored with its entry; its package's `downloads` counted; its event feed starts from now. */
  install(author: Author, plugin: StoredPlugin, change: ChangeDraft): Promise<void>;
  update(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => Written<PluginWrite>): Promise<StoredPlugin>;
  remove(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => ChangeDraft): Promise<void>;
}

const COLUMNS = {
  id: plugins.id,
  projectId: plugins.projectId,
  projectSlug: projects.slug,
  packageName: plugins.packageName,
  version: plugins.version,
  enabled: plugins.enabled,
  status: sql<PluginStatus>`${plugins.status}`,
  config: plugins.config,
  secretKeys: plugins.secretKeys,
  errorMessage: plugins.errorMessage,
  installedAt: plugins.installedAt,
  updatedAt: plugins.updatedAt,
  eventsHandled: plugins.eventsHandled,
  errors: plugins.errors,
  lastEventAt: plugins.lastEventAt,
  evaluationsDropped: plugins.evaluationsDropped,
};

const COUNT_DOWNLOAD_SQL =
  "INSERT INTO plugin_downloads (package_name, installs) VALUES (?1, 1) ON CONFLICT (package_name) DO UPDATE SET installs = installs + 1";

export class SqlitePluginStore implements PluginStore {
  private readonly events: SqliteChangeEventStore;

  constructor(private readonly log: SqliteChangeLog) {
    this.events = new SqliteChangeEventStore(log.sqlite);
  }

  private select() {
    return this.log.store.db.select(COLUMNS).from(plugins).innerJoin(projects, eq(projects.id, plugins.projectId));
  }

  private findNow(pluginId: string): StoredPlugin | undefined {
    return this.select().where(eq(plugins.id, pluginId)).get();
  }

  async find(pluginId: string): Promise<StoredPlugin | undefined> {
    return this.findNow(pluginId);
  }

  async list(projectId: string): Promise<StoredPlugin[]> {
    return this.select().where(eq(plugins.projectId, projectId)).orderBy(asc(plugins.installedAt), asc(plugins.seq)).all();
  }

  async toActivate(): Promise<StoredPlugin[]> {
    return this.select()
      .where(sql`${plugins.enabled} = 1 AND ${plugins.status} <> 'error'`)
      .orderBy(asc(plugins.seq))
      .all();
  }

  async install(author: Author, plugin: StoredPlugin, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = plugin;
    await this.log.commit(author, async () => {
      this.log.store.db.insert(plugins).values({ ...row, eventPosition: await this.events.latest(), seq: nextSeq(plugins) }).run();
      this.log.sqlite.run(COUNT_DOWNLOAD_SQL, [plugin.packageName]);
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => Written<PluginWrite>): Promise<StoredPlugin> {
    return this.log.commit(author, async () => {
      const written = decide(this.findNow(pluginId));
      if (written.changes.length > 0) {
        const { version, enabled, status, config, secretKeys, errorMessage, updatedAt, feedFromNow } = written.result;
        this.log.store.db
          .update(plugins)
          .set({ version, enabled, status, config, secretKeys, errorMessage, updatedAt, ...(feedFromNow ? { eventPosition: await this.events.latest() } : {}) })
          .where(eq(plugins.id, pluginId))
          .run();
      }
      const { feedFromNow: _, ...plugin } = written.result;
      return { result: plugin, changes: written.changes };
    });
  }

  remove(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const change = decide(this.findNow(pluginId));
      this.log.store.db.delete(plugins).where(eq(plugins.id, pluginId)).run();
      return { result: undefined, changes: [change] };
    });
  }
}
