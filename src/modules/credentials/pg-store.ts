/**
 * `CredentialStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * No `data_version` here: another process's (or node's) credential write is noticed by the
 * change log's last position moving past the one last seen, then an entry of a credential
 * among the new ones (one indexed max() when nothing was written).
 */
import { eq, gt, lt, sql } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { adminKeys, apiKeys, environments, projects, revokedTokens, settings, users } from "../../db/pg/schema";
import { iso } from "../../lib/clock";
import { rowsOf } from "../../db/pg/client";
import type { Credentials, CredentialStore, KeyUse } from "./store";

const JWT_SECRET_SETTING = "jwt_secret";

export class PgCredentialStore implements CredentialStore {
  constructor(private readonly db: PgQueries) {}

  async load(now: number): Promise<Credentials> {
    const { db } = this;
    // The position first: a write committed while the rows are read is seen again by the next look.
    const position = await this.lastPosition();
    const [apiKeyRows, adminKeyRows, userRows, revoked] = await Promise.all([
      db
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
        .innerJoin(environments, eq(environments.id, apiKeys.environmentId)),
      db.select({ id: adminKeys.id, name: adminKeys.name, keyHash: adminKeys.keyHash }).from(adminKeys),
      db.select({ id: users.id, email: users.email, role: users.role, tokensValidAfter: users.tokensValidAfter }).from(users),
      db.select({ jti: revokedTokens.jti, expiresAt: revokedTokens.expiresAt }).from(revokedTokens).where(gt(revokedTokens.expiresAt, iso(now))),
    ]);
    return { apiKeys: apiKeyRows, adminKeys: adminKeyRows, users: userRows, revoked, position };
  }

  async revoke(jti: string, expiresAt: number): Promise<void> {
    await this.db.insert(revokedTokens).values({ jti, expiresAt: iso(expiresAt) }).onConflictDoNothing();
  }

  async recordUse(uses: readonly KeyUse[], now: number): Promise<void> {
    await this.db.transaction(async (db) => {
      for (const { kind, id, at } of uses) {
        const table = kind === "apiKey" ? apiKeys : adminKeys;
        await db.update(table).set({ lastUsedAt: iso(at) }).where(eq(table.id, id));
      }
      await db.delete(revokedTokens).where(lt(revokedTokens.expiresAt, iso(now)));
    });
  }

  async jwtSecret(generate: () => string, now: number): Promise<string> {
    const stored = async () => (await this.db.select().from(settings).where(eq(settings.key, JWT_SECRET_SETTING)))[0]?.value;
    const existing = await stored();
    if (existing !== undefined) return existing;
    await this.db.insert(settings).values({ key: JWT_SECRET_SETTING, value: generate(), updatedAt: iso(now) }).onConflictDoNothing();
    return (await stored())!;
  }

  async externalCredentialChange(sincePosition: number): Promise<{ changed: boolean; position: number }> {
    const position = await this.lastPosition();
    if (position <= sincePosition) return { changed: false, position: sincePosition };
    const rows = await rowsOf(
      this.db,
      sql`SELECT 1 FROM change_log WHERE position > ${sincePosition} AND (resource_type IN ('api_key', 'admin_key', 'user')
        OR (resource_type IN ('project', 'environment') AND action = 'deleted')) LIMIT 1`,
    );
    return { changed: rows.length > 0, position };
  }

  private async lastPosition(): Promise<number> {
    const [row] = await rowsOf<{ p: number }>(this.db, sql`SELECT coalesce(max(position), 0)::float8 AS p FROM change_log`);
    return row!.p;
  }
}
