/**
 * Project API keys (decisions §4). A key is `svc_sk_{scope}_` + 32 base62 characters; only its
 * SHA-256 is stored, never in a change-log entry, and the secret appears in the create and
 * rotate responses only. The credential registry learns of every write from its entry before
 * the response goes out, so a new key works and a deleted one is refused from the next request on.
 */
import { diff, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { MESSAGES, type Principal, type Scope } from "../../http/access";
import { forbidden, notFound, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { generateSecret } from "../../lib/secrets";
import { requireProject } from "../projects/service";
import type { ProjectReader } from "../projects/store";
import type { ApiKeyRecord, ApiKeyStore, StoredApiKey } from "./store";

export type { ApiKeyRecord } from "./store";

export const MGMT_CANNOT_FULL = "A mgmt key cannot create or manage full keys; use a full key, an admin key or a login token";

/** Whether the caller may hold power over a key of this scope (only mgmt keys are limited). */
function mayManage(principal: Principal, scope: Scope): boolean {
  return !(principal.kind === "apiKey" && principal.scope === "mgmt" && scope === "full");
}

/**
 * The key behind `/v1/api-keys/{keyId}`, when the caller may act on it: unknown 404; an API
 * key's caller only in its own project, and a mgmt key not on a full key (403).
 */
function manageable(principal: Principal, keyId: string, key: StoredApiKey | undefined): StoredApiKey {
  if (!key) throw notFound(`API key ${keyId}`);
  if (principal.kind === "apiKey" && principal.projectId !== key.projectId) throw forbidden(MESSAGES.otherProject);
  if (!mayManage(principal, key.scope)) throw forbidden(MGMT_CANNOT_FULL);
  return key;
}

const record = ({ id, name, scope, environment, projectId, keyPrefix, createdAt, lastUsedAt }: ApiKeyRecord): ApiKeyRecord => ({
  id,
  name,
  scope,
  environment,
  projectId,
  keyPrefix,
  createdAt,
  lastUsedAt,
});

/** A key's entry: resource key its name; its hash masked wherever it appears. */
function keyChange(key: ApiKeyRecord, projectSlug: string, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft {
  return { project: { id: key.projectId, slug: projectSlug }, environment: key.environment, resource: { type: "api_key", id: key.id, key: key.name }, action, changes };
}

export interface ApiKeyServiceDeps {
  apiKeys: ApiKeyStore;
  projects: ProjectReader;
  clock: Clock;
  /** This process's fresher last use of a key (ms), if any (the credential registry). */
  lastUsed?: (id: string) => number | undefined;
}

export type ApiKeyService = ReturnType<typeof apiKeyService>;

export function apiKeyService({ apiKeys, projects, clock, lastUsed = () => undefined }: ApiKeyServiceDeps) {
  /** The later of the stored last use and the one counted in memory since the last flush. */
  function withLastUse(key: ApiKeyRecord): ApiKeyRecord {
    const inMemory = lastUsed(key.id);
    const row = record(key);
    if (inMemory === undefined) return row;
    const memo = iso(inMemory);
    return { ...row, lastUsedAt: row.lastUsedAt === null || memo > row.lastUsedAt ? memo : row.lastUsedAt };
  }

  return {
    /** GET /v1/projects/{slug}/api-keys: oldest first, never with the secret. */
    async list(slug: string): Promise<ApiKeyRecord[]> {
      const project = await requireProject(projects, slug);
      return (await apiKeys.list(project.id)).map(withLastUse);
    },

    /** POST /v1/projects/{slug}/api-keys. The guard has already matched an API key's project to `slug`. */
    async create(author: Author, principal: Principal, slug: string, input: { name: string; scope: Scope; environment: string }): Promise<ApiKeyRecord & { key: string }> {
      const project = await requireProject(projects, slug);
      if (!mayManage(principal, input.scope)) throw forbidden(MGMT_CANNOT_FULL);
      const env = project.environments.find((e) => e.slug === input.environment);
      if (!env) {
        throw validationError("Unknown environment", [{ path: "body.environment", message: `Project ${slug} has no environment ${input.environment}` }]);
      }
      const { secret, hash, keyPrefix } = generateSecret(`svc_sk_${input.scope}_`);
      const row = { id: newId("key"), projectId: project.id, environmentId: env.id, name: input.name, scope: input.scope, keyHash: hash, keyPrefix, createdAt: iso(clock.now()) };
      const created: ApiKeyRecord = { id: row.id, name: row.name, scope: row.scope, environment: env.slug, projectId: project.id, keyPrefix, createdAt: row.createdAt, lastUsedAt: null };
      await apiKeys.create(author, row, keyChange(created, slug, "created", whole({ ...created, keyHash: hash }, "created", ["keyHash"])));
      return { ...created, key: secret };
    },

    /**
     * POST /v1/api-keys/{keyId}/rotate: a new secret at once. With a grace period the previous
     * secret keeps working until then; a second rotation replaces any earlier grace (only the
     * secret just replaced stays valid).
     */
    async rotate(author: Author, principal: Principal, keyId: string, graceSeconds: number): Promise<ApiKeyRecord & { key: string }> {
      let secret = "";
      const rotated = await apiKeys.rotate(author, keyId, (found) => {
        const key = manageable(principal, keyId, found);
        const made = generateSecret(`svc_sk_${key.scope}_`);
        secret = made.secret;
        const next = {
          keyHash: made.hash,
          keyPrefix: made.keyPrefix,
          previousHash: graceSeconds > 0 ? key.keyHash : null,
          previousExpiresAt: graceSeconds > 0 ? iso(clock.now() + graceSeconds * 1000) : null,
        };
        const before = { keyHash: key.keyHash, keyPrefix: key.keyPrefix, previousExpiresAt: key.previousExpiresAt };
        const after = { keyHash: next.keyHash, keyPrefix: next.keyPrefix, previousExpiresAt: next.previousExpiresAt };
        return { result: next, changes: [keyChange(key, key.projectSlug, "rotated", diff(before, after, { secrets: ["keyHash"] }))] };
      });
      return { ...withLastUse(rotated), key: secret };
    },

    /** DELETE /v1/api-keys/{keyId}: refused (401) from the next request on. */
    delete(author: Author, principal: Principal, keyId: string): Promise<void> {
      return apiKeys.remove(author, keyId, (found) => {
        const key = manageable(principal, keyId, found);
        return keyChange(key, key.projectSlug, "deleted", whole({ ...record(key), keyHash: key.keyHash }, "deleted", ["keyHash"]));
      });
    },
  };
}
