/**
 * App assembly (createApp: what tests drive with app.handle) and the running service
 * (startServer: storage, bootstrap, TLS, listener, jobs, graceful stop).
 */
import { Elysia } from "elysia";
import { BackgroundThread } from "./background/thread";
import { bootstrap } from "./bootstrap";
import type { Config } from "./config";
import type { AppContext } from "./context";
import { openBackend } from "./db/open";
import { OperatorError } from "./lib/errors";
import { accessGuard, admitter, RATE_LIMIT_HEADERS } from "./http/auth";
import { CredentialRegistry, jwtSecret } from "./http/credentials";
import { pipeline } from "./http/pipeline";
import { hotRoutes } from "./http/native";
import { Cors } from "./http/cors";
import { RateLimiter } from "./http/rate-limit";
import { coarseClock, systemClock, type Clock } from "./lib/clock";
import { createLogger, type Logger } from "./lib/log";
import { Scheduler } from "./lib/scheduler";
import { adminKeysRoutes } from "./modules/admin-keys/routes";
import { adminKeyService } from "./modules/admin-keys/service";
import { pruneAuditLog } from "./modules/audit/retention";
import { auditRoutes } from "./modules/audit/routes";
import { auditService } from "./modules/audit/service";
import { AuditStreamHub } from "./modules/audit/stream";
import { apiKeysRoutes } from "./modules/api-keys/routes";
import { apiKeyService } from "./modules/api-keys/service";
import { authRoutes } from "./modules/auth/routes";
import { LoginThrottle } from "./modules/auth/service";
import { docsRoutes } from "./modules/docs/routes";
import { consoleAssets, consoleRoutes } from "./modules/console/routes";
import { evaluationRoutes, previewRoutes } from "./modules/evaluation/routes";
import { previewService } from "./modules/evaluation/preview";
import { healthRoutes } from "./modules/health/routes";
import { Readiness, type ThreadState } from "./modules/health/service";
import { LOGIN_REFUSALS, Tally } from "./modules/metrics/counts";
import { metricsRoutes } from "./modules/metrics/routes";
import { createMetrics } from "./modules/metrics/service";
import { RequestCounts } from "./http/request-counts";
import { VERSION } from "./version";
import { flagsRoutes } from "./modules/flags/routes";
import { loadSnapshot, snapshotSubscriber } from "./modules/flags/snapshot";
import { flagService } from "./modules/flags/service";
import { schedulesRoutes } from "./modules/schedules/routes";
import { scheduleService } from "./modules/schedules/service";
import { segmentsRoutes } from "./modules/segments/routes";
import { segmentService } from "./modules/segments/service";
import { projectService } from "./modules/projects/service";
import { ChangeBus } from "./changes/bus";
import { LeaseKeeper, newNodeId } from "./modules/leases/keeper";
import { Outbox } from "./modules/webhooks/outbox";
import { projectsRoutes } from "./modules/projects/routes";
import { EvaluationService } from "./modules/evaluation/service";
import { ofrepRoutes } from "./modules/ofrep/routes";
import { OfrepService } from "./modules/ofrep/service";
import { EvaluationRecords } from "./modules/evaluation/records";
import { busyGauge } from "./lib/scheduling";
import { testingRoutes } from "./modules/testing/routes";
import { loadSessions } from "./modules/testing/live";
import { scheduleSessionSweep, testingService } from "./modules/testing/service";
import { isPro } from "./http/edition";
import { usersRoutes } from "./modules/users/routes";
import { userService } from "./modules/users/service";
import { DeliveryDispatcher } from "./modules/webhooks/dispatcher";
import { webhooksRoutes } from "./modules/webhooks/routes";
import { scheduleWebhookJobs, webhookService } from "./modules/webhooks/service";
import { OutboundPolicy } from "./lib/outbound";
import { ChangeEventQueue } from "./modules/change-events/queue";
import { CONNECTORS } from "./modules/integrations/connectors";
import { IntegrationFeed } from "./modules/integrations/feed";
import { IntegrationSender, type IntegrationSink } from "./modules/integrations/sender";
import { IntegrationThread } from "./modules/integrations/thread";
import { integrationsRoutes } from "./modules/integrations/routes";
import { integrationService } from "./modules/integrations/service";
import { marketplaceRoutes } from "./modules/marketplace/routes";
import { marketplaceService } from "./modules/marketplace/service";
import { Catalog } from "./plugins/catalog";
import { PluginHost } from "./plugins/host";
import { DEFAULT_LIMITS } from "./plugins/sandbox";
import { pluginsRoutes } from "./modules/plugins/routes";
import { pluginService } from "./modules/plugins/service";
import { StreamHub } from "./modules/streams/hub";
import { streamsRoutes } from "./modules/streams/routes";
import { streamsService } from "./modules/streams/service";
import { StreamTokens } from "./modules/streams/tokens";
import { InsightsFlusher } from "./modules/insights/flusher";
import { insightsRoutes } from "./modules/insights/routes";
import { insightsService } from "./modules/insights/service";
import { configuredTls, loadTls, TLS12_CIPHERS, type TlsMaterial } from "./tls";

