/**
 * `IntegrationStore` and `IntegrationRuntimeStore` on PostgreSQL (store.ts has the interfaces
 * and the SQLite implementations).
 */
import { asc, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { integrations, projects } from "../../db/pg/schema";
import { PgChangeEventStore } from "../change-events/pg-store";
import { rowsOf } from "../../db/pg/client";
import type { QueuedEvent } from "../change-events/store";
import type { EnabledIntegration, IntegrationRuntimeStore, IntegrationStore, StatsDelta, StoredIntegration } from "./store";

const COLUMNS = {
  id: integrations.id,
  projectId: integrations.projectId,
  projectSlug: projects.slug,
  type: integrations.type,
  config: integrations.config,
  enabled: integrations.enabled,
  sent: integrations.sent,
  failed: integrations.failed,
  lastError: integrations.lastError,
  lastSentAt: integrations.lastSentAt,
  createdAt: integrations.createdAt,
  updatedAt: integrations.updatedAt,
};

export class PgIntegrationStore implements IntegrationStore {
  constructor(private readonly log: PgChangeLog) {}

  private async findOn(db: PgQueries, integrationId: string): Promise<StoredIntegration | undefined> {
    const [row] = await db.select(COLUMNS).from(integrations).innerJoin(projects, eq(projects.id, integrations.projectId)).where(eq(integrations.id, integrationId));
    return row;
  }

  find(integrationId: string): Promise<StoredIntegration | undefined> {
    return this.findOn(this.log.db, integrationId);
  }

  list(projectId: string): Promise<StoredIntegration[]> {
    return this.log.db
      .select(COLUMNS)
      .from(integrations)
      .innerJoin(projects, eq(projects.id, integrations.projectId))
      .where(eq(integrations.projectId, projectId))
      .orderBy(asc(integrations.createdAt), asc(integrations.seq));
  }

  async create(author: Author, integration: StoredIntegration, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = integration;
    await this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      await db.insert(integrations).values({ ...row, eventPosition: await new PgChangeEventStore(db).latest() });
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => Written<StoredIntegration>): Promise<StoredIntegration> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.findOn(db, integrationId);
      const written = decide(current);
      if (written.changes.length > 0 && current) {
        const { config, enabled, lastError, updatedAt } = written.result;
        const enabledAgain = enabled && !current.enabled;
        await db
          .update(integrations)
          .set({ config, enabled, lastError, updatedAt, ...(enabledAgain ? { eventPosition: await new PgChangeEventStore(db).latest() } : {}) })
          .where(eq(integrations.id, integrationId));
      }
      return written;
    });
  }

  remove(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const change = decide(await this.findOn(db, integrationId));
      await db.delete(integrations).where(eq(integrations.id, integrationId));
      return { result: undefined, changes: [change] };
    });
  }
}

/** The sending side on PostgreSQL: the config as JSON text (as SQLite hands it), positions as numbers. */
export class PgIntegrationRuntimeStore implements IntegrationRuntimeStore {
  private readonly events: PgChangeEventStore;

  constructor(private readonly db: PgQueries) {
    this.events = new PgChangeEventStore(db);
  }

  enabled(): Promise<EnabledIntegration[]> {
    return rowsOf<EnabledIntegration>(
      this.db,
      sql`SELECT id, project_id AS "projectId", type, config::text AS config, event_position::float8 AS position FROM integrations WHERE enabled ORDER BY seq`,
    );
  }

  eventsAfter(projectId: string, position: number, limit: number): Promise<QueuedEvent[]> {
    return this.events.after(projectId, position, limit);
  }

  async addStats(integrationId: string, delta: StatsDelta, position = 0): Promise<void> {
    // One statement: the counters and the position they report what was sent up to (never back).
    await this.db
      .update(integrations)
      .set({
        eventPosition: sql`greatest(${integrations.eventPosition}, ${position})`,
        sent: sql`${integrations.sent} + ${delta.sent}`,
        failed: sql`${integrations.failed} + ${delta.failed}`,
        lastError: sql`coalesce(${delta.lastError}, ${integrations.lastError})`,
        lastSentAt: sql`coalesce(${delta.lastSentAt}, ${integrations.lastSentAt})`,
      })
      .where(eq(integrations.id, integrationId));
  }

  async positionOf(integrationId: string): Promise<number> {
    const [row] = await this.db.select({ p: integrations.eventPosition }).from(integrations).where(eq(integrations.id, integrationId));
    return row?.p ?? 0;
  }
}
