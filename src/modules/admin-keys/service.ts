/**
 * Admin keys `svc_admin_...`: storage operations, shared by the routes, the first-start
 * bootstrap and `flagsvc admin create-key` (another process: a plain Store, no app context).
 * Only the SHA-256 of a key is stored; the secret is returned once, by `createAdminKey`.
 */
import { Value } from "@sinclair/typebox/value";
import { asc, count, eq, sql } from "drizzle-orm";
import { isUniqueViolation, transaction, type Store } from "../../db/client";
import { credentialsChanged, type CredentialStore } from "../../http/credentials";
import { adminKeys } from "../../db/schema";
import { conflict, notFound, validationDetails, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { adminKeyParts, generateSecret } from "../../lib/secrets";
import { hasAdminUser } from "../users/service";
import { NewAdminKey } from "./model";

export interface AdminKeyRecord {
  id: string;
  name: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

const LAST_KEY = "Cannot delete the last admin key while no admin user exists: create an admin user first, or create another key";

/** Every admin key, oldest first. `lastUsed` gives this process's fresher last-use time (ms). */
export function listAdminKeys({ db }: Store, lastUsed: (id: string) => number | undefined = () => undefined): AdminKeyRecord[] {
  return db
    .select({ id: adminKeys.id, name: adminKeys.name, keyPrefix: adminKeys.keyPrefix, createdAt: adminKeys.createdAt, lastUsedAt: adminKeys.lastUsedAt })
    .from(adminKeys)
    .orderBy(asc(adminKeys.createdAt), sql`rowid`) // then in the order they were added
    .all()
    .map((k) => {
      const memory = lastUsed(k.id);
      return { ...k, lastUsedAt: memory !== undefined ? iso(memory) : k.lastUsedAt };
    });
}

export function countAdminKeys({ db }: Store): number {
  return db.select({ n: count() }).from(adminKeys).get()!.n;
}

/** Throws the 400 that `createAdminKey` would for this input. */
export function validateNewAdminKey(input: unknown): { name: string } {
  if (!Value.Check(NewAdminKey, input)) {
    throw validationError("Invalid admin key", validationDetails("body", [...Value.Errors(NewAdminKey, input)] as never));
  }
  return input as { name: string };
}

/**
 * Creates an admin key named `name` (validated: 1 to 100 characters). `secret` stores a given
 * key (SVC_ADMIN_KEY at first start) instead of generating one. Returns the record and the secret.
 */
export function createAdminKey(store: CredentialStore, clock: Clock, input: unknown, secret?: string): AdminKeyRecord & { lastUsedAt: null; key: string } {
  const { name } = validateNewAdminKey(input);
  const material = secret !== undefined ? { secret, ...adminKeyParts(secret) } : generateSecret("svc_admin_");
  const row = { id: newId("key"), name, keyHash: material.hash, keyPrefix: material.keyPrefix, createdAt: iso(clock.now()), lastUsedAt: null };
  try {
    store.db.insert(adminKeys).values(row).run();
  } catch (e) {
    if (isUniqueViolation(e)) throw conflict("This admin key already exists");
    throw e;
  }
  credentialsChanged(store);
  return { id: row.id, name: row.name, keyPrefix: row.keyPrefix, createdAt: row.createdAt, lastUsedAt: null, key: material.secret };
}

/** Deletes an admin key. 404 unknown; 409 the last key when no admin user exists (nobody could administer). */
export function deleteAdminKey(store: CredentialStore, id: string): void {
  transaction(store, () => {
    const key = store.db.select({ id: adminKeys.id }).from(adminKeys).where(eq(adminKeys.id, id)).get();
    if (!key) throw notFound("Admin key");
    if (countAdminKeys(store) <= 1 && !hasAdminUser(store)) throw conflict(LAST_KEY);
    store.db.delete(adminKeys).where(eq(adminKeys.id, id)).run();
  });
  credentialsChanged(store);
}
