/**
 * The plugins' event queue (decisions §11: `onEvent` gets the webhook payloads of its project's
 * changes, at least once across restarts). As a participant of every write's transaction, the
 * flag and flag-state entries of a project with an enabled plugin become webhook event payloads
 * (the webhooks' own derivation, ../webhooks/events.ts) stored in `plugin_events`, so an event
 * exists exactly when its change does. After the commit, as a subscriber, it tells the host
 * which projects have new events; the host hands them over from each plugin's stored position.
 */
import type { ChangeEntry } from "../../changes/entry";
import { flagChanges, type FlagReads } from "../webhooks/events";
import type { PluginEventRows } from "./store";

export class PluginEventQueue {
  /** The projects the transaction under way queued events for: announced after its commit. */
  private queued = new Set<string>();

  constructor(
    private readonly rows: PluginEventRows,
    private readonly reads: FlagReads,
    private readonly host: { eventsCommitted(projectId: string): void },
  ) {}

  readonly participant = (entries: readonly ChangeEntry[]): void => {
    this.queued = new Set();
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      if (!this.rows.wantsNow(entry.project.id)) continue;
      const changes = flagChanges(entry, this.reads);
      if (changes.length === 0) continue;
      this.rows.recordNow(entry.project, changes, entry.at);
      this.queued.add(entry.project.id);
    }
  };

  readonly subscriber = (): void => {
    const queued = this.queued;
    this.queued = new Set();
    for (const projectId of queued) this.host.eventsCommitted(projectId);
  };
}
