/** What every module receives: configuration, storage, time, logging. Built once at start. */
import type { Config } from "./config";
import type { Maintenance } from "./db/sqlite-maintenance";
import type { MetricsStore } from "./modules/metrics/store";
import type { CredentialRegistry } from "./http/credentials";
import type { RateLimiter } from "./http/rate-limit";
import type { Snapshot } from "./evaluation/snapshot";
import type { Clock, CoarseClock } from "./lib/clock";
import type { Logger } from "./lib/log";
import type { Scheduler } from "./lib/scheduler";
import type { Deliveries } from "./modules/webhooks/dispatcher";
import type { LiveSessions } from "./modules/testing/live";
import type { TestSessionStore } from "./modules/testing/store";
import type { ChangeBus } from "./changes/bus";
import type { ChangeLog } from "./changes/log";
import type { FlagStore, SnapshotSource } from "./modules/flags/store";
import type { ScheduleStore } from "./modules/schedules/store";
import type { SegmentStore } from "./modules/segments/store";
import type { ProjectStore } from "./modules/projects/store";
import type { AuditStore } from "./modules/audit/store";
import type { WebhookStore } from "./modules/webhooks/store";
import type { AdminKeyStore } from "./modules/admin-keys/store";
import type { ApiKeyStore } from "./modules/api-keys/store";
import type { UserStore } from "./modules/users/store";
import type { EvaluationRecords } from "./modules/evaluation/records";
import type { DownloadStore } from "./modules/marketplace/store";
import type { Catalog } from "./plugins/catalog";
import type { PluginHost } from "./plugins/host";
import type { RuntimeStore } from "./plugins/runtime-store";
import type { PluginStore } from "./modules/plugins/store";
import type { IntegrationStore } from "./modules/integrations/store";
import type { IntegrationSink } from "./modules/integrations/sender";
import type { StreamHub } from "./modules/streams/hub";
import type { AuditStreamHub } from "./modules/audit/stream";
import type { DefinitionsStore } from "./modules/streams/store";
import type { StreamTokens } from "./modules/streams/tokens";
import type { RequestCounts } from "./http/request-counts";
import type { LoginRefusal, Tally } from "./modules/metrics/counts";
import type { Readiness } from "./modules/health/service";
import type { InsightsStore } from "./modules/insights/store";
import type { InsightsFlusher } from "./modules/insights/flusher";
import type { SettingsStore } from "./modules/settings/store";
import type { LoginFailureStore } from "./modules/auth/store";
import type { TransferStore } from "./modules/transfer/store";
import type { LeaseStore } from "./modules/leases/store";
import type { LeaseKeeper } from "./modules/leases/keeper";

/** Every module's store, on this process's database. */
export interface Stores {
  projects: ProjectStore;
  flags: FlagStore & SnapshotSource;
  /** Scheduled changes of flag states. */
  schedules: ScheduleStore;
  segments: SegmentStore;
  webhooks: WebhookStore;
  testSessions: TestSessionStore;
  users: UserStore;
  adminKeys: AdminKeyStore;
  apiKeys: ApiKeyStore;
  audit: AuditStore;
  pluginDownloads: DownloadStore;
  plugins: PluginStore;
  integrations: IntegrationStore;
  /** What the streams read: definitions for local evaluation, what a resume missed, where environments stand. */
  definitions: DefinitionsStore;
  /** What the plugin host writes of a running plugin (status, position, counters): runtime state, no entries. */
  pluginRuntime: RuntimeStore;
  /** Evaluation insights (counts, last evaluations) and stale flags. */
  insights: InsightsStore;
  /** The instance's own settings (the first start's mark, the generated JWT secret). */
  settings: SettingsStore;
  /** What `/metrics` and the health detail read: aggregates over other features' tables. */
  metrics: MetricsStore;
  /** The failed logins per email (the lockout), shared by the nodes. */
  loginFailures: LoginFailureStore;
  /** `flagsvc export` / `import`: every table of the instance, read in one snapshot, written in one commit. */
  transfer: TransferStore;
  /** Which node runs each plugin and each integration's change-event sends (src/modules/leases/). */
  leases: LeaseStore;
}

/**
 * The assembled instance (server.ts builds it; tests drive it): what the composition root hands
 * out, each service receiving only the stores and collaborators it uses.
 */
export interface AppContext {
  config: Config;
  /** This process's node id (generated at each start; the health detail shows it): the holder of its leases. */
  node: string;
  /** This node's leases (src/modules/leases/keeper.ts): which plugins and integrations' change events run here. */
  leases: LeaseKeeper;
  /** Database-wide operations: health, size, upkeep (src/db/sqlite-maintenance.ts). */
  maintenance: Maintenance;
  clock: Clock;
  /**
   * Read by every request's admission (credential, rate limit): the system clock at 10 ms
   * resolution (`coarseClock`), or the injected clock as it is.
   */
  requestClock: CoarseClock;
  log: Logger;
  scheduler: Scheduler;
  /** Every accepted credential, in memory. */
  credentials: CredentialRegistry;
  limiter: RateLimiter;
  /** Every flag of every environment, compiled: what evaluation reads. */
  snapshot: Snapshot;
  /** Live test sessions and their overrides (Testing API): what evaluation step 1 reads. */
  testSessions: LiveSessions;
  /** Webhook deliveries: `kick()` after a write that queued some sends them at once. */
  deliveries: Deliveries;
  /** The evaluation-record stream: what evaluation pushes and plugins (and integrations) read. */
  records: EvaluationRecords;
  /** Every write's entries, after its commit, to the subscribers. */
  bus: ChangeBus;
  /** Where every store's writes commit, with their change-log entries. */
  changeLog: ChangeLog;
  stores: Stores;
  /** The plugin packages: built in, and DATA_DIR/marketplace/ (watched). */
  catalog: Catalog;
  /** The running plugins, each in its own worker. */
  plugins: PluginHost;
  /** The integrations' sender (its own thread in the server): what the feed hands evaluations and change events to. */
  integrations: IntegrationSink;
  /**
   * The open streams (OFREP change streams, definitions streams) and where each environment
   * stands: `lastChange(environmentId)`, `waitFor(position, timeoutMs)`. Hears each commit once
   * the snapshot holds it.
   */
  streams: StreamHub;
  /** The open live audit-log streams (src/modules/audit/stream.ts); hears every commit. */
  auditStreams: AuditStreamHub;
  /** The OFREP change stream's URL credential: `issue(principal, now)`, `verify(token, now)`. */
  streamTokens: StreamTokens;
  /** Writes the evaluation counts to the database (docs/insights.md); `flush()` on demand, started by the server. */
  insightsFlusher: InsightsFlusher;
  /** Monotonic start, for uptime. */
  startedAt: number;
  /** `/metrics`' request counts, written by the pipeline and the hot routes. */
  requests: RequestCounts;
  /** `/metrics`' refused logins by cause, counted by the login. */
  loginRefused: Tally<LoginRefusal>;
  /** `/readyz`: starting, ready once the server listens, draining once it is asked to stop. */
  readiness: Readiness;
  /** How many change-log positions this node's state is behind the database (another node's commits not heard yet); 0 on SQLite. */
  lag(): Promise<number>;
  /**
   * Stops the jobs, flushes the evaluation counts, closes the database and releases the data-dir
   * lock. On SQLite all of it is done when this returns; on PostgreSQL the promise settles once the
   * last flush is written and the pool is closed.
   */
  close(): Promise<void>;
}
