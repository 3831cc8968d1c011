/**
 * All SQL of project API keys, behind `ApiKeyStore` (asynchronous at its boundary, synchronous
 * SQLite inside). Writes go through the change log with their entries; the credential registry
 * learns of them from the entries.
 */
import { asc, eq } from "drizzle-orm";
import { nextSeq } from "../../db/client";
import type { Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type SqliteChangeLog, type Written } from "../../changes/sqlite";
import type { Tx } from "../../changes/log";
import { apiKeys, environments, projects } from "../../db/schema";
import type { Scope } from "../../http/access";

export interface ApiKeyRecord {
  id: string;
  name: string;
  scope: Scope;
  /** The slug of the environment it is bound to. */
  environment: string;
  projectId: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** A stored key: the record, its project's slug and what the credential registry matches. */
export interface StoredApiKey extends ApiKeyRecord {
  projectSlug: string;
  keyHash: string;
  /** The secret replaced by the last rotation, valid until `previousExpiresAt` (grace period). */
  previousHash: string | null;
  previousExpiresAt: string | null;
}

/** A new key's row. */
export interface NewApiKeyRow {
  id: string;
  projectId: string;
  environmentId: string;
  name: string;
  scope: Scope;
  keyHash: string;
  keyPrefix: string;
  createdAt: string;
}

/** What a rotation stores. */
export type Secrets = Pick<StoredApiKey, "keyHash" | "keyPrefix" | "previousHash" | "previousExpiresAt">;

export interface ApiKeyStore {
  /** A project's keys, oldest first, then in the order they were added. */
  list(projectId: string): Promise<ApiKeyRecord[]>;
  find(id: string): Promise<StoredApiKey | undefined>;
  /** Inside a commit: the row alone; that commit appends the entry (or none: a test's fixture). */
  insert(tx: Tx, row: NewApiKeyRow): Promise<void>;
  create(author: Author, row: NewApiKeyRow, change: ChangeDraft): Promise<void>;
  /** `decide` refuses (throws) or gives the new secrets; read and written in one transaction. */
  rotate(author: Author, id: string, decide: (current: StoredApiKey | undefined) => Written<Secrets>): Promise<StoredApiKey>;
  remove(author: Author, id: string, decide: (current: StoredApiKey | undefined) => ChangeDraft): Promise<void>;
}

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

export class SqliteApiKeyStore implements ApiKeyStore {
  constructor(private readonly log: SqliteChangeLog) {}

  async list(projectId: string): Promise<ApiKeyRecord[]> {
    return this.log.store.db
      .select(COLUMNS)
      .from(apiKeys)
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .where(eq(apiKeys.projectId, projectId))
      .orderBy(asc(apiKeys.createdAt), asc(apiKeys.seq))
      .all();
  }

  async find(id: string): Promise<StoredApiKey | undefined> {
    return this.findNow(id);
  }

  private findNow(id: string): StoredApiKey | undefined {
    return this.log.store.db
      .select({ ...COLUMNS, projectSlug: projects.slug, keyHash: apiKeys.keyHash, previousHash: apiKeys.previousHash, previousExpiresAt: apiKeys.previousExpiresAt })
      .from(apiKeys)
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .where(eq(apiKeys.id, id))
      .get();
  }

  async insert(tx: Tx, row: NewApiKeyRow): Promise<void> {
    sqliteTx(tx).db.insert(apiKeys).values({ ...row, seq: nextSeq(apiKeys) }).run();
  }

  async create(author: Author, row: NewApiKeyRow, change: ChangeDraft): Promise<void> {
    await this.log.commit(author, async (tx) => {
      await this.insert(tx, row);
      return { result: undefined, changes: [change] };
    });
  }

  rotate(author: Author, id: string, decide: (current: StoredApiKey | undefined) => Written<Secrets>): Promise<StoredApiKey> {
    return this.log.commit(author, async () => {
      const current = this.findNow(id);
      const { result, changes } = decide(current);
      this.log.store.db.update(apiKeys).set(result).where(eq(apiKeys.id, id)).run();
      return { result: { ...current!, ...result }, changes };
    });
  }

  remove(author: Author, id: string, decide: (current: StoredApiKey | undefined) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const change = decide(this.findNow(id));
      this.log.store.db.delete(apiKeys).where(eq(apiKeys.id, id)).run();
      return { result: undefined, changes: [change] };
    });
  }
}
