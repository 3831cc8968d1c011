/** `UserStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { asc, count, eq } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx, Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { users } from "../../db/pg/schema";
import type { StoredUser, UserRecord, UserStore } from "./store";

const RECORD = { id: users.id, email: users.email, role: users.role };

export class PgUserStore implements UserStore {
  constructor(private readonly log: PgChangeLog) {}

  async byEmail(email: string): Promise<StoredUser | undefined> {
    const [row] = await this.log.db.select().from(users).where(eq(users.email, email));
    return row;
  }

  list(): Promise<UserRecord[]> {
    return this.log.db.select(RECORD).from(users).orderBy(asc(users.email));
  }

  async get(id: string): Promise<UserRecord | undefined> {
    const [row] = await this.log.db.select(RECORD).from(users).where(eq(users.id, id));
    return row;
  }

  async count(tx?: Tx): Promise<number> {
    const [row] = await (tx ? pgTx(tx) : this.log.db).select({ n: count() }).from(users);
    return row!.n;
  }

  /** Admin users, read through `db` (a commit's transaction: the admin keys' deletion counts them there). */
  async admins(db: PgQueries): Promise<number> {
    const [row] = await db.select({ n: count() }).from(users).where(eq(users.role, "admin"));
    return row!.n;
  }

  create(author: Author, user: StoredUser, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, user), change);
  }

  async insert(tx: Tx, user: StoredUser): Promise<void> {
    await pgTx(tx).insert(users).values(user);
  }

  update(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => Written<StoredUser>): Promise<StoredUser> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await this.stored(db, id), await this.admins(db));
      if (written.changes.length > 0) {
        const { role, passwordHash, tokensValidAfter, updatedAt } = written.result;
        await db.update(users).set({ role, passwordHash, tokensValidAfter, updatedAt }).where(eq(users.id, id));
      }
      return written;
    });
  }

  remove(author: Author, id: string, decide: (current: StoredUser | undefined, admins: number) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const change = decide(await this.stored(db, id), await this.admins(db));
      await db.delete(users).where(eq(users.id, id));
      return { result: undefined, changes: [change] };
    });
  }

  private async stored(db: PgQueries, id: string): Promise<StoredUser | undefined> {
    const [row] = await db.select().from(users).where(eq(users.id, id));
    return row;
  }
}
