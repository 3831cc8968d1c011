/**
 * One way out of a commit: the entries of each committed write are published once, in commit
 * order, to every in-process subscriber (the evaluation snapshot, the credential registry, the
 * test sessions, the webhook sender; later plugins, integrations and streams). The writer awaits
 * `publish` before it answers, so what a subscriber does synchronously (the snapshot) is seen
 * by the writer's next request: read-your-writes.
 *
 * A subscriber that throws is logged and the others still run: the change is committed and
 * recorded whatever a consumer does with it.
 */
import type { Logger } from "../lib/log";
import type { ChangeEntry } from "./entry";

export type Subscriber = (entries: readonly ChangeEntry[]) => void | Promise<void>;

export class ChangeBus {
  private readonly subscribers: { name: string; fn: Subscriber }[] = [];

  constructor(private readonly log?: Logger) {}

  /** Subscribers run in the order they subscribed. */
  subscribe(name: string, fn: Subscriber): void {
    this.subscribers.push({ name, fn });
  }

  /** Every subscriber, in order, with one commit's entries; resolves when the asynchronous ones have. */
  publish(entries: readonly ChangeEntry[]): Promise<void> | undefined {
    let pending: Promise<void>[] | undefined;
    for (const { name, fn } of this.subscribers) {
      try {
        const done = fn(entries);
        if (done) (pending ??= []).push(done.catch((e) => this.failed(name, e)));
      } catch (e) {
        this.failed(name, e);
      }
    }
    return pending && Promise.all(pending).then(() => undefined);
  }

  private failed(name: string, e: unknown): void {
    this.log?.error("change subscriber failed", { subscriber: name, error: e instanceof Error ? e.message : String(e) });
  }
}
