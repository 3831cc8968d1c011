/**
 * The marketplace's `downloads` (decisions §11: installs on this instance): read from
 * `plugin_downloads`, which the plugins module increments on each install. Asynchronous at its
 * boundary like every store; synchronous SQLite inside.
 */
import type { Store } from "../../db/client";
import { pluginDownloads } from "../../db/schema";

export interface DownloadStore {
  /** Installs by package name (packages never installed are absent). */
  counts(): Promise<Map<string, number>>;
}

export class SqliteDownloadStore implements DownloadStore {
  constructor(private readonly store: Store) {}

  async counts(): Promise<Map<string, number>> {
    const rows = this.store.db.select().from(pluginDownloads).all();
    return new Map(rows.map((r) => [r.packageName, r.installs]));
  }
}
