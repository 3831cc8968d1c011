/**
 * All SQL of integrations behind `IntegrationStore` (asynchronous at its boundary, synchronous
 * SQLite inside). Writes of the API take the author and a pure `decide` of what is stored now
 * (throws to refuse; no change, nothing written), committed with their change-log entry. The
 * sender's own writes (stats, position) are runtime state: no entry (sender.ts).
 *
 * `IntegrationRuntimeStore` is the sending side's reads and runtime writes (feed.ts, sender.ts),
 * asynchronous too; `SqliteIntegrationRuntimeStore` prepares its statements on whichever
 * connection it is given (the integrations thread has its own).
 *
 * An integration reads the change-event queue from where it was created, or enabled again: what
 * was committed while it was off is not sent. `lastError` is written as the service decided
 * (a config that changes clears it).
 */
import type { Database } from "bun:sqlite";
import { asc, eq } from "drizzle-orm";
import { nextSeq } from "../../db/client";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { SqliteChangeLog, Written } from "../../changes/sqlite";
import { integrations, projects } from "../../db/schema";
import { SqliteChangeEventStore, type QueuedEvent } from "../change-events/store";

/** An integration as stored: its configuration in clear (the API masks its secrets), its project, its stats. */
export interface StoredIntegration {
  id: string;
  projectId: string;
  projectSlug: string;
  type: string;
  config: Record<string, unknown>;
  enabled: boolean;
  sent: number;
  failed: number;
  lastError: string | null;
  lastSentAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface IntegrationStore {
  find(integrationId: string): Promise<StoredIntegration | undefined>;
  /** The project's integrations, oldest first. */
  list(projectId: string): Promise<StoredIntegration[]>;
  create(author: Author, integration: StoredIntegration, change: ChangeDraft): Promise<void>;
  update(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => Written<StoredIntegration>): Promise<StoredIntegration>;
  remove(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => ChangeDraft): Promise<void>;
}

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

export class SqliteIntegrationStore implements IntegrationStore {
  private readonly events: SqliteChangeEventStore;

  constructor(private readonly log: SqliteChangeLog) {
    this.events = new SqliteChangeEventStore(log.sqlite);
  }

  private select() {
    return this.log.store.db.select(COLUMNS).from(integrations).innerJoin(projects, eq(projects.id, integrations.projectId));
  }

  private findNow(integrationId: string): StoredIntegration | undefined {
    return this.select().where(eq(integrations.id, integrationId)).get();
  }

  async find(integrationId: string): Promise<StoredIntegration | undefined> {
    return this.findNow(integrationId);
  }

  async list(projectId: string): Promise<StoredIntegration[]> {
    return this.select().where(eq(integrations.projectId, projectId)).orderBy(asc(integrations.createdAt), asc(integrations.seq)).all();
  }

  async create(author: Author, integration: StoredIntegration, change: ChangeDraft): Promise<void> {
    const { projectSlug: _, ...row } = integration;
    await this.log.commit(author, async () => {
      this.log.store.db.insert(integrations).values({ ...row, eventPosition: await this.events.latest(), seq: nextSeq(integrations) }).run();
      return { result: undefined, changes: [change] };
    });
  }

  update(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => Written<StoredIntegration>): Promise<StoredIntegration> {
    return this.log.commit(author, async () => {
      const current = this.findNow(integrationId);
      const written = decide(current);
      if (written.changes.length > 0 && current) {
        // lastError as decided (a new config clears it), read in this same transaction.
        const { config, enabled, lastError, updatedAt } = written.result;
        const enabledAgain = enabled && !current.enabled;
        this.log.store.db
          .update(integrations)
          .set({ config, enabled, lastError, updatedAt, ...(enabledAgain ? { eventPosition: await this.events.latest() } : {}) })
          .where(eq(integrations.id, integrationId))
          .run();
      }
      return written;
    });
  }

  remove(author: Author, integrationId: string, decide: (current: StoredIntegration | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const change = decide(this.findNow(integrationId));
      this.log.store.db.delete(integrations).where(eq(integrations.id, integrationId)).run();
      return { result: undefined, changes: [change] };
    });
  }
}

/** An enabled integration as the sending side reads it: its config as stored (JSON text). */
export interface EnabledIntegration {
  id: string;
  projectId: string;
  type: string;
  config: string;
  /** Its position in the change-event queue. */
  position: number;
}

/** What a runner of the sender counted since it last stored its stats. */
export interface StatsDelta {
  sent: number;
  failed: number;
  lastError: string | null;
  lastSentAt: string | null;
}

const ENABLED_SQL = "SELECT id, project_id AS projectId, type, config, event_position AS position FROM integrations WHERE enabled = 1 ORDER BY seq";
/** The counters, and the position they report what was sent up to: one statement, so a crash never keeps one without the other. */
const STATS_SQL = `UPDATE integrations SET event_position = max(event_position, ?1), sent = sent + ?2, failed = failed + ?3,
  last_error = coalesce(?4, last_error), last_sent_at = coalesce(?5, last_sent_at) WHERE id = ?6`;

/** The sending side's reads and runtime writes (no change-log entry: stats and positions are runtime state). */
export interface IntegrationRuntimeStore {
  /** The enabled integrations, oldest first. */
  enabled(): Promise<EnabledIntegration[]>;
  /** The project's change events after `position`, oldest first (the change-event queue). */
  eventsAfter(projectId: string, position: number, limit: number): Promise<QueuedEvent[]>;
  /**
   * Adds `delta` to the integration's stats (a null `lastError` or `lastSentAt` keeps the stored
   * one) and, in the same write, moves its change-queue position forward (never back) to
   * `position` (0, the default, leaves it): after a crash `sent` is never below what the vendor
   * took of the events before the stored position.
   */
  addStats(integrationId: string, delta: StatsDelta, position?: number): Promise<void>;
  /** The integration's stored change-queue position (0 for one that is gone). */
  positionOf(integrationId: string): Promise<number>;
}

export class SqliteIntegrationRuntimeStore implements IntegrationRuntimeStore {
  private readonly enabledQuery;
  private readonly statsQuery;
  private readonly positionQuery;
  private readonly events: SqliteChangeEventStore;

  constructor(sqlite: Database) {
    this.enabledQuery = sqlite.query<EnabledIntegration, []>(ENABLED_SQL);
    this.statsQuery = sqlite.query<unknown, [number, number, number, string | null, string | null, string]>(STATS_SQL);
    this.positionQuery = sqlite.query<{ p: number }, [string]>("SELECT event_position AS p FROM integrations WHERE id = ?");
    this.events = new SqliteChangeEventStore(sqlite);
  }

  async enabled(): Promise<EnabledIntegration[]> {
    return this.enabledQuery.all();
  }

  eventsAfter(projectId: string, position: number, limit: number): Promise<QueuedEvent[]> {
    return this.events.after(projectId, position, limit);
  }

  async addStats(integrationId: string, delta: StatsDelta, position = 0): Promise<void> {
    this.statsQuery.run(position, delta.sent, delta.failed, delta.lastError, delta.lastSentAt, integrationId);
  }

  async positionOf(integrationId: string): Promise<number> {
    return this.positionQuery.get(integrationId)?.p ?? 0;
  }
}
