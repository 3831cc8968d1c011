import type { Database } from "bun:sqlite";
import { PLUGIN_STATUSES, type PluginStatus } from "../plugins/model";
import { databaseBytes } from "../metrics/service";
import type { MetricsStore } from "../metrics/store";

/** True when the database answers a query. */
export function databaseAnswers(sqlite: Pick<Database, "query">): boolean {
  try {
    return sqlite.query("SELECT 1 AS ok").get() !== null;
  } catch {
    return false;
  }
}

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
  sqlite: Pick<Database, "query">;
  databaseFile: string;
  store: Pick<MetricsStore, "pendingDeliveries" | "queuedChangeEvents" | "pluginsByStatus">;
  schedules: { countPending(): Promise<number> };
  threads: () => { background: ThreadState; integrations: ThreadState };
  /** Plugins running in a worker now. */
  pluginWorkers: () => number;
}

export async function healthDetail(deps: HealthDetailDeps) {
  const rows = deps.store.pluginsByStatus();
  const plugins = Object.fromEntries(PLUGIN_STATUSES.map((s) => [s, rows.find((r) => r.status === s)?.n ?? 0])) as Record<PluginStatus, number>;
  return {
    database: { answers: databaseAnswers(deps.sqlite), bytes: databaseBytes(deps.databaseFile) },
    threads: deps.threads(),
    pluginHost: { workers: deps.pluginWorkers(), plugins },
    queues: {
      webhookDeliveries: deps.store.pendingDeliveries(),
      changeEvents: deps.store.queuedChangeEvents(),
      schedulesPending: await deps.schedules.countPending(),
    },
  };
}
