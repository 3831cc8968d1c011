/**
 * Leases: background work that must run on one node at a time (a plugin, an integration's
 * change-event sends) is run by the node that holds its lease (docs/scaling.md). A lease has a
 * name (`plugin:<id>`, `integration:<id>`), a holder (the node's id, generated at each start:
 * node.ts) and an expiry; the holder renews it well before it lapses (keeper.ts), and a node
 * that dies stops renewing, so another takes it over once it has lapsed.
 *
 * `LeaseStore` is asynchronous; the PostgreSQL implementation (pg-store.ts) grants a lease with
 * one conditional statement, by the database's clock (one clock for every node). On SQLite
 * there is one process (the data-dir lock): `acquire` is granted at once, whoever held the
 * lease before (a previous process of the same data dir, or the other thread of this one, never
 * for the same name), so a restart does not wait for its predecessor's leases to lapse.
 */
import type { Database } from "bun:sqlite";

export interface LeaseStore {
  /** Takes the lease for `holder` for `ttlMs` when it is free, lapsed or already its own (then renewed); true when granted. */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Extends `holder`'s lease by `ttlMs` from now; false when the lease is not (any longer) its own. */
  renew(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up (nothing when `holder` does not hold it). */
  release(name: string, holder: string): Promise<void>;
  /** Who holds the lease now (null: nobody, or a lapsed lease). */
  holder(name: string): Promise<string | null>;
}

export class SqliteLeaseStore implements LeaseStore {
  private readonly acquireQuery;
  private readonly renewQuery;
  private readonly releaseQuery;
  private readonly holderQuery;

  constructor(sqlite: Database) {
    this.acquireQuery = sqlite.query<unknown, [string, string, number]>(
      "INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
    );
    this.renewQuery = sqlite.query<{ name: string }, [number, string, string]>("UPDATE leases SET expires_at = ?1 WHERE name = ?2 AND holder = ?3 RETURNING name");
    this.releaseQuery = sqlite.query<unknown, [string, string]>("DELETE FROM leases WHERE name = ?1 AND holder = ?2");
    this.holderQuery = sqlite.query<{ holder: string }, [string, number]>("SELECT holder FROM leases WHERE name = ?1 AND expires_at >= ?2");
  }

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    this.acquireQuery.run(name, holder, Date.now() + ttlMs);
    return true;
  }

  async renew(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.renewQuery.all(Date.now() + ttlMs, name, holder).length > 0;
  }

  async release(name: string, holder: string): Promise<void> {
    this.releaseQuery.run(name, holder);
  }

  async holder(name: string): Promise<string | null> {
    return this.holderQuery.get(name, Date.now())?.holder ?? null;
  }
}
