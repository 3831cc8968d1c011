/**
 * One process per data dir. Evaluation serves from memory, updated by this process's own
 * writes: a second process writing the same database would leave the first one stale. The
 * lock is an exclusive SQLite lock on `flagsvc.lock`, held while the process lives; the
 * kernel drops it when the process ends, however it ends, so a crash leaves no stale lock.
 */
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { OperatorError } from "../lib/errors";

export const LOCK_FILE = "flagsvc.lock";

export class DataDirLockedError extends OperatorError {
  constructor(dataDir: string) {
    super(`another flagsvc process is using ${dataDir} (a server or a migration); stop it first`);
  }
}

export interface DataDirLock {
  release(): void;
}

export function lockDataDir(dataDir: string): DataDirLock {
  const db = new Database(join(dataDir, LOCK_FILE), { create: true });
  try {
    db.run("PRAGMA busy_timeout = 0");
    db.run("PRAGMA locking_mode = EXCLUSIVE");
    // The first write takes the exclusive lock; EXCLUSIVE locking mode keeps it until close.
    db.run("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since TEXT NOT NULL)");
    db.transaction(() => {
      db.run("DELETE FROM holder");
      db.run("INSERT INTO holder (pid, since) VALUES (?, ?)", [process.pid, new Date().toISOString()]);
    })();
  } catch (e) {
    db.close();
    if ((e as { code?: string }).code?.startsWith("SQLITE_BUSY")) throw new DataDirLockedError(dataDir);
    throw e;
  }
  return { release: () => db.close() };
}
