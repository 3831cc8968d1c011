/**
 * The outbox (decisions §10) as a participant of every write's transaction
 * (src/changes/sqlite.ts): the flag and flag-state entries of a commit become webhook events
 * (events.ts) and one pending delivery per matching enabled webhook, due at once, stored in
 * that same transaction (at-least-once: an event exists exactly when its change does). After
 * the commit, as a subscriber, it wakes the sender for the webhooks it queued deliveries for,
 * and for a webhook that a PATCH enabled again (its pending deliveries resume at once).
 */
import type { ChangeEntry } from "../../changes/entry";
import { flagChanges } from "./events";
import type { OutboxRows } from "./store";

export class Outbox {
  /** The webhooks the transaction under way queued deliveries for: woken after its commit. */
  private queued: string[] = [];

  constructor(
    private readonly rows: OutboxRows,
    private readonly deliveries: { kick(webhookIds?: readonly string[]): void | Promise<void> },
  ) {}

  /** In the transaction: the events of the entries, stored with their deliveries. */
  readonly participant = (entries: readonly ChangeEntry[]): void => {
    this.queued = [];
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      // Most projects have no webhook: then nothing more is read.
      const takers = this.rows.takersNow(entry.project.id);
      if (takers.length === 0) continue;
      const changes = flagChanges(entry, this.rows);
      if (changes.length > 0) this.queued.push(...this.rows.recordEventsNow(entry.project, changes, entry.at, takers));
    }
  };

  /** After the commit: the sender takes the deliveries at once. */
  readonly subscriber = (entries: readonly ChangeEntry[]): void | Promise<void> => {
    const queued = this.queued;
    this.queued = [];
    for (const e of entries) if (e.resource.type === "webhook" && e.action === "updated" && e.changes.enabled?.after === true) queued.push(e.resource.id);
    if (queued.length > 0) return this.deliveries.kick(queued);
  };
}
