/**
 * The SQLite backend (backend.ts): one database file in the data dir, locked by this process,
 * migrated on open; every store's SQLite implementation over one change log.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ChangeBus } from "../changes/bus";
import { SqliteChangeLog, sqliteTx } from "../changes/sqlite";
import { SqliteChangeEventStore } from "../modules/change-events/store";
import { SqliteCredentialStore } from "../modules/credentials/store";
import { SqliteMaintenance } from "./sqlite-maintenance";
import { ConfigError, type Config } from "../config";
import type { Stores } from "../context";
import { SqliteLeaseStore } from "../modules/leases/store";
import type { Clock } from "../lib/clock";
import { SqliteAdminKeyStore } from "../modules/admin-keys/store";
import { SqliteApiKeyStore } from "../modules/api-keys/store";
import { SqliteAuditStore } from "../modules/audit/store";
import { SqliteLoginFailureStore } from "../modules/auth/store";
import { SqliteFlagStore } from "../modules/flags/store";
import { SqliteInsightsStore } from "../modules/insights/store";
import { SqliteMetricsStore } from "../modules/metrics/store";
import { SqliteIntegrationRuntimeStore, SqliteIntegrationStore } from "../modules/integrations/store";
import { SqliteDownloadStore } from "../modules/marketplace/store";
import { SqlitePluginStore } from "../modules/plugins/store";
import { SqliteProjectStore } from "../modules/projects/store";
import { SqliteScheduleStore } from "../modules/schedules/store";
import { SqliteSegmentStore } from "../modules/segments/store";
import { SqliteSettingsStore } from "../modules/settings/store";
import { SqliteTransferStore } from "../modules/transfer/store";
import { SqliteDefinitionsStore } from "../modules/streams/store";
import { SqliteTestSessionStore } from "../modules/testing/store";
import { SqliteUserStore } from "../modules/users/store";
import { SqliteDeliveryQueue, SqliteWebhookStore } from "../modules/webhooks/store";
import { SqliteRuntimeStore } from "../plugins/runtime-store";
import type { Backend } from "./backend";
import { DB_FILE, openDatabase } from "./client";
import { lockDataDir } from "./lock";
import { migrate } from "./migrate";

/** The SQLite backend: its change log is SQLite's (the test harness reads the connection from it). */
export interface SqliteBackend extends Backend {
  readonly dialect: "sqlite";
  readonly changeLog: SqliteChangeLog;
}

/** Opens (creating, locking and migrating) the data dir's database: the backend over it. */
export function openSqliteBackend(config: Config, bus: ChangeBus, clock: Clock): SqliteBackend {
  const opened = openStore(config);
  try {
    const changeLog = new SqliteChangeLog(opened, bus, clock);
    const file = join(config.dataDir, DB_FILE);
    const maintenance = new SqliteMaintenance(opened, file);
    return {
      dialect: "sqlite",
      changeLog,
      stores: createStores(changeLog),
      applied: opened.applied,
      credentials: new SqliteCredentialStore(opened),
      maintenance,
      deliveryQueue: new SqliteDeliveryQueue(opened.sqlite),
      integrationRuntime: new SqliteIntegrationRuntimeStore(opened.sqlite),
      changeEventsIn: (tx) => new SqliteChangeEventStore(sqliteTx(tx).sqlite),
      exclusive: async (_name, task) => {
        await task();
        return true;
      },
      threads: { file, autoCheckpoint: (pages) => maintenance.autoCheckpoint(pages) },
      close: opened.close,
    };
  } catch (e) {
    opened.close();
    throw e;
  }
}

/**
 * Locks the data dir (creating it), opens the database and brings the schema up to date.
 * `close()` closes the database and releases the lock.
 */
export function openStore(config: Config) {
  try {
    mkdirSync(config.dataDir, { recursive: true, mode: 0o750 });
  } catch (e) {
    throw new ConfigError("SVC_DATA_DIR", "--data-dir", `cannot create ${config.dataDir}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  const lock = lockDataDir(config.dataDir);
  let store: ReturnType<typeof openDatabase> | undefined;
  try {
    store = openDatabase(join(config.dataDir, DB_FILE));
    const applied = migrate(store.sqlite);
    const { sqlite } = store;
    return {
      ...store,
      applied,
      close() {
        sqlite.close();
        lock.release();
      },
    };
  } catch (e) {
    store?.sqlite.close();
    lock.release();
    throw e;
  }
}

/** Every module's store over one change log (the server's, or the admin CLI's own). */
export function createStores(changeLog: SqliteChangeLog): Stores {
  const users = new SqliteUserStore(changeLog);
  return {
    projects: new SqliteProjectStore(changeLog),
    flags: new SqliteFlagStore(changeLog),
    schedules: new SqliteScheduleStore(changeLog),
    segments: new SqliteSegmentStore(changeLog),
    users,
    adminKeys: new SqliteAdminKeyStore(changeLog, users),
    apiKeys: new SqliteApiKeyStore(changeLog),
    webhooks: new SqliteWebhookStore(changeLog),
    testSessions: new SqliteTestSessionStore(changeLog.store),
    audit: new SqliteAuditStore(changeLog.store),
    pluginDownloads: new SqliteDownloadStore(changeLog.store),
    plugins: new SqlitePluginStore(changeLog),
    integrations: new SqliteIntegrationStore(changeLog),
    definitions: new SqliteDefinitionsStore(changeLog.store),
    pluginRuntime: new SqliteRuntimeStore(changeLog.sqlite),
    leases: new SqliteLeaseStore(changeLog.sqlite),
    insights: new SqliteInsightsStore(changeLog),
    settings: new SqliteSettingsStore(changeLog.store),
    metrics: new SqliteMetricsStore(changeLog.sqlite),
    loginFailures: new SqliteLoginFailureStore(changeLog.store),
    transfer: new SqliteTransferStore(changeLog),
  };
}
