/**
 * The change-event queue's writer (decisions §10–12: plugins' `onEvent` and integrations get
 * the webhook payloads of their project's flag changes, at least once across restarts). As a
 * participant of every write's transaction, the flag and flag-state entries of a project with
 * a reader become webhook event payloads (the webhooks' own derivation, ../webhooks/events.ts)
 * stored in `change_events` with the entry's actor, so an event exists exactly when its change
 * does. After the commit, its effect tells the readers which projects have new events;
 * each reader pulls them from its own stored position.
 */
import type { ChangeEntry } from "../../changes/entry";
import type { Effect, Tx } from "../../changes/log";
import { flagChanges, type FlagReads } from "../webhooks/events";
import type { ChangeEventWrites } from "./store";

export interface ChangeEventReader {
  eventsCommitted(projectId: string): void;
}

export class ChangeEventQueue {
  constructor(
    /** The queue's rows and the flag reads of the derivation, on a write's transaction. */
    private readonly rowsIn: (tx: Tx) => { events: ChangeEventWrites; flags: FlagReads },
    private readonly readers: readonly ChangeEventReader[],
  ) {}

  /** In the transaction: the events stored; after it, the readers told which projects have new ones. */
  readonly participant = async (tx: Tx, entries: readonly ChangeEntry[]): Promise<Effect | undefined> => {
    const queued = new Set<string>();
    const rows = this.rowsIn(tx);
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      if (!(await rows.events.wants(entry.project.id))) continue;
      const changes = await flagChanges(entry, rows.flags);
      if (changes.length === 0) continue;
      await rows.events.record(entry.project, changes, entry.at, entry.actor);
      queued.add(entry.project.id);
    }
    if (queued.size > 0) return () => {
      for (const projectId of queued) for (const reader of this.readers) reader.eventsCommitted(projectId);
    };
  };
}