/**
 * Bun's own limit answers with a bare 413 before our pipeline runs, so it is set out of reach:
 * the pipeline refuses bodies over 1 MiB itself (JSON 413) by Content-Length before reading,
 * or by counting a chunked body, and nothing is buffered.
 */
const SERVER_BODY_CEILING = Number.MAX_SAFE_INTEGER;
const DRAIN_MS = 10_000;
/**
 * Before it stops listening, a stopping server keeps serving this long: requests that clients
 * sent on open keep-alive connections just before the signal may still sit unread in the
 * socket, and Bun's stop closes a connection with nothing in progress, unread bytes and all
 * (the client sees its request reset, unanswered). Read now, they are in flight, and drained.
 */
const DRAIN_GRACE_MS = 100;
/** Resolution of the clock that admits requests (decisions: rate limits). */
const REQUEST_CLOCK_MS = 10;
/**
 * Loading a large snapshot leaves its garbage (rows, parsed rules) in the heap, and the first
 * collection would come only under load, on top of the requests' garbage. Above this many
 * flags it is collected before listening: ~25 ms once at 10,000 flags, and the peak memory
 * under load is ~15 MB lower. Below it, a start-up stays fast (a collection costs ~15 ms even
 * on an empty heap).
 */
const COLLECT_AFTER_LOADING_FLAGS = 2_000;

/** Every module's service, each given only the stores and collaborators it uses. */
export function createServices(ctx: AppContext) {
  const { stores, clock } = ctx;
  const lastUsed = (id: string) => ctx.credentials.lastUsedAt(id);
  const evaluation = new EvaluationService({ snapshot: ctx.snapshot, clock, overrides: ctx.testSessions, records: ctx.records });
  const insights = insightsService({ store: stores.insights, projects: stores.projects, flags: stores.flags, snapshot: ctx.snapshot, flusher: ctx.insightsFlusher, clock, log: ctx.log });
  const flags = flagService({ flags: stores.flags, projects: stores.projects, clock, insights: insights.flagInsights, history: stores.audit });
  const plugins = pluginService({ plugins: stores.plugins, projects: stores.projects, catalog: ctx.catalog, host: ctx.plugins, runtime: stores.pluginRuntime, leases: stores.leases, clock, log: ctx.log });
  // A plugin written on any node (this one's API or another's, through the change feed): the node that runs it follows.
  ctx.bus.subscribe("plugin runs", (entries) => {
    for (const e of entries) {
      if (e.resource.type !== "plugin") continue;
      plugins.reconcile(e.resource.id).catch((err) => ctx.log.error("plugin: following a change failed", { pluginId: e.resource.id, error: err instanceof Error ? err.message : String(err) }));
    }
  });
  return {
    insights,
    projects: projectService({ projects: stores.projects, clock }),
    flags,
    schedules: scheduleService({ schedules: stores.schedules, flags: stores.flags, projects: stores.projects, flagService: flags, clock, log: ctx.log }),
    segments: segmentService({ segments: stores.segments, projects: stores.projects, clock, history: stores.audit }),
    webhooks: webhookService({
      webhooks: stores.webhooks,
      projects: stores.projects,
      clock,
      outbound: new OutboundPolicy(ctx.config.outboundAllowedHosts),
      deliveries: ctx.deliveries,
    }),
    testing: testingService({ sessions: stores.testSessions, projects: stores.projects, live: ctx.testSessions, clock, log: ctx.log, pro: isPro(ctx.config) }),
    /** What a login reads: the users by email, the token issuer; where it counts refusals. */
    login: { users: stores.users, credentials: ctx.credentials, clock, refused: ctx.loginRefused, failures: stores.loginFailures },
    // Evaluation step 1 reads the test sessions' overrides from memory.
    evaluation,
    preview: previewService({ evaluation, projects: stores.projects }),
    ofrep: new OfrepService({ evaluation, changes: ctx.streams, streams: ctx.streamTokens, clock }),
    users: userService({ users: stores.users, clock }),
    adminKeys: adminKeyService({ adminKeys: stores.adminKeys, clock, lastUsed }),
    apiKeys: apiKeyService({ apiKeys: stores.apiKeys, projects: stores.projects, clock, lastUsed }),
    audit: auditService({ audit: stores.audit, projects: stores.projects, live: ctx.auditStreams }),
    marketplace: marketplaceService({ catalog: ctx.catalog, downloads: stores.pluginDownloads }),
    integrations: integrationService({ integrations: stores.integrations, projects: stores.projects, connectors: CONNECTORS, clock, outbound: new OutboundPolicy(ctx.config.outboundAllowedHosts) }),
    plugins,
    streams: streamsService({ hub: ctx.streams, tokens: ctx.streamTokens, credentials: ctx.credentials, definitions: stores.definitions, clock }),
  };
}

