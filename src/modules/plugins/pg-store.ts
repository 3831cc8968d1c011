/** `PluginStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { and, asc, eq, ne, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { pluginDownloads, plugins, projects } from "../../db/pg/schema";
import { PgChangeEventStore } from "../change-events/pg-store";
import type { PluginStatus } from "./model";
import type { PluginStore, PluginWrite, StoredPlugin } from "./store";

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

export class PgPluginStore implements PluginStore {
  constructor(private readonly log: PgChangeLog) {}

  private select(db: PgQueries) {
    return db.select(COLUMNS).from(plugins).innerJoin(projects, eq(projects.id, plugins.projectId));
  }

  private async findOn(db: PgQueries, pluginId: string): Promise<StoredPlugin | undefined> {
    const [row] = await this.select(db).where(eq(plugins.id, pluginId));
    return row;
  }

  find(pluginId: string): Promise<StoredPlugin | undefined> {
    return this.findOn(this.log.db, pluginId);
  }

  list(projectId: string): Promise<StoredPlugin[]> {
    return this.select(this.log.db).where(eq(plugins.projectId, projectId)).orderBy(asc(plugins.installedAt), asc(plugins.seq));
  }

  toActivate(): Promise<StoredPlugin[]> {
    return this.select(this.log.db)
      .where(and(eq(plugins.enabled, true), ne(plugins.status, "error")))
      .orderBy(asc(plugins.seq));
  }

  async install(author: Author, plugin: StoredPlugin, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = plugin;
    await this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      await db.insert(plugins).values({ ...row, eventPosition: await new PgChangeEventStore(db).latest() });
      await db
        .insert(pluginDownloads)
        .values({ packageName: plugin.packageName, installs: 1 })
        .onConflictDoUpdate({ target: pluginDownloads.packageName, set: { installs: sql`${pluginDownloads.installs} + 1` } });
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => Written<PluginWrite>): Promise<StoredPlugin> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await this.findOn(db, pluginId));
      if (written.changes.length > 0) {
        const { version, enabled, status, config, secretKeys, errorMessage, updatedAt, feedFromNow } = written.result;
        await db
          .update(plugins)
          .set({ version, enabled, status, config, secretKeys, errorMessage, updatedAt, ...(feedFromNow ? { eventPosition: await new PgChangeEventStore(db).latest() } : {}) })
          .where(eq(plugins.id, pluginId));
      }
      const { feedFromNow: _, ...plugin } = written.result;
      return { result: plugin, changes: written.changes };
    });
  }

  remove(author: Author, pluginId: string, decide: (current: StoredPlugin | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const change = decide(await this.findOn(db, pluginId));
      await db.delete(plugins).where(eq(plugins.id, pluginId));
      return { result: undefined, changes: [change] };
    });
  }
}
