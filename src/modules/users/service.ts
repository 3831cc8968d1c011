/**
 * Login users: the rules, shared by the HTTP routes, the first-start bootstrap and the
 * `flagsvc admin create-user` and `reset-password` commands (which run beside the server in
 * another process, with their own store on the same database). Emails are stored lower-case;
 * passwords only as argon2id hashes, never in a change-log entry. At least one admin user is
 * kept once one exists.
 */
import { Value } from "@sinclair/typebox/value";
import { diff, SECRET, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { tokensValidFrom } from "../../http/credentials";
import type { Role } from "../../http/access";
import { conflict, notFound, validationDetails, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId, randomBase62 } from "../../lib/ids";
import { NewUser, PasswordReset, UserPatch } from "./model";
import type { StoredUser, UserRecord, UserStore } from "./store";

export type { UserRecord } from "./store";

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

const toRecord = (u: UserRecord): UserRecord => ({ id: u.id, email: u.email, role: u.role });

/** The same checks as the route's body schema, for callers that are not HTTP (the CLI). */
function check<T>(schema: typeof NewUser | typeof UserPatch | typeof PasswordReset, value: unknown): T {
  if (!Value.Check(schema, value)) throw validationError("Invalid user", validationDetails("body", [...Value.Errors(schema, value)] as never));
  return value as T;
}

const duplicate = (email: string) => conflict(`A user with email ${email} already exists`);

/** Throws the 400 that `create` would for this input (for callers that check before opening storage). */
export const validateNewUser = (input: unknown): NewUserInput => check<NewUserInput>(NewUser, input);

/** Throws the 400 that `resetPassword` would for this input (for callers that check before opening storage). */
export const validatePasswordReset = (input: unknown): PasswordResetInput => check<PasswordResetInput>(PasswordReset, input);

/** A new user's record, its password already hashed. */
export function newUser(clock: Clock, input: { email: string; passwordHash: string; role: Role }): StoredUser {
  const now = iso(clock.now());
  return { id: newId("usr"), email: normalizeEmail(input.email), role: input.role, passwordHash: input.passwordHash, tokensValidAfter: null, createdAt: now, updatedAt: now };
}

/** The entry of a user's creation or deletion: the whole record, its password hash masked. */
export function userChange(user: StoredUser, action: "created" | "deleted"): ChangeDraft {
  const { tokensValidAfter: _t, ...record } = user;
  return { project: null, environment: null, resource: { type: "user", id: user.id, key: user.email }, action, changes: whole({ ...record }, action, ["passwordHash"]) };
}

export interface UserServiceDeps {
  users: UserStore;
  clock: Clock;
}

export type UserService = ReturnType<typeof userService>;

export function userService({ users, clock }: UserServiceDeps) {
  /** Role and/or password: 404 unknown; 409 demoting the last admin; no change, nothing written. */
  async function update(author: Author, id: string, input: unknown): Promise<UserRecord> {
    const patch = check<UserPatchInput>(UserPatch, input);
    const current = await users.get(id);
    if (!current) throw notFound("User");
    if (patch.role === undefined && patch.password === undefined) return current;
    // Hashed before the transaction: argon2id takes tens of milliseconds.
    const passwordHash = patch.password === undefined ? undefined : await hashPassword(patch.password);
    const updated = await users.update(author, id, (user, admins) => {
      if (!user) throw notFound("User");
      const role = patch.role ?? user.role;
      if (user.role === "admin" && role !== "admin" && admins <= 1) throw conflict(LAST_ADMIN_DEMOTE);
      const changes = diff({ role: user.role }, { role });
      // A new password ends the sessions opened before it.
      if (passwordHash !== undefined) changes.password = { before: SECRET, after: SECRET, changed: true };
      if (Object.keys(changes).length === 0) return { result: user, changes: [] };
      const now = clock.now();
      const next: StoredUser = {
        ...user,
        role,
        updatedAt: iso(now),
        ...(passwordHash !== undefined ? { passwordHash, tokensValidAfter: tokensValidFrom(user.tokensValidAfter, now) } : {}),
      };
      return { result: next, changes: [{ project: null, environment: null, resource: { type: "user", id, key: user.email }, action: "updated", changes }] };
    });
    return toRecord(updated);
  }

  return {
    list: () => users.list(),

    /** Validates fully (400), refuses a taken email (409), hashes the password and stores the user. */
    async create(author: Author, input: unknown): Promise<UserRecord> {
      const { email, password, role } = validateNewUser(input);
      const normalized = normalizeEmail(email);
      if (await users.byEmail(normalized)) throw duplicate(normalized);
      const user = newUser(clock, { email: normalized, passwordHash: await hashPassword(password), role });
      if (!(await users.create(author, user, userChange(user, "created")))) throw duplicate(normalized);
      return toRecord(user);
    },

    update,

    /**
     * The user with this email (any case) gets a new password, as by a PATCH with a password:
     * the user's login tokens issued before it end. 404 unknown email.
     */
    async resetPassword(author: Author, input: unknown): Promise<UserRecord> {
      const { email, password } = validatePasswordReset(input);
      const user = await users.byEmail(normalizeEmail(email));
      if (!user) throw notFound(`User with email ${normalizeEmail(email)}`);
      return update(author, user.id, { password });
    },

    /** 404 unknown; 409 the last admin. */
    delete(author: Author, id: string): Promise<void> {
      return users.remove(author, id, (user, admins) => {
        if (!user) throw notFound("User");
        if (user.role === "admin" && admins <= 1) throw conflict(LAST_ADMIN_DELETE);
        return userChange(user, "deleted");
      });
    },
  };
}