export type Services = ReturnType<typeof createServices>;

export function createApp(ctx: AppContext, services: Services = createServices(ctx)) {
  const { config, log } = ctx;
  const { behindProxy } = config;
  const admit = admitter(ctx);
  // The hot routes (src/http/native.ts): `serve.routes` go to Bun's router ahead of the app's own;
  // a request to one of them that reaches the app is answered by the same handler.
  const cors = new Cors(config.corsOrigins);
  const hot = hotRoutes({ admit, log, behindProxy, cors, requests: ctx.requests }, [
    ...evaluationRoutes(services.evaluation),
    ...ofrepRoutes(services.ofrep),
  ]);
  const app = new Elysia({ normalize: false, serve: { maxRequestBodySize: SERVER_BODY_CEILING, routes: hot.table } });
  return app
    .use(pipeline({ log, behindProxy, routes: () => app.routes, admit, admitHeaders: RATE_LIMIT_HEADERS, hot: hot.match, requests: ctx.requests }))
    .use(accessGuard())
    .use(docsRoutes(() => app))
    .use(consoleRoutes())
    .use(healthRoutes({ config, startedAt: ctx.startedAt, database: ctx.maintenance, readiness: ctx.readiness, detail: healthDetailDeps(ctx, services) }))
    .use(metricsRoutes(metricsOf(ctx, services), config))
    .use(authRoutes({ ...services.login, behindProxy }))
    .use(usersRoutes(services.users))
    .use(adminKeysRoutes(services.adminKeys))
    .use(projectsRoutes(services.projects))
    .use(apiKeysRoutes(services.apiKeys))
    .use(flagsRoutes(services.flags))
    .use(insightsRoutes(services.insights))
    .use(schedulesRoutes(services.schedules))
    .use(segmentsRoutes(services.segments))
    .use(webhooksRoutes(services.webhooks))
    .use(hot.docs())
    .use(previewRoutes(services.preview))
    .use(testingRoutes(services.testing, config))
    .use(auditRoutes(services.audit))
    .use(pluginsRoutes(services.plugins))
    .use(marketplaceRoutes(services.marketplace, config))
    .use(integrationsRoutes(services.integrations, config))
    .use(streamsRoutes(services.streams, cors));
}

export type App = ReturnType<typeof createApp>;

/** `/metrics`: each metric read, at scrape time, from where it is counted or stored. */
function metricsOf(ctx: AppContext, services: Services) {
  return createMetrics({
    snapshot: ctx.snapshot,
    requests: ctx.requests,
    deliveries: ctx.deliveries,
    loginRefused: ctx.loginRefused,
    store: ctx.stores.metrics,
    schedules: services.schedules,
    streams: { size: () => ({ ...ctx.streams.size(), audit: ctx.auditStreams.size() }) },
    database: ctx.maintenance,
    version: VERSION,
    edition: ctx.config.edition,
  });
}

