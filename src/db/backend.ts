/**
 * Storage, as the rest of the service sees it (docs/architecture.md, Storage): the change log and
 * every module's store, each typed by its interface. The SQLite backend (sqlite-backend.ts) is
 * the default; another stands behind the same interfaces, chosen by configuration.
 */
import type { ChangeLog, Tx } from "../changes/log";
import type { Stores } from "../context";
import type { ChangeEventWrites } from "../modules/change-events/store";
import type { CredentialStore } from "../modules/credentials/store";
import type { IntegrationRuntimeStore } from "../modules/integrations/store";
import type { DeliveryQueue } from "../modules/webhooks/store";
import type { LiveSessions } from "../modules/testing/live";
import type { Maintenance } from "./sqlite-maintenance";

export interface Backend {
  readonly dialect: "sqlite" | "postgres";
  /** Where every store's writes commit, with their entries. */
  readonly changeLog: ChangeLog;
  readonly stores: Stores;
  /** How many schema migrations opening it applied (0: it was up to date). */
  readonly applied: number;
  /** What the credential registry loads and writes. */
  readonly credentials: CredentialStore;
  /** Database-wide operations (health, `/metrics`, the planner's upkeep, backup, schema state). */
  readonly maintenance: Maintenance;
  /** The webhook sender's queue, for a sender on the request thread. */
  readonly deliveryQueue: DeliveryQueue;
  /** The integrations' feed and sender. */
  readonly integrationRuntime: IntegrationRuntimeStore;
  /** The change-event queue's writes inside a write's transaction (a participant's rows). */
  changeEventsIn(tx: Tx): ChangeEventWrites;
  /**
   * SQLite: what the senders' own threads need (the webhook sender and the integrations' sender
   * in the server): the database file, to open their own connection, and the request
   * connection's automatic checkpoints, which the background thread takes over. Absent: the
   * senders run on the request thread, over this backend.
   */
  readonly threads?: { file: string; autoCheckpoint(pages: number): void };
  /**
   * PostgreSQL: the other nodes' commits, published on this node's bus (src/changes/pg-feed.ts),
   * started once the subscribers are in place, from the log's position read before they loaded
   * their state; stopped by `close`. Absent: this node is the only writer (SQLite).
   */
  readonly feed?: { start(from: number): Promise<void>; readonly position: number };
  /**
   * Runs a periodic job (retention, sweeps, upkeep) unless another node runs it now: on
   * PostgreSQL under a session-level advisory lock named after the job (a node that finds it
   * taken skips this run); on SQLite, one process owns the database: it just runs. Resolves
   * true when `task` ran.
   */
  exclusive(name: string, task: () => unknown): Promise<boolean>;
  /**
   * PostgreSQL: the other nodes' test-session writes (they make no change-log entry), applied
   * to this node's live sessions (src/modules/testing/pg-sync.ts); stopped by `close`. Absent:
   * this node is the only writer.
   */
  readonly testSessionSync?: { start(live: LiveSessions): Promise<void> };
  /** Closes the database (and releases what the backend holds: SQLite's data-dir lock). */
  close(): void | Promise<void>;
}
