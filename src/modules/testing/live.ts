/**
 * The live test sessions in memory: what evaluation reads (resolution step 1) and what the
 * Testing API answers from. The database (store.ts) is the durable copy: start-up fills this
 * from it, and every write of the service commits first and then updates this, before its
 * response goes out (read-your-writes). On PostgreSQL, the other nodes' writes arrive through
 * pg-sync.ts (`put`, `remove`, `replaceAll`).
 *
 * Evaluation's cost: one Map get by token and a comparison of `expiresAt` with the clock's
 * `now`; an expired session is ignored at once, whatever the hourly sweep has done yet.
 */
import type { ChangeEntry } from "../../changes/entry";
import type { Override, OverrideSource } from "../../evaluation/types";
import type { SessionRow, StoredSession, TestSessionStore } from "./store";

export interface LiveSession extends SessionRow {
  /** `expiresAt` in ms since the epoch: live while `now < expiresAtMs`. */
  expiresAtMs: number;
  /** Flag key -> override value; mutated in place by the service after each commit. */
  overrides: Map<string, Override>;
}

export class LiveSessions implements OverrideSource {
  private readonly byId = new Map<string, LiveSession>();
  private readonly byToken = new Map<string, LiveSession>();

  /** The hot path: the overrides of a live session of `projectId` with this token, else undefined. */
  overridesFor(token: string, projectId: string, now: number): ReadonlyMap<string, Override> | undefined {
    const session = this.byToken.get(token);
    return session !== undefined && now < session.expiresAtMs && session.projectId === projectId ? session.overrides : undefined;
  }

  /** The session with this id unless it is unknown or expired at `now`. */
  live(id: string, now: number): LiveSession | undefined {
    const session = this.byId.get(id);
    return session !== undefined && now < session.expiresAtMs ? session : undefined;
  }

  /**
   * The project's sessions live at `now`, oldest first: by `createdAt`, then by id for the same
   * millisecond (the map's insertion order is lost at a restart). A scan of every session: this
   * serves a management call, never evaluation.
   */
  liveOf(projectId: string, now: number): LiveSession[] {
    const sessions: LiveSession[] = [];
    for (const session of this.byId.values()) if (session.projectId === projectId && now < session.expiresAtMs) sessions.push(session);
    return sessions.sort((a, b) => compare(a.createdAt, b.createdAt) || compare(a.id, b.id));
  }

  add(session: LiveSession): void {
    this.byId.set(session.id, session);
    this.byToken.set(session.token, session);
  }

  /**
   * A session as stored (another node's write): added, or updated in place (a service call
   * holding it keeps the same object), its overrides replaced.
   */
  put({ overrides, ...row }: StoredSession): void {
    const session = this.byId.get(row.id);
    if (session === undefined) {
      this.add({ ...row, expiresAtMs: Date.parse(row.expiresAt), overrides: new Map(overrides) });
      return;
    }
    Object.assign(session, row, { expiresAtMs: Date.parse(row.expiresAt) });
    session.overrides.clear();
    for (const [key, value] of overrides) session.overrides.set(key, value);
  }

  /** Every session as stored now (a node's resynchronisation): those not among them are removed. */
  replaceAll(stored: readonly StoredSession[]): void {
    const ids = new Set(stored.map((s) => s.id));
    for (const id of [...this.byId.keys()]) if (!ids.has(id)) this.remove(id);
    for (const s of stored) this.put(s);
  }

  remove(id: string): void {
    const session = this.byId.get(id);
    if (session === undefined) return;
    this.byId.delete(id);
    this.byToken.delete(session.token);
  }

  /** The change log's subscriber: a deleted project's sessions stop working at once. */
  readonly subscriber = (entries: readonly ChangeEntry[]): void => {
    for (const e of entries) if (e.resource.type === "project" && e.action === "deleted") this.removeProject(e.resource.id);
  };

  /** A deleted project's sessions (the database cascade removed their rows). */
  removeProject(projectId: string): void {
    for (const session of this.byId.values()) if (session.projectId === projectId) this.remove(session.id);
  }

  /** Sessions expired at `now`; returns how many were dropped. */
  removeExpired(now: number): number {
    let removed = 0;
    for (const session of this.byId.values()) {
      if (now >= session.expiresAtMs) {
        this.remove(session.id);
        removed++;
      }
    }
    return removed;
  }

  /** Sessions held (live or expired but not yet swept). */
  get size(): number {
    return this.byId.size;
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The sessions not yet expired at `now`, with their overrides, from the database (start-up). */
export async function loadSessions(store: Pick<TestSessionStore, "live">, now: number): Promise<LiveSessions> {
  const sessions = new LiveSessions();
  for (const stored of await store.live(now)) sessions.put(stored);
  return sessions;
}