/** What the admin detail of `/v1/health` reads. */
function healthDetailDeps(ctx: AppContext, services: Services) {
  const state = (thread: unknown): ThreadState =>
    thread instanceof BackgroundThread || thread instanceof IntegrationThread ? (thread.running ? "running" : "restarting") : "in-process";
  return {
    database: ctx.maintenance,
    lag: () => ctx.lag(),
    store: ctx.stores.metrics,
    schedules: services.schedules,
    threads: () => ({ background: state(ctx.deliveries), integrations: state(ctx.integrations) }),
    pluginWorkers: () => ctx.plugins.workers,
    node: ctx.node,
  };
}

/**
 * The app's requests as the listening server dispatches them: the hot routes (Bun's router in
 * the binary) answer before the app's hooks either way (the pipeline's onRequest), so this is
 * `app.handle` with the server's signature. Tests drive it.
 */
export function dispatcher(app: { handle(request: Request): Promise<Response> }) {
  return (request: Request): Promise<Response> => app.handle(request);
}

export interface ContextDeps {
  log?: Logger;
  clock?: Clock;
  /**
   * Webhooks are sent from the background thread (src/background/) and integrations from a
   * thread of their own (src/modules/integrations/thread.ts), the server's choice; otherwise
   * both on this thread with this context's clock (tests step it to drive retries).
   */
  background?: boolean;
  /**
   * Whether the request thread is busy: the evaluation-record stream then gives each reader a
   * sample (records.ts). The server passes lib/scheduling's gauge; tests run their own code on
   * this thread, so by default it is never busy.
   */
  recordsBusy?: () => boolean;
  /** How long a lease lasts unless renewed (default LEASE_TTL_MS, 15 s; renewed every third of it): tests shorten it. */
  leaseTtlMs?: number;
}

