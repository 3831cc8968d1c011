/**
 * All SQL of the credential registry (src/http/credentials.ts): what it resolves from (keys,
 * users, unexpired revocations), logouts, last-use times, the generated JWT secret, and whether
 * another process changed credentials. The registry resolves in memory; nothing here runs per
 * request.
 */
import { eq, gt, lt } from "drizzle-orm";
import { transaction, type Store } from "../../db/client";
import { adminKeys, apiKeys, environments, projects, revokedTokens, settings, users } from "../../db/schema";
import { iso } from "../../lib/clock";
import type { Role, Scope } from "../../http/access";

/** An API key with its project's and environment's slugs; `previous*`: a rotated-out secret in its grace period. */
export interface ApiKeyRow {
  id: string;
  name: string;
  scope: Scope;
  keyHash: string;
  previousHash: string | null;
  previousExpiresAt: string | null;
  projectId: string;
  projectSlug: string;
  environmentId: string;
  environmentSlug: string;
}

/** Everything the registry resolves from, and the change log's position it was read at. */
export interface Credentials {
  apiKeys: ApiKeyRow[];
  adminKeys: { id: string; name: string; keyHash: string }[];
  users: { id: string; email: string; role: Role; tokensValidAfter: string | null }[];
  /** Revoked login tokens not expired at the load's `now`. */
  revoked: { jti: string; expiresAt: string }[];
  /** The change log's last position when this was read (0: empty). */
  position: number;
}

/** A key's last use (ms) to write. */
export interface KeyUse {
  kind: "apiKey" | "adminKey";
  id: string;
  at: number;
}

export interface CredentialStore {
  /** Every credential (revocations unexpired at `now`, ms). */
  load(now: number): Promise<Credentials>;
  /** Revokes a login token until it would have expired (ms); revoking it twice is no error. */
  revoke(jti: string, expiresAt: number): Promise<void>;
  /** Writes keys' last-use times and drops revocations expired at `now` (ms), in one transaction. */
  recordUse(uses: readonly KeyUse[], now: number): Promise<void>;
  /** The stored JWT secret, or `generate()`'s value stored first (the first writer wins). */
  jwtSecret(generate: () => string, now: number): Promise<string>;
  /**
   * Whether another process (the `flagsvc admin` CLI) appended a credential entry to the change
   * log after `sincePosition`, and the log's last position now. Cheap when nothing was written.
   */
  externalCredentialChange(sincePosition: number): Promise<{ changed: boolean; position: number }>;
}

const JWT_SECRET_SETTING = "jwt_secret";

/** Any entry after position ?1 of a key, a user, or a deleted project or environment (what keys belong to). */
const CREDENTIAL_ENTRY_SQL = `SELECT 1 FROM change_log WHERE position > ?1 AND (resource_type IN ('api_key', 'admin_key', 'user')
  OR (resource_type IN ('project', 'environment') AND action = 'deleted')) LIMIT 1`;
const LAST_POSITION_SQL = "SELECT coalesce(max(position), 0) AS p FROM change_log";

/**
 * On SQLite, another process's write is noticed by `PRAGMA data_version` (it moves when another
 * connection commits), then the change log: the background worker's own connection commits every
 * second under webhook traffic, and those commits must not reload anything.
 */
export class SqliteCredentialStore implements CredentialStore {
  /** `data_version` as of the last load or look; -1: none yet. */
  private dataVersion = -1;

  constructor(private readonly store: Store) {}

  async load(now: number): Promise<Credentials> {
    const { db } = this.store;
    // Read first: a write committed while the rows are read is seen again by the next look.
    this.dataVersion = this.readDataVersion();
    const position = this.lastPosition();
    const apiKeyRows = db
      .select({
        id: apiKeys.id,
        name: apiKeys.name,
        scope: apiKeys.scope,
        keyHash: apiKeys.keyHash,
        previousHash: apiKeys.previousHash,
        previousExpiresAt: apiKeys.previousExpiresAt,
        projectId: apiKeys.projectId,
        projectSlug: projects.slug,
        environmentId: apiKeys.environmentId,
        environmentSlug: environments.slug,
      })
      .from(apiKeys)
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .all();
    return {
      apiKeys: apiKeyRows,
      adminKeys: db.select({ id: adminKeys.id, name: adminKeys.name, keyHash: adminKeys.keyHash }).from(adminKeys).all(),
      users: db.select({ id: users.id, email: users.email, role: users.role, tokensValidAfter: users.tokensValidAfter }).from(users).all(),
      revoked: db.select({ jti: revokedTokens.jti, expiresAt: revokedTokens.expiresAt }).from(revokedTokens).where(gt(revokedTokens.expiresAt, iso(now))).all(),
      position,
    };
  }

  async revoke(jti: string, expiresAt: number): Promise<void> {
    this.store.db.insert(revokedTokens).values({ jti, expiresAt: iso(expiresAt) }).onConflictDoNothing().run();
  }

  async recordUse(uses: readonly KeyUse[], now: number): Promise<void> {
    const { db } = this.store;
    transaction(this.store, () => {
      for (const { kind, id, at } of uses) {
        const table = kind === "apiKey" ? apiKeys : adminKeys;
        db.update(table).set({ lastUsedAt: iso(at) }).where(eq(table.id, id)).run();
      }
      db.delete(revokedTokens).where(lt(revokedTokens.expiresAt, iso(now))).run();
    });
  }

  async jwtSecret(generate: () => string, now: number): Promise<string> {
    const { db } = this.store;
    const stored = () => db.select().from(settings).where(eq(settings.key, JWT_SECRET_SETTING)).get()?.value;
    const existing = stored();
    if (existing !== undefined) return existing;
    db.insert(settings).values({ key: JWT_SECRET_SETTING, value: generate(), updatedAt: iso(now) }).onConflictDoNothing().run();
    return stored()!;
  }

  async externalCredentialChange(sincePosition: number): Promise<{ changed: boolean; position: number }> {
    const version = this.readDataVersion();
    if (version === this.dataVersion) return { changed: false, position: sincePosition };
    this.dataVersion = version;
    const position = this.lastPosition();
    return { changed: this.store.sqlite.query(CREDENTIAL_ENTRY_SQL).get(sincePosition) != null, position };
  }

  private readDataVersion(): number {
    return this.store.sqlite.query<{ data_version: number }, []>("PRAGMA data_version").get()!.data_version;
  }

  private lastPosition(): number {
    return this.store.sqlite.query<{ p: number }, []>(LAST_POSITION_SQL).get()!.p;
  }
}
