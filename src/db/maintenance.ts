/**
 * Database-wide upkeep of the SQLite file: WAL checkpoints. The background thread checkpoints
 * every second on its own connection, and the main connection's automatic checkpoints are off
 * while it runs (src/background/). PostgreSQL has nothing of this (its server checkpoints).
 */
import type { Database } from "bun:sqlite";

export class SqliteMaintenance {
  constructor(private readonly sqlite: Database) {}

  /** A passive checkpoint: copies what it can of the WAL into the database without waiting for readers or writers. */
  checkpoint(): void {
    this.sqlite.run("PRAGMA wal_checkpoint(PASSIVE)");
  }

  /** This connection checkpoints once the WAL holds `pages` pages (0: never by itself). */
  autoCheckpoint(pages: number): void {
    this.sqlite.run(`PRAGMA wal_autocheckpoint = ${Math.trunc(pages)}`);
  }
}
