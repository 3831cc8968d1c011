/**
 * A bound on password hashing (issue 20, point 5): each login's argon2id check takes 64 MiB and
 * a core for a tenth of a second or more, and without a bound one client sending logins in
 * parallel held every login for everyone for seconds. The gate runs at most `slots` checks at once; a client
 * (address) holds at most `share` places, running or waiting; the others wait in a queue of at
 * most `queueSize`, served in turn by client (each client with waiters in the order it first
 * waited, one check each), so one client cannot fill it ahead of another. Past its share, or
 * with every slot taken and the queue full, a check is refused at once: nothing runs, nothing
 * waits, so memory and waiting time stay bounded under any number of clients. A client refused for
 * its share must wait as told (SHARE_RETRY_MS) before it is checked again.
 */
import { availableParallelism } from "node:os";
import { systemClock, type Clock } from "../../lib/clock";

/** Checks at once: one per core, as Bun's hashing threads (no more could run anyway). */
export const HASH_SLOTS = Math.max(1, availableParallelism());
/** Places per client, running or waiting: half the slots, so another client always finds one. */
export const HASH_SHARE = Math.max(1, Math.floor(HASH_SLOTS / 2));
/** Checks waiting at most: a check waits at most two checks' time (2 × slots ahead of it) to start. */
export const HASH_QUEUE = 2 * HASH_SLOTS;

/**
 * A client refused for its share is told to retry after this long (`Retry-After: 1`), and is
 * refused until then, even with a place free: a client that hammers instead of waiting gets one
 * check a second or so, not one after the other on a core that everyone else's logins need. The
 * wait is not extended by the requests refused during it, so that clients sharing an address
 * (behind one NAT) are slowed down, never shut out.
 */
export const SHARE_RETRY_MS = 1_000;
/** Clients told to wait, kept at most (memory stays bounded under a spray of addresses). */
const MAX_WAITING_CLIENTS = 100_000;

/** Why a check was refused: its client holds its share, or every slot and place is taken. */
export type Refusal = "share" | "full";

export class HashGate {
  private running = 0;
  private waiting = 0;
  /** Places held per client, running or waiting; a client holding none is not kept. */
  private held = new Map<string, number>();
  /** Waiting checks' starts by client, clients in turn order (the next one served leads). */
  private queues = new Map<string, (() => void)[]>();
  /** Clients refused for their share, until when they must wait, in order of that moment. */
  private told = new Map<string, number>();

  constructor(
    readonly slots = HASH_SLOTS,
    readonly share = HASH_SHARE,
    readonly queueSize = HASH_QUEUE,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Runs `work` for `client` once a slot is free and returns its result; or, decided at once,
   * why it will not (then `work` never runs).
   */
  run<T>(client: string, work: () => Promise<T>): Promise<T> | Refusal {
    const held = this.held.get(client) ?? 0;
    if (this.mustWait(client)) return "share";
    if (held >= this.share) return this.refuse(client);
    if (this.running >= this.slots && this.waiting >= this.queueSize) return "full";
    this.held.set(client, held + 1);
    return this.turn(client)
      .then(work)
      .finally(() => this.leave(client));
  }

  /** Whether `client` was refused for its share (past its places) less than SHARE_RETRY_MS ago. */
  private mustWait(client: string): boolean {
    const now = this.clock.now();
    for (const [c, until] of this.told) {
      if (until > now) break;
      this.told.delete(c);
    }
    return this.told.has(client);
  }

  /** Refused for its share: `client` waits SHARE_RETRY_MS from now. */
  private refuse(client: string): "share" {
    if (this.told.size >= MAX_WAITING_CLIENTS) this.told.delete(this.told.keys().next().value!);
    this.told.set(client, this.clock.now() + SHARE_RETRY_MS);
    return "share";
  }

  /** Checks running and waiting now (tests). */
  load(): { running: number; waiting: number; clients: number } {
    return { running: this.running, waiting: this.waiting, clients: this.held.size };
  }

  /** Resolves when `client`'s check may start (at once while a slot is free). */
  private turn(client: string): Promise<void> {
    if (this.running < this.slots) {
      this.running++;
      return Promise.resolve();
    }
    this.waiting++;
    return new Promise((start) => {
      const queue = this.queues.get(client);
      if (queue) queue.push(start);
      else this.queues.set(client, [start]);
    });
  }

  /** A check ended: its slot goes to the next client in turn, which then goes to the back. */
  private leave(client: string): void {
    const held = this.held.get(client)! - 1;
    if (held === 0) this.held.delete(client);
    else this.held.set(client, held);
    const next = this.queues.entries().next();
    if (next.done) {
      this.running--;
      return;
    }
    const [waiter, queue] = next.value;
    this.queues.delete(waiter);
    if (queue.length > 1) this.queues.set(waiter, queue);
    this.waiting--;
    queue.shift()!();
  }
}
