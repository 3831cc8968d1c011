/**
 * What both PostgreSQL followers share (the change feed, pg-feed.ts, and the test sessions'
 * sync, src/modules/testing/pg-sync.ts): LISTEN on Bun's dedicated listening connection, a
 * resynchronisation after every reconnect (notifications sent while it was down are lost), and
 * a revision check on a timer.
 */
import type { SQL } from "bun";

export interface ListenChecked {
  /** Each notification's payload. */
  heard(payload: string): void;
  /** After a reconnect of the listening connection. */
  resync(): void;
  /** The revision check, every `everyMs`. */
  check(): void;
  everyMs: number;
}

/** Listens on `channel` as described; `stop()` clears the timer and unlistens. */
export async function listenChecked(sql: SQL, channel: string, on: ListenChecked): Promise<{ stop(): Promise<void> }> {
  let listening = false;
  const subscription = await sql.listen(channel, on.heard, () => {
    if (listening) on.resync();
    listening = true;
  });
  const timer = setInterval(on.check, on.everyMs);
  timer.unref?.();
  return {
    async stop() {
      clearInterval(timer);
      await subscription.unlisten().catch(() => undefined);
    },
  };
}
