/**
 * The integrations thread (thread.ts starts and watches it): the sender (sender.ts) on its own
 * SQLite connection, at the lowest CPU priority (SCHED_IDLE): it gets only CPU time evaluation
 * does not want, so on a saturated core it falls behind (evaluations dropped and counted,
 * changes wait in their durable queue) instead of slowing evaluation. Each batch of evaluation
 * records is acknowledged once handed to the sender, for the main thread's flow control.
 */
import { openDatabase, type Store } from "../../db/client";
import { systemClock } from "../../lib/clock";
import { idleCollector } from "../../lib/idle-collect";
import { forwardingLogger } from "../../lib/log";
import { lowestPriority } from "../../lib/scheduling";
import { CONNECTORS } from "./connectors";
import { IntegrationSender } from "./sender";
import { SqliteIntegrationRuntimeStore } from "./store";
import { LeaseKeeper } from "../leases/keeper";
import { SqliteLeaseStore } from "../leases/store";
import type { FromIntegrations, ToIntegrations } from "./thread";

declare const self: Worker;

const send = (message: FromIntegrations) => self.postMessage(message);
let running: { store: Store; sender: IntegrationSender; leases: LeaseKeeper } | undefined;

/** Collects this thread's garbage once no message came for a while (after a burst of evaluations, say). */
const collector = idleCollector();

self.onmessage = (event: MessageEvent<ToIntegrations>) => {
  const message = event.data;
  collector.idle();
  switch (message.kind) {
    case "start": {
      const priority = lowestPriority();
      const log = forwardingLogger(message.config.logLevel, (record) => send({ kind: "log", record }));
      if (priority !== "idle") log.info("integrations thread: SCHED_IDLE is not available here", { priority });
      const store = openDatabase(message.file);
      // The leases on this thread's connection, held as the process's node (granted at once on SQLite).
      const leases = new LeaseKeeper({ store: new SqliteLeaseStore(store.sqlite), node: message.node, log });
      const sender = new IntegrationSender({ store: new SqliteIntegrationRuntimeStore(store.sqlite), clock: systemClock, log, config: message.config, connectors: CONNECTORS, leases });
      running = { store, sender, leases };
      return;
    }
    case "reload":
      running?.sender.reload();
      return;
    case "evaluations":
      running?.sender.evaluations(message.projectId, message.batch);
      send({ kind: "took" });
      return;
    case "dropped":
      running?.sender.dropped(message.projectId, message.count);
      return;
    case "events":
      running?.sender.eventsCommitted(message.projectId);
      return;
    case "stop": {
      const stopping = running;
      running = undefined;
      void (stopping ? stopping.sender.stop() : Promise.resolve()).finally(() => {
        stopping?.leases.close();
        stopping?.store.sqlite.close();
        send({ kind: "stopped" });
      });
      return;
    }
  }
};