export async function createContext(config: Config, deps: ContextDeps = {}): Promise<AppContext & { applied: number }> {
  const log = deps.log ?? createLogger({ level: config.logLevel, format: config.logFormat });
  const clock = deps.clock ?? systemClock;
  // The change log and its subscribers, in this order: evaluation (then the streams), credentials, test sessions, webhook sender, change events (plugins, integrations).
  const bus = new ChangeBus(log);
  const backend = await openBackend(config, bus, clock, log);
  const { changeLog, stores } = backend;
  // The senders' own threads open their own connection to the file (SQLite); otherwise they run here.
  const threads = deps.background ? backend.threads : undefined;
  // Jobs marked `oneNode` (retention, sweeps, upkeep) run on one node at a time (Backend.exclusive).
  const scheduler = new Scheduler(log, backend.exclusive);
  const requestClock = coarseClock(clock, deps.clock ? 0 : REQUEST_CLOCK_MS);
  const deliveries = threads
    ? new BackgroundThread({ maintenance: threads, file: threads.file, config, log })
    : new DeliveryDispatcher({ queue: backend.deliveryQueue, clock, log, config });
  // Where the other nodes' commits are read from: read before any state is loaded, so none is lost.
  const feedFrom = backend.feed ? await stores.audit.position() : 0;
  const snapshot = await loadSnapshot(stores.flags);
  const secret = await jwtSecret(backend.credentials, config.jwtSecret, clock);
  const credentials = await CredentialRegistry.open(backend.credentials, clock, secret, requestClock);
  const streamTokens = new StreamTokens(secret);
  const streams = new StreamHub({ store: stores.definitions, credentials, clock, log, initial: await stores.definitions.lastChanges() });
  credentials.onReload(() => streams.revalidate());
  const auditStreams = new AuditStreamHub({ store: stores.audit, callers: credentials, clock, log, position: await stores.audit.position() });
  credentials.onReload(() => auditStreams.revalidate());
  const testSessions = await loadSessions(stores.testSessions, clock.now());
  const insightsFlusher = new InsightsFlusher({ snapshot, store: stores.insights, clock, log });
  const outbox = new Outbox((tx) => stores.webhooks.outboxRows(tx), deliveries);
  const records = new EvaluationRecords((e) => log.error("evaluation records: a reader failed", { error: e instanceof Error ? e.message : String(e) }), deps.recordsBusy);
  const catalog = new Catalog({ dataDir: config.dataDir, log }).watch();
  // This process's node id and its leases: which plugins and integrations' change events run here (docs/scaling.md).
  const node = newNodeId();
  const leases = new LeaseKeeper({ store: stores.leases, node, log, ttlMs: deps.leaseTtlMs });
  const plugins = new PluginHost({
    leases,
    store: stores.pluginRuntime,
    records,
    log,
    clock,
    limits: { ...DEFAULT_LIMITS, memoryMb: config.pluginMemoryMb },
    outboundAllowedHosts: config.outboundAllowedHosts,
  });
  // The integrations' sender: on a thread of its own (lowest CPU priority) in the server, here otherwise.
  const sender: IntegrationSink = threads
    ? new IntegrationThread({ file: threads.file, config, log, node })
    : new IntegrationSender({ store: backend.integrationRuntime, clock, log, config, connectors: CONNECTORS, leases });
  const integrations = new IntegrationFeed({ store: backend.integrationRuntime, records, sink: sender, connectors: CONNECTORS, log });
  const changeEvents = new ChangeEventQueue((tx) => ({ events: backend.changeEventsIn(tx), flags: stores.webhooks.outboxRows(tx) }), [plugins, integrations]);
  changeLog.participate(outbox.participant);
  changeLog.participate(changeEvents.participant);
  // A scheduled change's own flag-state write marks it applied, in that write's transaction.
  changeLog.participate(stores.schedules.participant);
  // The streams hear each commit once the snapshot holds it: a client that refetches at their message sees the change.
  bus.subscribe("snapshot", snapshotSubscriber(snapshot, stores.flags, streams.subscriber));
  bus.subscribe("audit streams", auditStreams.subscriber);
  bus.subscribe("credentials", credentials.subscriber);
  bus.subscribe("test sessions", testSessions.subscriber);
  bus.subscribe("webhook sender", outbox.subscriber);
  bus.subscribe("integrations", integrations.subscriber);
  // Another node's commits queue change events too (in its transaction): this node's readers pull them; only the
  // lease holders send (this node's own commits are heard here too: a second kick, which the readers coalesce).
  if (backend.feed) {
    bus.subscribe("change events of other nodes", (entries) => {
      const projects = new Set<string>();
      for (const e of entries) if (e.project && (e.resource.type === "flag" || e.resource.type === "flag_state")) projects.add(e.project.id);
      for (const projectId of projects) for (const reader of [plugins, integrations]) reader.eventsCommitted(projectId);
    });
  }
  bus.subscribe("plugins", (entries) => {
    for (const e of entries) if (e.resource.type === "project" && e.action === "deleted") plugins.stopProject(e.resource.id);
  });
  await backend.feed?.start(feedFrom);
  await backend.testSessionSync?.start(testSessions);
  return {
    applied: backend.applied,
    node,
    leases,
    maintenance: backend.maintenance,
    config,
    log,
    clock,
    requestClock,
    scheduler,
    credentials,
    limiter: new RateLimiter(config.rateLimits, clock),
    snapshot,
    testSessions,
    deliveries,
    records,
    bus,
    changeLog,
    stores,
    catalog,
    plugins,
    integrations: sender,
    streams,
    auditStreams,
    streamTokens,
    insightsFlusher,
    startedAt: performance.now(),
    requests: new RequestCounts(),
    loginRefused: new Tally(LOGIN_REFUSALS),
    readiness: new Readiness(),
    lag: async () => (backend.feed ? Math.max(0, (await stores.audit.position()) - backend.feed.position) : 0),
    close() {
      streams.close();
      auditStreams.close();
      catalog.close();
      scheduler.stopAll();
      // The counts since the last flush: a closed context (a stopped server, a test app) loses none.
      insightsFlusher.stop();
      insightsFlusher.flushLogged();
      plugins.close();
      integrations.close();
      void sender.stop();
      records.stop();
      deliveries.stop();
      // No lease is released here: a closed context is as a dead node, its leases lapse (a graceful stop released them).
      leases.close();
      // SQLite closes now (its last flush was synchronous); PostgreSQL once the last flush is written.
      const flushing = insightsFlusher.pending;
      return flushing ? flushing.then(() => backend.close()) : Promise.resolve(backend.close());
    },
  };
}

