/** `LoginFailureStore` on PostgreSQL (store.ts has the interface and the SQLite implementation). */
import { eq, lte } from "drizzle-orm";
import type { PgQueries } from "../../db/pg/client";
import { loginFailures } from "../../db/pg/schema";
import { failureSet, type LoginFailures, type LoginFailureStore } from "./store";

export class PgLoginFailureStore implements LoginFailureStore {
  constructor(private readonly db: PgQueries) {}

  async get(email: string): Promise<LoginFailures | undefined> {
    const [row] = await this.db.select({ firstAt: loginFailures.firstAt, count: loginFailures.count }).from(loginFailures).where(eq(loginFailures.email, email));
    return row;
  }

  async fail(email: string, at: string, cutoff: string): Promise<LoginFailures> {
    const [row] = await this.db
      .insert(loginFailures)
      .values({ email, firstAt: at, count: 1 })
      .onConflictDoUpdate({ target: loginFailures.email, set: failureSet(loginFailures, at, cutoff) })
      .returning({ firstAt: loginFailures.firstAt, count: loginFailures.count });
    return row!;
  }

  async clear(email: string): Promise<void> {
    await this.db.delete(loginFailures).where(eq(loginFailures.email, email));
  }

  async prune(cutoff: string): Promise<number> {
    return (await this.db.delete(loginFailures).where(lte(loginFailures.firstAt, cutoff)).returning({ email: loginFailures.email })).length;
  }
}
