/**
 * The PostgreSQL backend (backend.ts): one database shared by every node, migrated on open
 * (under an advisory lock: nodes starting together do not race), the change log
 * (src/changes/pg.ts) and every store's PostgreSQL implementation.
 */
import { PgLeaseStore } from "../modules/leases/pg-store";
import type { SQL } from "bun";
import type { ChangeBus } from "../changes/bus";
import { PgChangeLog, pgTx } from "../changes/pg";
import { PgChangeFeed } from "../changes/pg-feed";
import { PgChangeEventStore } from "../modules/change-events/pg-store";
import { PgCredentialStore } from "../modules/credentials/pg-store";
import type { Stores } from "../context";
import { iso, type Clock } from "../lib/clock";
import type { Logger } from "../lib/log";
import { PgAdminKeyStore } from "../modules/admin-keys/pg-store";
import { PgApiKeyStore } from "../modules/api-keys/pg-store";
import { PgAuditStore } from "../modules/audit/pg-store";
import { PgLoginFailureStore } from "../modules/auth/pg-store";
import { PgFlagStore } from "../modules/flags/pg-store";
import { PgInsightsStore } from "../modules/insights/pg-store";
import { PgIntegrationRuntimeStore, PgIntegrationStore } from "../modules/integrations/pg-store";
import { PgDownloadStore } from "../modules/marketplace/pg-store";
import { PgMetricsStore } from "../modules/metrics/pg-store";
import { PgPluginStore } from "../modules/plugins/pg-store";
import { PgProjectStore } from "../modules/projects/pg-store";
import { PgScheduleStore } from "../modules/schedules/pg-store";
import { PgSegmentStore } from "../modules/segments/pg-store";
import { PgSettingsStore } from "../modules/settings/pg-store";
import { PgTransferStore } from "../modules/transfer/pg-store";
import { PgDefinitionsStore } from "../modules/streams/pg-store";
import { PgTestSessionStore } from "../modules/testing/pg-store";
import { PgSessionSync } from "../modules/testing/pg-sync";
import { PgUserStore } from "../modules/users/pg-store";
import { PgDeliveryQueue, PgWebhookStore } from "../modules/webhooks/pg-store";
import { PgRuntimeStore } from "../plugins/pg-runtime-store";
import type { Backend } from "./backend";
import { openPg } from "./pg/client";
import { migratePg } from "./pg/migrate";
import { PgMaintenance } from "./pg-maintenance";


export interface PgBackend extends Backend {
  readonly dialect: "postgres";
  readonly changeLog: PgChangeLog;
  readonly feed: PgChangeFeed;
  readonly testSessionSync: PgSessionSync;
  /** The pool (Bun's `SQL`): what LISTEN and the operations (health, migrate) use. */
  readonly sql: SQL;
  /** Closes the pool. */
  close(): Promise<void>;
}

/** What `new SQL(url, options)` takes beside the URL: TLS, pool size (src/db/database-url.ts builds it from the config). */
export type PgOptions = Omit<SQL.PostgresOrMySQLOptions, "url">;

/**
 * Connects to `url`; `log`: where the change feed reports a failed read; `deliveryLeaseMs`: how
 * long a claimed webhook delivery is kept from the other nodes (claimLeaseMs). Brings the schema
 * up to date and builds the change log and the stores over it.
 */
export async function openPostgresBackend(url: string, opts: PgOptions, bus: ChangeBus, clock: Clock, log?: Logger, deliveryLeaseMs?: number): Promise<PgBackend> {
  const store = openPg(url, opts);
  try {
    const applied = await migratePg(store.sql);
    const changeLog = new PgChangeLog(store, bus, clock);
    const users = new PgUserStore(changeLog);
    const insights = new PgInsightsStore(changeLog);
    await insights.load(iso(clock.now()));
    const audit = new PgAuditStore(store.sql);
    const feed = new PgChangeFeed({ sql: store.sql, audit, changeLog, bus, log });
    const testSessions = new PgTestSessionStore(changeLog.db);
    const testSessionSync = new PgSessionSync({ sql: store.sql, store: testSessions, clock, log });
    const stores: Stores = {
      projects: new PgProjectStore(changeLog),
      settings: new PgSettingsStore(changeLog.db),
      users,
      adminKeys: new PgAdminKeyStore(changeLog, users),
      apiKeys: new PgApiKeyStore(changeLog),
      audit,
      flags: new PgFlagStore(changeLog),
      segments: new PgSegmentStore(changeLog),
      schedules: new PgScheduleStore(changeLog),
      testSessions,
      webhooks: new PgWebhookStore(changeLog),
      definitions: new PgDefinitionsStore(changeLog.db),
      plugins: new PgPluginStore(changeLog),
      pluginDownloads: new PgDownloadStore(changeLog.db),
      integrations: new PgIntegrationStore(changeLog),
      pluginRuntime: new PgRuntimeStore(changeLog.db),
      leases: new PgLeaseStore(changeLog.db),
      metrics: new PgMetricsStore(changeLog.db),
      insights,
      loginFailures: new PgLoginFailureStore(changeLog.db),
      transfer: new PgTransferStore(changeLog),
    };
    const maintenance = new PgMaintenance(store.sql);
    return {
      dialect: "postgres",
      changeLog,
      stores,
      applied,
      credentials: new PgCredentialStore(changeLog.db),
      maintenance,
      exclusive: (name, task) => maintenance.exclusive(name, task),
      deliveryQueue: new PgDeliveryQueue(changeLog.db, deliveryLeaseMs),
      integrationRuntime: new PgIntegrationRuntimeStore(changeLog.db),
      changeEventsIn: (tx) => new PgChangeEventStore(pgTx(tx)),
      sql: store.sql,
      feed,
      testSessionSync,
      close: async () => {
        await feed.stop();
        await testSessionSync.stop();
        await store.sql.close();
      },
    };
  } catch (e) {
    await store.sql.close();
    throw e;
  }
}
