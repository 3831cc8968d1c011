/**
 * The audit log's retention (SVC_AUDIT_RETENTION_DAYS): run daily on the background thread
 * (src/background/worker.ts), so it imports nothing of the HTTP side.
 */
import { iso } from "../../lib/clock";
import type { AuditStore } from "./store";

/** Entries removed per transaction: each a short hold on the write lock. */
export const PRUNE_BATCH = 1000;

/** Removes the entries older than `days` days (`0` keeps everything); the number removed. */
export async function pruneAuditLog(audit: AuditStore, now: number, days: number): Promise<number> {
  if (days === 0) return 0;
  return audit.prune(iso(now - days * 86_400_000), PRUNE_BATCH);
}
