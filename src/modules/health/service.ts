import type { Maintenance } from "../../db/sqlite-maintenance";
import { PLUGIN_STATUSES, type PluginStatus } from "../plugins/model";
import type { MetricsStore } from "../metrics/store";

/** What health reads of the database: whether it answers, its size. */
export type DatabaseHealth = Pick<Maintenance, "answers" | "bytes">;

/**
 * Whether the process takes traffic (`/readyz`): `starting` until the server listens (the
 * database migrated and the snapshot loaded before that), `ready` then, `draining` from the
 * moment it is asked to stop.
 */
export class Readiness {
  private state: "starting" | "ready" | "draining" = "starting";

  /** The server listens (and its jobs are scheduled). */
  listening(): void {
    if (this.state === "starting") this.state = "ready";
  }

  /** A stop began: never ready again. */
  draining(): void {
    this.state = "draining";
  }

  get ready(): boolean {
    return this.state === "ready";
  }
}

/** A worker thread's state: up, down (its supervisor starts it again), or none (tests and tools send on the main thread). */
export type ThreadState = "running" | "restarting" | "in-process";

/** What the admin detail of `/v1/health` reads. */
export interface HealthDetailDeps {
  database: DatabaseHealth;
  /** Positions of the change log this node has not heard yet (several nodes on PostgreSQL). */
  lag(): Promise<number>;
  store: Pick<MetricsStore, "pendingDeliveries" | "queuedChangeEvents" | "pluginsByStatus">;
  schedules: { countPending(): Promise<number> };
  threads: () => { background: ThreadState; integrations: ThreadState };
  /** Plugins running in a worker now. */
  pluginWorkers: () => number;
  /** This process's node id (the holder of its leases). */
  node: string;
}

export async function healthDetail(deps: HealthDetailDeps) {
  const rows = await deps.store.pluginsByStatus();
  const plugins = Object.fromEntries(PLUGIN_STATUSES.map((s) => [s, rows.find((r) => r.status === s)?.n ?? 0])) as Record<PluginStatus, number>;
  return {
    node: deps.node,
    database: { answers: await deps.database.answers(), bytes: await deps.database.bytes(), lag: await deps.lag() },
    threads: deps.threads(),
    pluginHost: { workers: deps.pluginWorkers(), plugins },
    queues: {
      webhookDeliveries: await deps.store.pendingDeliveries(),
      changeEvents: await deps.store.queuedChangeEvents(),
      schedulesPending: await deps.schedules.countPending(),
    },
  };
}
