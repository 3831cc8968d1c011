/**
 * Database-wide operations, none of them a feature's: whether the database answers and how big
 * it is (health, `/metrics`), the planner's upkeep, a consistent copy and its check (`flagsvc
 * backup`), and the schema's state (`flagsvc admin`). Nothing
 * here runs per request but the health checks.
 */
import { statSync } from "node:fs";
import type { Store } from "./client";
import { schemaStatus, type SchemaStatus } from "./migrate";

export interface Maintenance {
  /** True when the database answers a query. */
  answers(): Promise<boolean>;
  /** The database's size in bytes (on SQLite: the file and its write-ahead log). */
  bytes(): Promise<number>;
  /** The query planner's periodic upkeep (every 6 hours, and at the stop). */
  optimize(): Promise<void>;
  /** Writes a consistent copy of the database to `target` (a new, empty file), safe while others write. */
  backup(target: string): Promise<void>;
  /** "ok", or what the database's own integrity check found. */
  integrityCheck(): Promise<string>;
  /** Applied, pending and unknown migrations. */
  schemaStatus(): Promise<SchemaStatus>;
}

/** The database file and its WAL, in bytes (a file that is not there counts 0). */
function databaseBytes(file: string): number {
  let bytes = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      bytes += statSync(f).size;
    } catch {
      // no WAL right now
    }
  }
  return bytes;
}

/** `Maintenance` of one SQLite database (`file`: where it is, for its size). */
export class SqliteMaintenance implements Maintenance {
  constructor(
    private readonly store: Store,
    private readonly file: string,
  ) {}

  async answers(): Promise<boolean> {
    try {
      return this.store.sqlite.query("SELECT 1 AS ok").get() !== null;
    } catch {
      return false;
    }
  }

  async bytes(): Promise<number> {
    return databaseBytes(this.file);
  }

  async optimize(): Promise<void> {
    this.store.sqlite.run("PRAGMA optimize");
  }

  async backup(target: string): Promise<void> {
    // VACUUM INTO accepts an empty existing file (created owner-only by the caller).
    this.store.sqlite.prepare("VACUUM INTO ?").run(target);
  }

  async integrityCheck(): Promise<string> {
    return this.store.sqlite.query<{ integrity_check: string }, []>("PRAGMA integrity_check").get()!.integrity_check;
  }

  async schemaStatus(): Promise<SchemaStatus> {
    return schemaStatus(this.store.sqlite);
  }

  // SQLite alone (no interface: PostgreSQL's server checkpoints by itself). The background
  // thread checkpoints every second on its own connection, and the main connection's automatic
  // checkpoints are off while it runs (src/background/).

  /** A passive checkpoint: copies what it can of the WAL into the database without waiting for readers or writers. */
  checkpoint(): void {
    this.store.sqlite.run("PRAGMA wal_checkpoint(PASSIVE)");
  }

  /** This connection checkpoints once the WAL holds `pages` pages (0: never by itself). */
  autoCheckpoint(pages: number): void {
    this.store.sqlite.run(`PRAGMA wal_autocheckpoint = ${Math.trunc(pages)}`);
  }
}
