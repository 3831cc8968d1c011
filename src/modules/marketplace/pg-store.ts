/** `DownloadStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import type { PgQueries } from "../../db/pg/client";
import { pluginDownloads } from "../../db/pg/schema";
import type { DownloadStore } from "./store";

export class PgDownloadStore implements DownloadStore {
  constructor(private readonly db: PgQueries) {}

  async counts(): Promise<Map<string, number>> {
    const rows = await this.db.select().from(pluginDownloads);
    return new Map(rows.map((r) => [r.packageName, r.installs]));
  }
}
