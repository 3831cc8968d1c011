/**
 * The outbox (decisions §10) as a participant of every write's transaction
 * (src/changes/log.ts): the flag and flag-state entries of a commit become webhook events
 * (events.ts) and one pending delivery per matching enabled webhook, due at once, stored in
 * that same transaction (at-least-once: an event exists exactly when its change does). After
 * the commit, as a subscriber, it wakes the sender for the webhooks it queued deliveries for,
 * and for a webhook that a PATCH enabled again (its pending deliveries resume at once).
 */
import type { ChangeEntry } from "../../changes/entry";
import type { Effect, Tx } from "../../changes/log";
import { flagChanges } from "./events";
import type { OutboxRows } from "./store";

export class Outbox {
  constructor(
    /** The outbox's rows on a write's transaction. */
    private readonly rowsIn: (tx: Tx) => OutboxRows,
    private readonly deliveries: { kick(webhookIds?: readonly string[]): void | Promise<void> },
  ) {}

  /** In the transaction: the events of the entries, stored with their deliveries; after it, the sender takes them at once. */
  readonly participant = async (tx: Tx, entries: readonly ChangeEntry[]): Promise<Effect | undefined> => {
    const queued: string[] = [];
    const rows = this.rowsIn(tx);
    for (const entry of entries) {
      if (entry.project === null || (entry.resource.type !== "flag" && entry.resource.type !== "flag_state")) continue;
      // Most projects have no webhook: then nothing more is read.
      const takers = await rows.takers(entry.project.id);
      if (takers.length === 0) continue;
      const changes = await flagChanges(entry, rows);
      if (changes.length > 0) queued.push(...(await rows.recordEvents(entry.project, changes, entry.at, takers)));
    }
    if (queued.length > 0) return () => this.deliveries.kick(queued);
  };

  /** After a commit: a webhook that a PATCH enabled again resumes its pending deliveries at once. */
  readonly subscriber = (entries: readonly ChangeEntry[]): void | Promise<void> => {
    const enabled = entries.filter((e) => e.resource.type === "webhook" && e.action === "updated" && e.changes.enabled?.after === true).map((e) => e.resource.id);
    if (enabled.length > 0) return this.deliveries.kick(enabled);
  };
}
