/**
 * `/metrics` (docs/metrics.md): a prom-client Registry of its own (never the global one), the
 * process defaults (`collectDefaultMetrics`), and flagsvc's metrics, each read at scrape time
 * from where it is counted: nothing here runs per request.
 *  - Evaluations: the snapshot's FlagCounters (src/evaluation/counts.ts), labelled by the
 *    snapshot's slugs and keys; a deleted flag's counter is gone from the snapshot, and its
 *    series with it.
 *  - HTTP requests: the RequestCounts arrays (src/http/request-counts.ts), by route template.
 *  - Tallies (login refusals, webhook outcomes), gauges read from memory (streams) and from the
 *    database (src/modules/metrics/store.ts: queues, plugins, integrations, the change log).
 * The two metrics with many series (evaluations, requests) hand prom-client their values
 * directly (`get`), without its per-series label hashing; the others `collect()` into
 * ordinary gauges and counters. prom-client writes the exposition text.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue, type MetricValueWithName } from "prom-client";
import type { LabelledCounter } from "../../evaluation/snapshot";
import { DURATION_BUCKETS, type RequestCounts } from "../../http/request-counts";
import { PLUGIN_STATUSES } from "../plugins/model";
import { DELIVERY_OUTCOMES, LOGIN_REFUSALS, type DeliveryOutcome, type LoginRefusal, type Tally } from "./counts";
import type { MetricsStore } from "./store";
import type { Maintenance } from "../../db/sqlite-maintenance";

export interface MetricsDeps {
  snapshot: { labelledCounters(): Iterable<LabelledCounter> };
  requests: RequestCounts;
  deliveries: { storedOutcomes(): Readonly<Record<DeliveryOutcome, number>> };
  loginRefused: Tally<LoginRefusal>;
  store: MetricsStore;
  schedules: { countPending(): Promise<number> };
  streams: { size(): { changes: number; definitions: number; audit: number } };
  /** The database's size (on SQLite, its `-wal` beside it counts too). */
  database: Pick<Maintenance, "bytes">;
  version: string;
  edition: string;
}

export const PREFIX = "flagsvc_";

/** The Prometheus text of every metric; `contentType` for the answer. */
export interface Metrics {
  contentType: string;
  scrape(): Promise<string>;
}

