/**
 * Holds this node's leases (store.ts): each name it wants is tried at once and then at every
 * tick (a third of the TTL, so about every 5 s for the 15 s default) until it is granted; a held
 * one is renewed at every tick. `gained` is called when a lease is granted, `lost` when a renewal
 * is refused (another node has it) or when renewals failed (the database unreachable) until the
 * lease may have lapsed: the work stops here then, since another node may have started it.
 *
 * `close` stops the ticks and releases nothing (a stopped context behaves as a dead node: its
 * leases lapse); `releaseAll` gives every held lease up, for a graceful stop, so that another
 * node takes the work over at its next tick instead of after the TTL.
 */
import { hostname } from "node:os";
import { randomBase62 } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { LeaseStore } from "./store";

/** How long a lease lasts unless renewed. */
export const LEASE_TTL_MS = 15_000;

/** A node's id: its host name and a random part, new at each start (two processes on one host differ). */
export function newNodeId(): string {
  return `${hostname()}/${randomBase62(8)}`;
}

export interface Leased {
  gained(): void;
  lost(): void;
}

interface Wanted {
  handler: Leased;
  /** When the lease lapses at the latest, as far as this node knows (0: not held). */
  heldUntil: number;
}

export class LeaseKeeper {
  private readonly wanted = new Map<string, Wanted>();
  private readonly timer: ReturnType<typeof setInterval>;
  private passing = false;
  private again = false;
  private closed = false;

  constructor(
    private readonly deps: { store: LeaseStore; node: string; log: Logger; ttlMs?: number },
    private readonly ttlMs = deps.ttlMs ?? LEASE_TTL_MS,
  ) {
    this.timer = setInterval(() => this.tick(), Math.max(50, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  /** Whether this node holds the lease now. */
  holds(name: string): boolean {
    return (this.wanted.get(name)?.heldUntil ?? 0) > 0;
  }

  /**
   * Wants the lease: `handler.gained` once it is granted (at once when it is already held: a new
   * handler for the same work, e.g. a restart with a new configuration), `handler.lost` if it goes.
   */
  want(name: string, handler: Leased): void {
    const current = this.wanted.get(name);
    if (current) {
      current.handler = handler;
      if (current.heldUntil > 0) handler.gained();
      return;
    }
    this.wanted.set(name, { handler, heldUntil: 0 });
    this.tick();
  }

  /** No longer wanted: released if held (the caller has stopped the work). */
  async drop(name: string): Promise<void> {
    const w = this.wanted.get(name);
    if (!w) return;
    this.wanted.delete(name);
    // Closed: as a dead node, its leases lapse (and its database may be closed already).
    if (w.heldUntil > 0 && !this.closed) await this.release(name);
  }

  /** Every held lease given up (a graceful stop, after the work stopped). */
  async releaseAll(): Promise<void> {
    this.close();
    const held = [...this.wanted].filter(([, w]) => w.heldUntil > 0).map(([name]) => name);
    this.wanted.clear();
    await Promise.all(held.map((name) => this.release(name)));
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }

  /** One pass at a time; ticks asked for during one make one more pass after it (many `want`s at start: one or two passes). */
  private tick(): void {
    if (this.closed) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    void (async () => {
      try {
        do {
          this.again = false;
          await this.pass();
        } while (this.again && !this.closed);
      } finally {
        this.passing = false;
      }
    })();
  }

  private async pass(): Promise<void> {
    const { store, node, log } = this.deps;
    for (const [name, w] of [...this.wanted]) {
      if (this.closed || this.wanted.get(name) !== w) continue;
      const asked = Date.now();
      try {
        const ok = w.heldUntil > 0 ? await store.renew(name, node, this.ttlMs) : await store.acquire(name, node, this.ttlMs);
        if (this.closed) continue; // closed meanwhile: as a dead node, its leases lapse (and its database may be closed already)
        if (this.wanted.get(name) !== w) {
          if (ok) await this.release(name); // dropped meanwhile
          continue;
        }
        if (ok) {
          const gained = w.heldUntil === 0;
          w.heldUntil = asked + this.ttlMs;
          if (gained) {
            log.info("lease gained", { lease: name, node });
            w.handler.gained();
          }
        } else if (w.heldUntil > 0) this.lose(name, w, "another node holds it");
      } catch (e) {
        const error = e instanceof Error ? e.message : String(e);
        if (w.heldUntil > 0 && Date.now() >= w.heldUntil) this.lose(name, w, `not renewed in time: ${error}`);
        else log.warn("lease: the store failed; trying again at the next tick", { lease: name, error });
      }
    }
  }

  private lose(name: string, w: Wanted, reason: string): void {
    w.heldUntil = 0;
    this.deps.log.warn("lease lost", { lease: name, node: this.deps.node, reason });
    w.handler.lost();
  }

  private release(name: string): Promise<void> {
    return this.deps.store.release(name, this.deps.node).catch((e) =>
      this.deps.log.warn("lease: release failed (it lapses)", { lease: name, error: e instanceof Error ? e.message : String(e) }),
    );
  }
}
