/**
 * Storage, as the rest of the service sees it (docs/architecture.md, Storage): the change log and
 * every module's store, each typed by its interface. The SQLite backend (sqlite-backend.ts) is
 * the default; another stands behind the same interfaces, chosen by configuration.
 */
import type { ChangeLog } from "../changes/log";
import type { Stores } from "../context";

export interface Backend {
  readonly dialect: "sqlite" | "postgres";
  /** Where every store's writes commit, with their entries. */
  readonly changeLog: ChangeLog;
  readonly stores: Stores;
  /** How many schema migrations opening it applied (0: it was up to date). */
  readonly applied: number;
  /** Closes the database (and releases what the backend holds: SQLite's data-dir lock). */
  close(): void;
}
