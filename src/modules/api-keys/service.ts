/**
 * Project API keys (decisions §4). A key is `svc_sk_{scope}_` + 32 base62 characters; only its
 * SHA-256 is stored, and the secret appears in the create and rotate responses only. Every
 * write reloads the in-memory credential registry before it answers, so a new key works and a
 * deleted one is refused from the next request on.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import type { AppContext } from "../../context";
import { transaction } from "../../db/client";
import { credentialsChanged } from "../../http/credentials";
import { apiKeys, environments, projects } from "../../db/schema";
import { MESSAGES, type Principal, type Scope } from "../../http/access";
import { forbidden, notFound, validationError } from "../../http/errors";
import { iso } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { generateSecret } from "../../lib/secrets";
import { requireProjectNow } from "../projects/service";

export interface ApiKeyRecord {
  id: string;
  name: string;
  scope: Scope;
  environment: string;
  projectId: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

export const MGMT_CANNOT_FULL = "A mgmt key cannot create or manage full keys; use a full key, an admin key or a login token";

/** Whether the caller may hold power over a key of this scope (only mgmt keys are limited). */
function mayManage(principal: Principal, scope: Scope): boolean {
  return !(principal.kind === "apiKey" && principal.scope === "mgmt" && scope === "full");
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

/** The later of the stored last use and the one counted in memory since the last flush. */
function withLastUse(ctx: AppContext, row: ApiKeyRecord): ApiKeyRecord {
  const inMemory = ctx.credentials.lastUsedAt(row.id);
  if (inMemory === undefined) return row;
  const memo = iso(inMemory);
  return { ...row, lastUsedAt: row.lastUsedAt === null || memo > row.lastUsedAt ? memo : row.lastUsedAt };
}

function selectKeys(ctx: AppContext) {
  return ctx.db.select(COLUMNS).from(apiKeys).innerJoin(environments, eq(environments.id, apiKeys.environmentId));
}

/** GET /v1/projects/{slug}/api-keys: oldest first, never with the secret. */
export function listApiKeys(ctx: AppContext, slug: string): ApiKeyRecord[] {
  const project = requireProjectNow(ctx, slug);
  return selectKeys(ctx)
    .where(eq(apiKeys.projectId, project.id))
    .orderBy(asc(apiKeys.createdAt), sql`${apiKeys}.rowid`)
    .all()
    .map((r) => withLastUse(ctx, r));
}

/** POST /v1/projects/{slug}/api-keys. The guard has already matched an API key's project to `slug`. */
export function createApiKey(
  ctx: AppContext,
  principal: Principal,
  slug: string,
  input: { name: string; scope: Scope; environment: string },
): ApiKeyRecord & { key: string } {
  const project = requireProjectNow(ctx, slug);
  if (!mayManage(principal, input.scope)) throw forbidden(MGMT_CANNOT_FULL);
  const env = project.environments.find((e) => e.slug === input.environment);
  if (!env) {
    throw validationError("Unknown environment", [
      { path: "body.environment", message: `Project ${slug} has no environment ${input.environment}` },
    ]);
  }
  const { secret, hash, keyPrefix } = generateSecret(`svc_sk_${input.scope}_`);
  const row = {
    id: newId("key"),
    projectId: project.id,
    environmentId: env.id,
    name: input.name,
    scope: input.scope,
    keyHash: hash,
    keyPrefix,
    createdAt: iso(ctx.clock.now()),
  };
  ctx.db.insert(apiKeys).values(row).run();
  credentialsChanged(ctx);
  return {
    id: row.id,
    name: row.name,
    scope: row.scope,
    environment: env.slug,
    projectId: project.id,
    key: secret,
    keyPrefix,
    createdAt: row.createdAt,
    lastUsedAt: null,
  };
}

/**
 * The key behind `/v1/api-keys/{keyId}`, when the caller may act on it: unknown 404; an API
 * key's caller only in its own project, and a mgmt key not on a full key (403).
 */
function requireManageable(ctx: AppContext, principal: Principal, keyId: string) {
  const row = ctx.db
    .select({ ...COLUMNS, keyHash: apiKeys.keyHash, projectSlug: projects.slug })
    .from(apiKeys)
    .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(eq(apiKeys.id, keyId))
    .get();
  if (!row) throw notFound(`API key ${keyId}`);
  if (principal.kind === "apiKey" && principal.projectId !== row.projectId) throw forbidden(MESSAGES.otherProject);
  if (!mayManage(principal, row.scope)) throw forbidden(MGMT_CANNOT_FULL);
  return row;
}

/**
 * POST /v1/api-keys/{keyId}/rotate: a new secret at once. With a grace period the previous
 * secret keeps working until then; a second rotation replaces any earlier grace (only the
 * secret just replaced stays valid).
 */
export function rotateApiKey(ctx: AppContext, principal: Principal, keyId: string, graceSeconds: number): ApiKeyRecord & { key: string } {
  return transaction(ctx, () => {
    const row = requireManageable(ctx, principal, keyId);
    const { secret, hash, keyPrefix } = generateSecret(`svc_sk_${row.scope}_`);
    const now = ctx.clock.now();
    ctx.db
      .update(apiKeys)
      .set({
        keyHash: hash,
        keyPrefix,
        previousHash: graceSeconds > 0 ? row.keyHash : null,
        previousExpiresAt: graceSeconds > 0 ? iso(now + graceSeconds * 1000) : null,
      })
      .where(eq(apiKeys.id, keyId))
      .run();
    credentialsChanged(ctx);
    const { keyHash: _h, projectSlug: _p, ...rest } = row;
    return { ...withLastUse(ctx, rest), keyPrefix, key: secret };
  });
}

/** DELETE /v1/api-keys/{keyId}: refused (401) from the next request on. */
export function deleteApiKey(ctx: AppContext, principal: Principal, keyId: string): void {
  transaction(ctx, () => {
    requireManageable(ctx, principal, keyId);
    ctx.db.delete(apiKeys).where(and(eq(apiKeys.id, keyId))).run();
  });
  credentialsChanged(ctx);
}
