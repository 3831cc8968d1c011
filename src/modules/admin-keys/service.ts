/**
 * Admin keys `svc_admin_...`: the rules, shared by the routes, the first-start bootstrap and
 * `flagsvc admin create-key` (another process, with its own store on the same database).
 * Only the SHA-256 of a key is stored, and never enters a change-log entry; the secret is
 * returned once, by `create`.
 */
import { Value } from "@sinclair/typebox/value";
import { whole, type Author, type ChangeDraft } from "../../changes/entry";
import { conflict, notFound, validationDetails, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { adminKeyParts, generateSecret } from "../../lib/secrets";
import { NewAdminKey } from "./model";
import type { AdminKeyRecord, AdminKeyStore, StoredAdminKey } from "./store";

export type { AdminKeyRecord } from "./store";

const LAST_KEY = "Cannot delete the last admin key while no admin user exists: create an admin user first, or create another key";

/** Throws the 400 that `create` would for this input. */
export function validateNewAdminKey(input: unknown): { name: string } {
  if (!Value.Check(NewAdminKey, input)) {
    throw validationError("Invalid admin key", validationDetails("body", [...Value.Errors(NewAdminKey, input)] as never));
  }
  return input as { name: string };
}

/**
 * A new key named `name` (validated: 1 to 100 characters) and its secret. `secret` stores a
 * given key (SVC_ADMIN_KEY at first start) instead of generating one.
 */
export function newAdminKey(clock: Clock, input: unknown, secret?: string): { key: StoredAdminKey; secret: string } {
  const { name } = validateNewAdminKey(input);
  const material = secret !== undefined ? { secret, ...adminKeyParts(secret) } : generateSecret("svc_admin_");
  return { key: { id: newId("key"), name, keyHash: material.hash, keyPrefix: material.keyPrefix, createdAt: iso(clock.now()), lastUsedAt: null }, secret: material.secret };
}

/** The entry of a key's creation or deletion: the whole record, its hash masked. */
export function adminKeyChange(key: StoredAdminKey, action: "created" | "deleted"): ChangeDraft {
  return { project: null, environment: null, resource: { type: "admin_key", id: key.id, key: key.name }, action, changes: whole({ ...key }, action, ["keyHash"]) };
}

export interface AdminKeyServiceDeps {
  adminKeys: AdminKeyStore;
  clock: Clock;
  /** This process's fresher last use of a key (ms), if any (the credential registry). */
  lastUsed?: (id: string) => number | undefined;
}

export type AdminKeyService = ReturnType<typeof adminKeyService>;

export function adminKeyService({ adminKeys, clock, lastUsed = () => undefined }: AdminKeyServiceDeps) {
  return {
    /** Every admin key, oldest first. */
    async list(): Promise<AdminKeyRecord[]> {
      return (await adminKeys.list()).map((k) => {
        const memory = lastUsed(k.id);
        return { ...k, lastUsedAt: memory !== undefined ? iso(memory) : k.lastUsedAt };
      });
    },

    /** The record and its secret `key`, shown this once. */
    async create(author: Author, input: unknown, secret?: string): Promise<AdminKeyRecord & { lastUsedAt: null; key: string }> {
      const made = newAdminKey(clock, input, secret);
      if (!(await adminKeys.create(author, made.key, adminKeyChange(made.key, "created")))) throw conflict("This admin key already exists");
      const { keyHash: _h, ...record } = made.key;
      return { ...record, lastUsedAt: null, key: made.secret };
    },

    /** 404 unknown; 409 the last key when no admin user exists (nobody could administer). */
    delete(author: Author, id: string): Promise<void> {
      return adminKeys.remove(author, id, (key, remaining) => {
        if (!key) throw notFound("Admin key");
        if (remaining.keys <= 1 && remaining.adminUsers === 0) throw conflict(LAST_KEY);
        return adminKeyChange(key, "deleted");
      });
    },
  };
}
