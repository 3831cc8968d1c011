/**
 * All SQL of login users, behind `UserStore` (asynchronous at its boundary, so that a
 * PostgreSQL implementation can stand behind the same interface; on SQLite each method runs
 * synchronously inside). Writes go through the change log with their entries; the credential
 * registry learns of them from the entries (in this process) or from the change log (the CLI).
 */
import { asc, count, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type SqliteChangeLog, type Written } from "../../changes/sqlite";
import type { Tx } from "../../changes/log";
import { prepared } from "../../db/client";
import { users } from "../../db/schema";
import type { Role } from "../../http/access";

export interface UserRecord {
  id: string;
  email: string;
  role: Role;
}

/** A stored user, password hash included: for login and for the store's writes only. */
export interface StoredUser extends UserRecord {
  passwordHash: string;
  /** Login tokens dated before this whole second are refused (set by a password change). */
  tokensValidAfter: string | null;
  createdAt: string;
  updatedAt: string;
}

/** What login reads of users. */
export interface UserReader {
  /** The user with this email (already lower-case), hash included. */
  byEmail(email: string): Promise<StoredUser | undefined>;
}

export interface UserStore extends UserReader {
  /** Every user, ordered by email. */
  list(): Promise<UserRecord[]>;
  get(id: string): Promise<UserRecord | undefined>;
  /** `tx`: read inside that transaction. */
  count(tx?: Tx): Promise<number>;
  /** Inside a commit (the first start's bootstrap): the row alone; that commit appends the entry. */
  insert(tx: Tx, user: StoredUser): Promise<void>;
  /** A new user, unless the email is taken (false). */
  create(author: Author, user: StoredUser, change: ChangeDraft): Promise<boolean>;
  /** `decide` sees the stored user and how many admins there are; no change, nothing written. */
  update(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => Written<StoredUser>): Promise<StoredUser>;
  remove(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => ChangeDraft): Promise<void>;
}

const queries = prepared((db) => ({
  byId: db.select().from(users).where(eq(users.id, sql.placeholder("id"))).prepare(),
  byEmail: db.select().from(users).where(eq(users.email, sql.placeholder("email"))).prepare(),
  admins: db.select({ n: count() }).from(users).where(eq(users.role, "admin")).prepare(),
}));

const toRecord = (u: UserRecord): UserRecord => ({ id: u.id, email: u.email, role: u.role });

export class SqliteUserStore implements UserStore {
  constructor(private readonly log: SqliteChangeLog) {}

  async byEmail(email: string): Promise<StoredUser | undefined> {
    return queries(this.log.store).byEmail.get({ email });
  }

  async list(): Promise<UserRecord[]> {
    return this.log.store.db.select({ id: users.id, email: users.email, role: users.role }).from(users).orderBy(asc(users.email)).all();
  }

  async get(id: string): Promise<UserRecord | undefined> {
    const u = queries(this.log.store).byId.get({ id });
    return u && toRecord(u);
  }

  async count(tx?: Tx): Promise<number> {
    return (tx ? sqliteTx(tx) : this.log.store).db.select({ n: count() }).from(users).get()!.n;
  }

  /** Admin users now (the last admin key's deletion needs one: admin-keys/store.ts, in its transaction). */
  adminsNow(): number {
    return queries(this.log.store).admins.get()!.n;
  }

  create(author: Author, user: StoredUser, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, user), change);
  }

  async insert(tx: Tx, user: StoredUser): Promise<void> {
    sqliteTx(tx).db.insert(users).values(user).run();
  }

  update(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => Written<StoredUser>): Promise<StoredUser> {
    return this.log.commit(author, async () => {
      const written = decide(queries(this.log.store).byId.get({ id }), this.adminsNow());
      if (written.changes.length > 0) {
        const { role, passwordHash, tokensValidAfter, updatedAt } = written.result;
        this.log.store.db.update(users).set({ role, passwordHash, tokensValidAfter, updatedAt }).where(eq(users.id, id)).run();
      }
      return written;
    });
  }

  remove(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const change = decide(queries(this.log.store).byId.get({ id }), this.adminsNow());
      this.log.store.db.delete(users).where(eq(users.id, id)).run();
      return { result: undefined, changes: [change] };
    });
  }
}
