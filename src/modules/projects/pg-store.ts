/**
 * `ProjectStore` on PostgreSQL (store.ts has the interface and the SQLite implementation).
 * Inside a commit every read goes through the transaction (the change log's write lock makes it
 * see every earlier commit). No cache yet: another node's write would leave it stale until the
 * nodes hear each other's entries (LISTEN/NOTIFY, issue 34 point 2).
 */
import { asc, count, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import type { Tx, Written } from "../../changes/log";
import { pgTx, type PgChangeLog } from "../../changes/pg";
import type { PgQueries } from "../../db/pg/client";
import { apiKeys, environments, flags, projects, webhooks } from "../../db/pg/schema";
import type { Contents, Environment, Project, ProjectStore } from "./store";

const ENV_COLUMNS = { id: environments.id, slug: environments.slug, name: environments.name, createdAt: environments.createdAt };

export class PgProjectStore implements ProjectStore {
  constructor(private readonly log: PgChangeLog) {}

  bySlug(slug: string): Promise<Project | undefined> {
    return this.read(this.log.db, slug);
  }

  private async read(db: PgQueries, slug: string): Promise<Project | undefined> {
    const [project] = await db.select().from(projects).where(eq(projects.slug, slug));
    if (!project) return undefined;
    const envs = await db.select(ENV_COLUMNS).from(environments).where(eq(environments.projectId, project.id)).orderBy(asc(environments.seq));
    return { ...project, environments: envs };
  }

  async list(onlyId?: string): Promise<Project[]> {
    const { db } = this.log;
    const rows = onlyId !== undefined ? await db.select().from(projects).where(eq(projects.id, onlyId)) : await db.select().from(projects).orderBy(asc(projects.slug));
    if (rows.length === 0) return [];
    const byProject = new Map<string, Environment[]>(rows.map((p) => [p.id, []]));
    const envRows = await db
      .select({ ...ENV_COLUMNS, projectId: environments.projectId })
      .from(environments)
      .where(onlyId !== undefined ? eq(environments.projectId, onlyId) : undefined)
      .orderBy(asc(environments.seq));
    for (const { projectId, ...e } of envRows) byProject.get(projectId)?.push(e);
    return rows.map((p) => ({ ...p, environments: byProject.get(p.id)! }));
  }

  async count(tx?: Tx): Promise<number> {
    const [row] = await (tx ? pgTx(tx) : this.log.db).select({ n: count() }).from(projects);
    return row!.n;
  }

  create(author: Author, project: Project, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, project), change);
  }

  async insert(tx: Tx, project: Project): Promise<void> {
    const db = pgTx(tx);
    const { environments: envs, ...row } = project;
    await db.insert(projects).values(row);
    // `seq` from its identity, in the order given.
    if (envs.length > 0) await db.insert(environments).values(envs.map((e) => ({ ...e, projectId: project.id })));
  }

  update(author: Author, slug: string, decide: (current: Project | undefined) => Written<Project>): Promise<Project> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await this.read(db, slug));
      const { id, name, staleAfterDays, updatedAt } = written.result;
      if (written.changes.length > 0) await db.update(projects).set({ name, staleAfterDays, updatedAt }).where(eq(projects.id, id));
      return written;
    });
  }

  remove(author: Author, slug: string, decide: (current: Project | undefined, contents: Contents) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const project = await this.read(db, slug);
      const contents: Contents = project
        ? {
            flags: (await db.select({ key: flags.key }).from(flags).where(eq(flags.projectId, project.id)).orderBy(asc(flags.key))).map((f) => f.key),
            apiKeys: await db.select({ id: apiKeys.id, name: apiKeys.name }).from(apiKeys).where(eq(apiKeys.projectId, project.id)).orderBy(asc(apiKeys.seq)),
            webhooks: (await db.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.projectId, project.id)).orderBy(asc(webhooks.seq))).map((w) => w.id),
          }
        : { flags: [], apiKeys: [] };
      const change = decide(project, contents);
      // Foreign keys cascade from projects to everything that belongs to a project.
      await db.delete(projects).where(eq(projects.id, project!.id));
      return { result: undefined, changes: [change] };
    });
  }

  createEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const project = await this.read(db, slug);
      const written = decide(project);
      await db.insert(environments).values({ ...written.result, projectId: project!.id });
      return written;
    });
  }

  updateEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const written = decide(await this.read(db, slug));
      const { id, name } = written.result;
      if (written.changes.length > 0) await db.update(environments).set({ name }).where(eq(environments.id, id));
      return written;
    });
  }

  removeEnvironment(author: Author, slug: string, envSlug: string, decide: (project: Project | undefined, contents: Contents) => Written<Environment>): Promise<void> {
    return this.log.commit(author, async (tx) => {
      const db = pgTx(tx);
      const project = await this.read(db, slug);
      const env = project?.environments.find((e) => e.slug === envSlug);
      const contents: Contents = env
        ? {
            flags: (
              await db
                .select({ key: flags.key })
                .from(flags)
                .where(sql`${flags.id} IN (SELECT flag_id FROM flag_states WHERE environment_id = ${env.id})`)
                .orderBy(asc(flags.key))
            ).map((f) => f.key),
            apiKeys: await db.select({ id: apiKeys.id, name: apiKeys.name }).from(apiKeys).where(eq(apiKeys.environmentId, env.id)).orderBy(asc(apiKeys.seq)),
          }
        : { flags: [], apiKeys: [] };
      const written = decide(project, contents);
      await db.delete(environments).where(eq(environments.id, written.result.id));
      return { result: undefined, changes: written.changes };
    });
  }
}
