/**
 * The change-event queue's writer (decisions §10–12: plugins' `onEvent` and integrations get
 * the webhook payloads of their project's flag changes, at least once across restarts). As a
 * participant of every write's transaction, the flag and flag-state entries of a project with
 * a reader become webhook event payloads (the webhooks' own derivation, ../webhooks/events.ts)
 * stored in `change_events` with the entry's actor, so an event exists exactly when its change
 * does. After the commit, as a subscriber, it tells the readers which projects have new events;
 * each reader pulls them from its own stored position.
 */
import type { ChangeEntry } from "../../changes/entry";
import { flagChanges, type FlagReads } from "../webhooks/events";
import type { ChangeEventRows } from "./store";

export interface ChangeEventReader {
  eventsCommitted(projectId: string): void;
}

export class ChangeEventQueue {
  /** The projects the transaction under way queued events for: announced after its commit. */
  private queued = new Set<string>();

  constructor(
    private readonly rows: ChangeEventRows,
    private readonly reads: FlagReads,
    private readonly readers: readonly ChangeEventReader[],
  ) {}

  readonly participant = (entries: readonly ChangeEntry[]): void => {
    this.queued = new Set();
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      if (!this.rows.wants(entry.project.id)) continue;
      const changes = flagChanges(entry, this.reads);
      if (changes.length === 0) continue;
      this.rows.record(entry.project, changes, entry.at, entry.actor);
      this.queued.add(entry.project.id);
    }
  };

  readonly subscriber = (): void => {
    const queued = this.queued;
    this.queued = new Set();
    for (const projectId of queued) for (const reader of this.readers) reader.eventsCommitted(projectId);
  };
}
