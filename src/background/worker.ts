/**
 * The background thread: work that must not hold up requests on the main thread, on its own
 * SQLite connection to the same database (WAL: its reads never block the main thread's).
 *  - Webhook sending: the DeliveryDispatcher, kicked by the main thread after each write that
 *    queued deliveries (and every second). Its due queries, outcome writes, signing and HTTP
 *    happen here; the database stays the queue, so nothing is lost when this thread or the
 *    process dies.
 *    The daily retention clean-up runs here too, in short chunks.
 *  - The audit log's daily retention clean-up (SVC_AUDIT_RETENTION_DAYS), in short batches.
 *  - WAL checkpoints: the main connection has automatic checkpoints off while this thread
 *    runs (a checkpoint copies pages and syncs the file: milliseconds, inside whichever commit
 *    crosses the threshold); a passive checkpoint here every second keeps the WAL short.
 * Log lines go to the main thread's logger. Started and watched by thread.ts.
 */
import { openDatabase, type Store } from "../db/client";
import { SqliteMaintenance } from "../db/sqlite-maintenance";
import { systemClock } from "../lib/clock";
import { forwardingLogger, type Logger } from "../lib/log";
import { pruneAuditLog } from "../modules/audit/retention";
import { SqliteAuditStore } from "../modules/audit/store";
import { DeliveryDispatcher } from "../modules/webhooks/dispatcher";
import { SqliteDeliveryQueue } from "../modules/webhooks/store";
import type { FromWorker, ToWorker } from "./protocol";

declare const self: Worker;

const CHECKPOINT_EVERY_MS = 1000;

const send = (message: FromWorker) => self.postMessage(message);

let running:
  | { store: Store; maintenance: SqliteMaintenance; dispatcher: DeliveryDispatcher; log: Logger; timer: ReturnType<typeof setInterval>; retentionDays: number }
  | undefined;

function checkpoint(maintenance: SqliteMaintenance, log: Logger): void {
  try {
    maintenance.checkpoint();
  } catch (e) {
    log.warn("WAL checkpoint failed; retrying in a second", { error: e instanceof Error ? e.message : String(e) });
  }
}

async function pruneAudit({ store, log, retentionDays }: NonNullable<typeof running>): Promise<void> {
  try {
    const removed = await pruneAuditLog(new SqliteAuditStore(store), systemClock.now(), retentionDays);
    if (removed > 0) log.info("old audit-log entries removed", { entries: removed, retentionDays });
  } catch (e) {
    log.error("audit-log retention failed", { error: e instanceof Error ? e.message : String(e) });
  }
}

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  switch (message.kind) {
    case "start": {
      const log = forwardingLogger(message.config.logLevel, (record) => send({ kind: "log", record }));
      const store = openDatabase(message.file);
      const maintenance = new SqliteMaintenance(store, message.file);
      const dispatcher = new DeliveryDispatcher({ queue: new SqliteDeliveryQueue(store.sqlite), clock: systemClock, log, config: message.config });
      let reported = 0;
      const timer = setInterval(() => {
        checkpoint(maintenance, log);
        // The stored webhook outcomes, for /metrics, when they moved.
        const counts = dispatcher.storedOutcomes();
        const total = Object.values(counts).reduce((a, b) => a + b, 0);
        if (total !== reported) send({ kind: "outcomes", counts: { ...counts } });
        reported = total;
      }, CHECKPOINT_EVERY_MS);
      running = { store, maintenance, dispatcher, log, timer, retentionDays: message.config.auditRetentionDays };
      send({ kind: "ready" });
      return;
    }
    case "kick":
      running?.dispatcher.kick(message.webhookIds);
      if (message.id !== undefined) send({ kind: "kicked", id: message.id });
      return;
    case "prune":
      if (running) {
        const { log } = running;
        running.dispatcher.prune().catch((e) => log.error("webhook retention failed", { error: e instanceof Error ? e.message : String(e) }));
      }
      return;
    case "prune-audit-log":
      if (running) void pruneAudit(running);
      return;
    case "drain":
      void (running ? running.dispatcher.drain() : Promise.resolve()).then(() => send({ kind: "drained", id: message.id }));
      return;
    case "stop": {
      const stopping = running;
      running = undefined;
      if (!stopping) {
        send({ kind: "stopped" });
        return;
      }
      clearInterval(stopping.timer);
      void stopping.dispatcher.stop().finally(() => {
        checkpoint(stopping.maintenance, stopping.log);
        stopping.store.sqlite.close();
        send({ kind: "stopped" });
      });
      return;
    }
  }
};