export interface RunningServer {
  ctx: AppContext;
  services: Services;
  app: App;
  port: number;
  /** `https://HOST:PORT` as listened on. */
  url: string;
  tls: TlsMaterial | null;
  bannerLines: string[];
  /** End the streams, stop accepting, drain in-flight requests (10 s at most), stop jobs, close the database. */
  stop(): Promise<void>;
}

export interface ServerDeps extends ContextDeps {
  /** Mounts more routes on the app, in place (tests: routes that hold a request open). */
  extend?: (app: App) => void;
}

/** Throws StartupError when the port cannot be bound (taken, not permitted); 0 (any free port) always can. */
function tryPort(host: string, port: number): void {
  if (port === 0) return;
  try {
    Bun.listen({ hostname: host, port, socket: { data() {} } }).stop(true);
  } catch (e) {
    throw new StartupError(`cannot listen on ${host}:${port}: ${(e as Error).message}`);
  }
}

export async function startServer(config: Config, deps: ServerDeps = {}): Promise<RunningServer> {
  // A configuration error must leave the data dir untouched: the configured TLS pair is checked first.
  const ownTls = config.behindProxy ? null : configuredTls(config);
  // The background thread runs on the system clock: a test that injects a clock keeps the sender here.
  const real = deps.clock === undefined;
  const ctx = await createContext(config, { ...deps, background: deps.background ?? real, recordsBusy: deps.recordsBusy ?? (real ? busyGauge() : undefined) });
  const { log } = ctx;
  try {
    if (ctx.applied > 0) log.info("database migrated", { migrations: ctx.applied });
    const tls = config.behindProxy ? null : (ownTls ?? (await loadTls(config, ctx.clock.now())));
    if (tls?.source === "generated") log.info("generated a self-signed TLS certificate", { file: tls.certFile, expiresAt: tls.expiresAt.toISOString() });

    if (ctx.snapshot.flagCount() >= COLLECT_AFTER_LOADING_FLAGS) Bun.gc(true);
    const services = createServices(ctx);
    const app = createApp(ctx, services);
    // The console's files, read and gzipped once now rather than on its first visitor's request.
    void consoleAssets().catch((e) => ctx.log.error("the console's files could not be loaded", { error: String(e) }));
    deps.extend?.(app);
    // A first start's generated credentials are shown once, in the banner of a server that runs:
    // the port is tried first (made before a failed listen, they would be stored and never
    // shown), then the bootstrap commits, then the server listens, so that no request is answered
    // before the instance exists (on PostgreSQL the bootstrap takes round trips).
    tryPort(config.host, config.port);
    const { lines } = await bootstrap(ctx);
    try {
      // reusePort off: a second process on a taken port must fail, not share the traffic.
      app.listen({ hostname: config.host, port: config.port, reusePort: false, ...(tls ? { tls: { cert: tls.cert, key: tls.key, ciphers: TLS12_CIPHERS } } : {}) });
    } catch (e) {
      // Taken since it was tried: what the bootstrap generated is shown here, once, all the same.
      throw new StartupError([`cannot listen on ${config.host}:${config.port}: ${(e as Error).message}`, ...lines].join("\n"));
    }
    const port = app.server!.port!;
    const scheme = tls ? "https" : "http";
    const url = `${scheme}://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    log.info(`listening on ${url}`, { edition: config.edition, behindProxy: config.behindProxy });

    ctx.scheduler.every("db-optimize", "0 17 */6 * * *", () => ctx.maintenance.optimize(), { oneNode: true });
    // Keys and users written by `flagsvc admin ...` in another process.
    ctx.scheduler.every("credentials-reload", "* * * * * *", async () => {
      if (await ctx.credentials.pollExternalChanges()) log.info("credentials reloaded after an external change");
    });
    ctx.scheduler.every("credentials-last-used", "*/30 * * * * *", () => ctx.credentials.flushLastUsed());
    // Webhook deliveries: due ones now (those that came due while down), then every second; retention daily.
    scheduleWebhookJobs(ctx);
    // Scheduled changes: those that came due while stopped now, in order of their time, then every second.
    try {
      const missed = await services.schedules.countDue();
      if (missed > 0) log.info("applying schedules missed while stopped", { count: missed });
      await services.schedules.applyDue();
    } catch (e) {
      log.error("job failed", { job: "schedules", error: e instanceof Error ? e.message : String(e) }); // the job tries again each second
    }
    ctx.scheduler.every("schedules", "* * * * * *", () => services.schedules.applyDue().then(() => undefined));
    // Expired test sessions: removed now, then every hour (they are ignored from expiry on anyway).
    await scheduleSessionSweep(ctx.scheduler, services.testing);
    // Plugins that were enabled are activated again (each in its own worker: nothing waits for them);
    // every minute, the change events every reader (plugin, integration) of a project is past are pruned.
    const activated = await services.plugins.activateAll();
    if (activated > 0) log.info("activating plugins", { plugins: activated });
    ctx.scheduler.every("change-events-prune", "0 * * * * *", () => ctx.stores.pluginRuntime.pruneEvents(), { oneNode: true });
    // Evaluation insights (docs/insights.md): the counts written every SVC_INSIGHTS_FLUSH_SECONDS (and at the stop,
    // by ctx.close); hourly buckets rolled into daily ones and old ones removed every hour; stale flags detected
    // now, then every 5 minutes.
    ctx.insightsFlusher.start(config.insightsFlushSeconds);
    ctx.scheduler.every("insights-rollup", "0 7 * * * *", () => services.insights.rollup().then(() => undefined), { oneNode: true });
    ctx.scheduler.every("stale-flags", "30 */5 * * * *", () => services.insights.detectStale().then(() => undefined), { oneNode: true });
    await services.insights.detectStale().catch((e) => log.error("job failed", { job: "stale-flags", error: e instanceof Error ? e.message : String(e) }));
    // Failed-login counts whose 15 minutes have ended: hourly.
    ctx.scheduler.every("login-failures-prune", "0 13 * * * *", () => new LoginThrottle(ctx.stores.loginFailures, ctx.clock).prune().then(() => undefined), { oneNode: true });
    // Audit-log retention: daily, on the background thread when there is one (a test's injected clock keeps it here).
    ctx.scheduler.every(
      "audit-retention",
      "0 47 3 * * *",
      async () => {
        if (ctx.deliveries instanceof BackgroundThread) ctx.deliveries.pruneAuditLog();
        else await pruneAuditLog(ctx.stores.audit, ctx.clock.now(), config.auditRetentionDays);
      },
      { oneNode: true },
    );

    // Migrated, snapshot loaded, listening, jobs scheduled: `/readyz` answers 200.
    ctx.readiness.listening();
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        const server = app.server!;
        // `/readyz` answers 503 from now on; load balancers get SVC_SHUTDOWN_DELAY_SECONDS to notice.
        ctx.readiness.draining();
        if (config.shutdownDelaySeconds > 0) log.info("draining: /readyz answers 503", { shutdownDelaySeconds: config.shutdownDelaySeconds });
        await Bun.sleep(config.shutdownDelaySeconds * 1000 + DRAIN_GRACE_MS);
        // Streams never finish by themselves: ended first, the drain would otherwise wait 10 s on them.
        ctx.streams.close();
        ctx.auditStreams.close();
        let timer: ReturnType<typeof setTimeout> | undefined;
        const timedOut = new Promise<false>((resolve) => (timer = setTimeout(resolve, DRAIN_MS, false)));
        const drained = await Promise.race([server.stop(false).then(() => true), timedOut]);
        clearTimeout(timer);
        if (!drained) {
          log.warn("in-flight requests still open after 10 s; closing them");
          await server.stop(true);
        }
        await ctx.credentials.flushLastUsed();
        // Each releases its leases: other nodes take the plugins and the integrations' change events over at their next try.
        await ctx.plugins.stopAll();
        await ctx.integrations.stop();
        await ctx.deliveries.stop();
        await ctx.maintenance.optimize();
        await ctx.close();
        log.info("stopped");
        log.flush();
      })());
    return { ctx, services, app, port, url, tls, bannerLines: lines, stop };
  } catch (e) {
    await ctx.close();
    throw e;
  }
}

/** A failure to start that is not a configuration value (exit 1). */
export class StartupError extends OperatorError {}