export function createMetrics(deps: MetricsDeps): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];

  new ValuesCounter(
    {
      name: `${PREFIX}evaluations_total`,
      help: "Evaluations of existing flags since start, by project, environment, flag, variant (key, or on/off without one) and reason",
      labelNames: ["project", "environment", "flag", "variant", "reason"],
      registers,
    },
    () => {
      const values: MetricValue<string>[] = [];
      for (const { counter, projectSlug, environmentSlug } of deps.snapshot.labelledCounters()) {
        for (const { variant, reason, count } of counter.cells()) {
          values.push({ value: count, labels: { project: projectSlug, environment: environmentSlug, flag: counter.flagKey, variant, reason } });
        }
      }
      return values;
    },
  );

  new ValuesCounter(
    {
      name: `${PREFIX}http_requests_total`,
      help: "Answered HTTP requests by method, route template (unmatched: no route) and status",
      labelNames: ["method", "route", "status"],
      registers,
    },
    () => {
      const values: MetricValue<string>[] = [];
      for (const { slot, byStatus } of deps.requests.series()) {
        for (const [status, count] of byStatus) values.push({ value: count, labels: { method: slot.method, route: slot.route, status } });
      }
      return values;
    },
  );

  new ValuesHistogram(
    {
      name: `${PREFIX}http_request_duration_seconds`,
      help: "Time from a request's arrival to its answer, by method and route template",
      labelNames: ["method", "route"],
      buckets: [...DURATION_BUCKETS],
      registers,
    },
    () => {
      const name = `${PREFIX}http_request_duration_seconds`;
      const values: MetricValueWithName<string>[] = [];
      for (const { slot, cumulative, sum } of deps.requests.series()) {
        const labels = { method: slot.method, route: slot.route };
        for (let b = 0; b < cumulative.length; b++) {
          values.push({ metricName: `${name}_bucket`, value: cumulative[b]!, labels: { ...labels, le: b < DURATION_BUCKETS.length ? DURATION_BUCKETS[b]! : "+Inf" } });
        }
        values.push({ metricName: `${name}_sum`, value: sum, labels }, { metricName: `${name}_count`, value: cumulative.at(-1)!, labels });
      }
      return values;
    },
  );

  new Counter({
    name: `${PREFIX}webhook_deliveries_total`,
    help: "Webhook delivery attempts whose outcome was stored since start: succeeded, retried (failed, another attempt is scheduled) or failed (for good)",
    labelNames: ["outcome"],
    registers,
    collect() {
      this.reset();
      const counts = deps.deliveries.storedOutcomes();
      for (const outcome of DELIVERY_OUTCOMES) this.inc({ outcome }, counts[outcome]);
    },
  });

  new Gauge({
    name: `${PREFIX}webhook_deliveries_pending`,
    help: "Webhook deliveries waiting for an attempt (a first one or a retry)",
    registers,
    async collect() {
      this.set(await deps.store.pendingDeliveries());
    },
  });

  new Counter({
    name: `${PREFIX}integration_events_total`,
    help: "Events the integrations sent, by connector type and outcome (sent: accepted by the vendor; failed: refused, given up or dropped), as stored (every few seconds)",
    labelNames: ["type", "outcome"],
    registers,
    async collect() {
      const rows = await deps.store.integrationEvents();
      this.reset();
      for (const { type, sent, failed } of rows) {
        this.inc({ type, outcome: "sent" }, sent);
        this.inc({ type, outcome: "failed" }, failed);
      }
    },
  });

  new Gauge({
    name: `${PREFIX}plugins`,
    help: "Installed plugins by status",
    labelNames: ["status"],
    registers,
    async collect() {
      const rows = await deps.store.pluginsByStatus();
      for (const status of PLUGIN_STATUSES) this.set({ status }, rows.find((r) => r.status === status)?.n ?? 0);
    },
  });

  new Gauge({
    name: `${PREFIX}streams_connected`,
    help: "Open streams by kind: changes (the OFREP change stream), definitions, audit (the live audit log)",
    labelNames: ["kind"],
    registers,
    collect() {
      const { changes, definitions, audit } = deps.streams.size();
      this.set({ kind: "changes" }, changes);
      this.set({ kind: "definitions" }, definitions);
      this.set({ kind: "audit" }, audit);
    },
  });

  new Gauge({
    name: `${PREFIX}change_log_position`,
    help: "The change log's newest position (every write appends one or more entries)",
    registers,
    async collect() {
      this.set(await deps.store.changeLogPosition());
    },
  });

  new Gauge({
    name: `${PREFIX}schedules_pending`,
    help: "Scheduled flag-state changes not applied yet",
    registers,
    async collect() {
      this.set(await deps.schedules.countPending());
    },
  });

  new Counter({
    name: `${PREFIX}login_refused_total`,
    help: "Refused logins since start: bad_credentials (unknown email or wrong password), locked_out (too many failures for the email), busy (too many logins in progress)",
    labelNames: ["cause"],
    registers,
    collect() {
      this.reset();
      for (const cause of LOGIN_REFUSALS) this.inc({ cause }, deps.loginRefused.counts[cause]);
    },
  });

  new Gauge({
    name: `${PREFIX}database_bytes`,
    help: "Size of the SQLite database file and its write-ahead log, in bytes",
    registers,
    async collect() {
      this.set(await deps.database.bytes());
    },
  });

  new Gauge({
    name: `${PREFIX}build_info`,
    help: "1, labelled with the running version and edition",
    labelNames: ["version", "edition"],
    registers,
  }).set({ version: deps.version, edition: deps.edition }, 1);

  return { contentType: registry.contentType, scrape: () => registry.metrics() };
}

/** A counter whose values are read at scrape time from `read`, handed to prom-client as they are. */
class ValuesCounter extends Counter<string> {
  constructor(
    private readonly config: ConstructorParameters<typeof Counter<string>>[0],
    private readonly read: () => MetricValue<string>[],
  ) {
    super(config);
  }

  override async get(): Promise<MetricObjectWithValues<MetricValue<string>>> {
    const { name, help } = this.config;
    return { name, help, type: "counter" as never, aggregator: "sum", values: this.read() } as unknown as MetricObjectWithValues<MetricValue<string>>;
  }
}

/** A histogram whose bucket, sum and count values are read at scrape time from `read`. */
class ValuesHistogram extends Histogram<string> {
  constructor(
    private readonly config: ConstructorParameters<typeof Histogram<string>>[0],
    private readonly read: () => MetricValueWithName<string>[],
  ) {
    super(config);
  }

  override async get(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    const { name, help } = this.config;
    return { name, help, type: "histogram" as never, aggregator: "sum", values: this.read() } as unknown as MetricObjectWithValues<MetricValueWithName<string>>;
  }

  /** What the registry asks a histogram for when it writes the text. */
  getForPromString(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    return this.get();
  }
}
