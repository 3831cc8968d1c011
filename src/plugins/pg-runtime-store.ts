/** `RuntimeStore` on PostgreSQL (runtime-store.ts has the interface and the SQLite implementation): one short statement each, on the pool. */
import { and, eq, ne, sql } from "drizzle-orm";
import type { PgQueries } from "../db/pg/client";
import { plugins } from "../db/pg/schema";
import { PgChangeEventStore } from "../modules/change-events/pg-store";
import type { HandedStats, RunStatus, RuntimeStore } from "./runtime-store";

export class PgRuntimeStore implements RuntimeStore {
  private readonly events: PgChangeEventStore;

  constructor(private readonly db: PgQueries) {
    this.events = new PgChangeEventStore(db);
  }

  async setStatus(id: string, s: RunStatus): Promise<void> {
    await this.db
      .update(plugins)
      .set({ status: s.status, errorMessage: s.status === "error" ? s.errorMessage : null })
      .where(and(eq(plugins.id, id), eq(plugins.enabled, true)));
  }

  async runnable(id: string): Promise<boolean> {
    const rows = await this.db
      .select({ id: plugins.id })
      .from(plugins)
      .where(and(eq(plugins.id, id), eq(plugins.enabled, true), ne(plugins.status, "error")));
    return rows.length > 0;
  }

  async positionOf(id: string): Promise<number> {
    const [row] = await this.db.select({ p: plugins.eventPosition }).from(plugins).where(eq(plugins.id, id));
    return row?.p ?? 0;
  }

  async droppedOf(id: string): Promise<number> {
    const [row] = await this.db.select({ d: plugins.evaluationsDropped }).from(plugins).where(eq(plugins.id, id));
    return row?.d ?? 0;
  }

  eventsAfter(projectId: string, position: number, limit: number): Promise<{ position: number; payload: string }[]> {
    return this.events.after(projectId, position, limit);
  }

  async handed(id: string, position: number, stats: HandedStats): Promise<void> {
    await this.db
      .update(plugins)
      .set({
        eventPosition: sql`greatest(${plugins.eventPosition}, ${position})`,
        eventsHandled: sql`${plugins.eventsHandled} + ${stats.handled}`,
        errors: sql`${plugins.errors} + ${stats.errors}`,
        lastEventAt: sql`coalesce(${stats.lastEventAt}, ${plugins.lastEventAt})`,
      })
      .where(eq(plugins.id, id));
  }

  async addDropped(id: string, count: number): Promise<void> {
    if (count > 0) await this.db.update(plugins).set({ evaluationsDropped: sql`${plugins.evaluationsDropped} + ${count}` }).where(eq(plugins.id, id));
  }

  pruneEvents(): Promise<void> {
    return this.events.prune();
  }
}
