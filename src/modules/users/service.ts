/**
 * Login users: storage operations, shared by the HTTP routes, the first-start bootstrap and
 * the `flagsvc admin create-user` and `reset-password` commands (which run beside the server
 * in another process, so everything here takes a plain Store, not the app context). Emails
 * are stored lower-case; passwords only as argon2id hashes. At least one admin user is kept
 * once one exists.
 */
import { Value } from "@sinclair/typebox/value";
import { asc, count, eq } from "drizzle-orm";
import { isUniqueViolation, transaction, type Store } from "../../db/client";
import { credentialsChanged, tokensValidFrom, type CredentialStore } from "../../http/credentials";
import { users } from "../../db/schema";
import type { Role } from "../../http/access";
import { conflict, notFound, validationDetails, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId, randomBase62 } from "../../lib/ids";
import { NewUser, PasswordReset, UserPatch } from "./model";

export interface UserRecord {
  id: string;
  email: string;
  role: Role;
}

export interface NewUserInput {
  email: string;
  password: string;
  role: Role;
}

export interface PasswordResetInput {
  email: string;
  password: string;
}

export interface UserPatchInput {
  role?: Role;
  password?: string;
}

/** argon2id with pinned cost (64 MiB, 2 passes), so a runtime upgrade cannot change it silently. */
export const PASSWORD_OPTIONS = { algorithm: "argon2id", memoryCost: 65536, timeCost: 2 } as const;

export const hashPassword = (password: string): Promise<string> => Bun.password.hash(password, PASSWORD_OPTIONS);
export const hashPasswordSync = (password: string): string => Bun.password.hashSync(password, PASSWORD_OPTIONS);

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** A password made for a user (the first admin, a reset): 20 base62 characters, about 119 bits. */
export const generatePassword = (): string => randomBase62(20);

const LAST_ADMIN_DELETE = "Cannot delete the last admin user: give another user the admin role first";
const LAST_ADMIN_DEMOTE = "Cannot change the role of the last admin user: give another user the admin role first";

const toRecord = (u: { id: string; email: string; role: Role }): UserRecord => ({ id: u.id, email: u.email, role: u.role });

/** The same checks as the route's body schema, for callers that are not HTTP (the CLI). */
function check<T>(schema: typeof NewUser | typeof UserPatch | typeof PasswordReset, value: unknown): T {
  if (!Value.Check(schema, value)) throw validationError("Invalid user", validationDetails("body", [...Value.Errors(schema, value)] as never));
  return value as T;
}

export function listUsers({ db }: Store): UserRecord[] {
  return db.select({ id: users.id, email: users.email, role: users.role }).from(users).orderBy(asc(users.email)).all().map(toRecord);
}

export function getUser({ db }: Store, id: string): UserRecord | undefined {
  const u = db.select({ id: users.id, email: users.email, role: users.role }).from(users).where(eq(users.id, id)).get();
  return u && toRecord(u);
}

/** The user with this email (any case), with the password hash: for login only. */
export function findUserForLogin({ db }: Store, email: string) {
  return db.select().from(users).where(eq(users.email, normalizeEmail(email))).get();
}

export function countUsers({ db }: Store): number {
  return db.select({ n: count() }).from(users).get()!.n;
}

function countAdmins({ db }: Store): number {
  return db.select({ n: count() }).from(users).where(eq(users.role, "admin")).get()!.n;
}


const duplicate = (email: string) => conflict(`A user with email ${email} already exists`);

/** Stores a user whose password is already hashed (bootstrap, synchronous). */
export function insertUser(store: CredentialStore, clock: Clock, input: { email: string; passwordHash: string; role: Role }): UserRecord {
  const now = iso(clock.now());
  const row = { id: newId("usr"), email: normalizeEmail(input.email), passwordHash: input.passwordHash, role: input.role, createdAt: now, updatedAt: now };
  try {
    store.db.insert(users).values(row).run();
  } catch (e) {
    if (isUniqueViolation(e)) throw duplicate(row.email);
    throw e;
  }
  credentialsChanged(store);
  return toRecord(row);
}

/** Throws the 400 that `createUser` would for this input (for callers that check before opening storage). */
export const validateNewUser = (input: unknown): NewUserInput => check<NewUserInput>(NewUser, input);

/** Validates fully (400), refuses a taken email (409), hashes the password and stores the user. */
export async function createUser(store: CredentialStore, clock: Clock, input: unknown): Promise<UserRecord> {
  const { email, password, role } = validateNewUser(input);
  const normalized = normalizeEmail(email);
  if (findUserForLogin(store, normalized)) throw duplicate(normalized);
  return insertUser(store, clock, { email: normalized, passwordHash: await hashPassword(password), role });
}

/**
 * Changes role and/or password. 404 unknown user; 409 demoting the last admin; an empty patch
 * changes nothing and answers the user, as every PATCH does.
 */
export async function updateUser(store: CredentialStore, clock: Clock, id: string, input: unknown): Promise<UserRecord> {
  const patch = check<UserPatchInput>(UserPatch, input);
  const current = getUser(store, id);
  if (!current) throw notFound("User");
  if (patch.role === undefined && patch.password === undefined) return current;
  const passwordHash = patch.password === undefined ? undefined : await hashPassword(patch.password);
  const updated = transaction(store, () => {
    const user = getUser(store, id);
    if (!user) throw notFound("User");
    if (patch.role !== undefined && user.role === "admin" && patch.role !== "admin" && countAdmins(store) <= 1) throw conflict(LAST_ADMIN_DEMOTE);
    const changes = {
      ...(patch.role !== undefined ? { role: patch.role } : {}),
      // A new password ends the sessions opened before it.
      ...(passwordHash !== undefined ? { passwordHash, tokensValidAfter: tokensValidFrom(validFrom(store, id), clock.now()) } : {}),
      updatedAt: iso(clock.now()),
    };
    store.db.update(users).set(changes).where(eq(users.id, id)).run();
    return { ...user, ...(patch.role !== undefined ? { role: patch.role } : {}) };
  });
  credentialsChanged(store);
  return updated;
}

/** Throws the 400 that `resetPassword` would for this input (for callers that check before opening storage). */
export const validatePasswordReset = (input: unknown): PasswordResetInput => check<PasswordResetInput>(PasswordReset, input);

/**
 * The user with this email (any case) gets a new password, as by a PATCH with a password
 * (`updateUser`): the user's login tokens issued before it end. 404 unknown email.
 */
export async function resetPassword(store: CredentialStore, clock: Clock, input: unknown): Promise<UserRecord> {
  const { email, password } = validatePasswordReset(input);
  const user = findUserForLogin(store, email);
  if (!user) throw notFound(`User with email ${normalizeEmail(email)}`);
  return updateUser(store, clock, user.id, { password });
}

const validFrom = (store: Store, id: string): string | null =>
  store.db.select({ v: users.tokensValidAfter }).from(users).where(eq(users.id, id)).get()?.v ?? null;

/** Deletes a user. 404 unknown; 409 the last admin. */
export function deleteUser(store: CredentialStore, id: string): void {
  transaction(store, () => {
    const user = getUser(store, id);
    if (!user) throw notFound("User");
    if (user.role === "admin" && countAdmins(store) <= 1) throw conflict(LAST_ADMIN_DELETE);
    store.db.delete(users).where(eq(users.id, id)).run();
  });
  credentialsChanged(store);
}

export function hasAdminUser(store: Store): boolean {
  return countAdmins(store) > 0;
}
