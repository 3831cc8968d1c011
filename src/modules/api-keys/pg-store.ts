/** `ApiKeyStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { asc, eq } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx, Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { apiKeys, environments, projects } from "../../db/pg/schema";
import type { ApiKeyRecord, ApiKeyStore, NewApiKeyRow, Secrets, StoredApiKey } from "./store";

const COLUMNS = {
  id: apiKeys.id,
  name: apiKeys.name,
  scope: apiKeys.scope,
  environment: environments.slug,
  projectId: apiKeys.projectId,
  keyPrefix: apiKeys.keyPrefix,
  createdAt: apiKeys.createdAt,
  lastUsedAt: apiKeys.lastUsedAt,
};

export class PgApiKeyStore implements ApiKeyStore {
  constructor(private readonly log: PgChangeLog) {}

  list(projectId: string): Promise<ApiKeyRecord[]> {
    return this.log.db
      .select(COLUMNS)
      .from(apiKeys)
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .where(eq(apiKeys.projectId, projectId))
      .orderBy(asc(apiKeys.createdAt), asc(apiKeys.seq));
  }

  find(id: string): Promise<StoredApiKey | undefined> {
    return this.findOn(this.log.db, id);
  }

  private async findOn(db: PgQueries, id: string): Promise<StoredApiKey | undefined> {
    const [row] = await db
      .select({ ...COLUMNS, projectSlug: projects.slug, keyHash: apiKeys.keyHash, previousHash: apiKeys.previousHash, previousExpiresAt: apiKeys.previousExpiresAt })
      .from(apiKeys)
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .where(eq(apiKeys.id, id));
    return row;
  }

  async insert(tx: Tx, row: NewApiKeyRow): Promise<void> {
    await pgTx(tx).insert(apiKeys).values(row);
  }

  async create(author: Author, row: NewApiKeyRow, change: ChangeDraft): Promise<void> {
    await this.log.commit(author, async (tx) => {
      await this.insert(tx, row);
      return { result: undefined, changes: [change] };
    });
  }

  rotate(author: Author, id: string, decide: (current: StoredApiKey | undefined) => Written<Secrets>): Promise<StoredApiKey> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const current = await this.findOn(db, id);
      const { result, changes } = decide(current);
      await db.update(apiKeys).set(result).where(eq(apiKeys.id, id));
      return { result: { ...current!, ...result }, changes };
    });
  }

  remove(author: Author, id: string, decide: (current: StoredApiKey | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const change = decide(await this.findOn(db, id));
      await db.delete(apiKeys).where(eq(apiKeys.id, id));
      return { result: undefined, changes: [change] };
    });
  }
}
