/**
 * All SQL of projects and environments, behind `ProjectStore` (asynchronous at its boundary,
 * so that a PostgreSQL implementation can stand behind the same interface; on SQLite each
 * method runs synchronously inside).
 */
import { asc, count, eq, sql } from "drizzle-orm";
import type { Author, ChangeDraft } from "../../changes/entry";
import { sqliteTx, type SqliteChangeLog, type Written } from "../../changes/sqlite";
import type { Tx } from "../../changes/log";
import { nextSeq, prepared } from "../../db/client";
import { apiKeys, environments, flags, projects, webhooks } from "../../db/schema";

export interface Environment {
  id: string;
  slug: string;
  name: string;
  createdAt: string;
}

export interface Project {
  id: string;
  slug: string;
  name: string;
  environments: Environment[];
  /** Days after which an unused or fully rolled-out flag is stale (docs/insights.md). */
  staleAfterDays: number;
  createdAt: string;
  updatedAt: string;
}

/** What other modules read of projects: one by slug, with its environments in the order they were added. */
export interface ProjectReader {
  bySlug(slug: string): Promise<Project | undefined>;
}

/** What a deleted project or environment took with it (its entry records it). */
export interface Contents {
  flags: string[];
  apiKeys: { id: string; name: string }[];
  webhooks?: string[];
}

export interface ProjectStore extends ProjectReader {
  /** Every project, by slug, with its environments; `onlyId`: that one alone. */
  list(onlyId?: string): Promise<Project[]>;
  /** `tx`: read inside that transaction. */
  count(tx?: Tx): Promise<number>;
  /** Inside a commit (the first start's bootstrap): the row alone; that commit appends the entry. */
  insert(tx: Tx, project: Project): Promise<void>;
  /** A new project with its environments, unless the slug is taken (false). */
  create(author: Author, project: Project, change: ChangeDraft): Promise<boolean>;
  update(author: Author, slug: string, decide: (current: Project | undefined) => Written<Project>): Promise<Project>;
  /** The project and everything in it (foreign keys cascade). */
  remove(author: Author, slug: string, decide: (current: Project | undefined, contents: Contents) => ChangeDraft): Promise<void>;
  createEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment>;
  updateEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment>;
  /** The environment, its flag states and the API keys bound to it. */
  removeEnvironment(author: Author, slug: string, envSlug: string, decide: (project: Project | undefined, contents: Contents) => Written<Environment>): Promise<void>;
}

const ENV_COLUMNS = { id: environments.id, slug: environments.slug, name: environments.name, createdAt: environments.createdAt };

const lookups = prepared((db) => ({
  projectBySlug: db.select().from(projects).where(eq(projects.slug, sql.placeholder("slug"))).prepare(),
  environmentsOf: db
    .select(ENV_COLUMNS)
    .from(environments)
    .where(eq(environments.projectId, sql.placeholder("projectId")))
    .orderBy(asc(environments.seq)) // the order they were added
    .prepare(),
}));

/**
 * Projects are read by every management request and written rarely, only through this store
 * (the CLI writes none), so the ones read are kept: every write of this store empties the
 * cache inside its transaction, and its own reads there go to the database. (Several nodes will
 * empty it on the entries of the others' project and environment writes.)
 */
export class SqliteProjectStore implements ProjectStore {
  private readonly cache = new Map<string, Project>();

  constructor(private readonly log: SqliteChangeLog) {}

  /** Synchronous: the project as last read (a copy is made by whoever changes it). */
  bySlugNow(slug: string): Project | undefined {
    const cached = this.cache.get(slug);
    if (cached !== undefined) return cached;
    const project = this.read(slug);
    if (project !== undefined) this.cache.set(slug, project);
    return project;
  }

  async bySlug(slug: string): Promise<Project | undefined> {
    return this.bySlugNow(slug);
  }

  /** Inside a write's transaction: the cache is emptied, the project read from the database. */
  private fresh(slug: string): Project | undefined {
    this.cache.clear();
    return this.read(slug);
  }

  private read(slug: string): Project | undefined {
    const queries = lookups(this.log.store);
    const project = queries.projectBySlug.get({ slug });
    if (!project) return undefined;
    return { ...project, environments: queries.environmentsOf.all({ projectId: project.id }) };
  }

  async list(onlyId?: string): Promise<Project[]> {
    const { db } = this.log.store;
    const rows = onlyId !== undefined ? db.select().from(projects).where(eq(projects.id, onlyId)).all() : db.select().from(projects).orderBy(asc(projects.slug)).all();
    if (rows.length === 0) return [];
    const byProject = new Map<string, Environment[]>(rows.map((p) => [p.id, []]));
    const envRows = db
      .select({ ...ENV_COLUMNS, projectId: environments.projectId })
      .from(environments)
      .orderBy(asc(environments.seq))
      .all();
    for (const { projectId, ...e } of envRows) byProject.get(projectId)?.push(e);
    return rows.map((p) => ({ ...p, environments: byProject.get(p.id)! }));
  }

  async count(tx?: Tx): Promise<number> {
    return (tx ? sqliteTx(tx) : this.log.store).db.select({ n: count() }).from(projects).get()!.n;
  }

  create(author: Author, project: Project, change: ChangeDraft): Promise<boolean> {
    return this.log.create(author, (tx) => this.insert(tx, project), change);
  }

  async insert(tx: Tx, project: Project): Promise<void> {
    this.cache.clear();
    const { db } = sqliteTx(tx);
    const { environments: envs, ...row } = project;
    db.insert(projects).values(row).run();
    if (envs.length > 0) db.insert(environments).values(envs.map((e, i) => ({ ...e, projectId: project.id, seq: nextSeq(environments, i) }))).run();
  }

  update(author: Author, slug: string, decide: (current: Project | undefined) => Written<Project>): Promise<Project> {
    return this.log.commit(author, async () => {
      const written = decide(this.fresh(slug));
      const { id, name, staleAfterDays, updatedAt } = written.result;
      if (written.changes.length > 0) this.log.store.db.update(projects).set({ name, staleAfterDays, updatedAt }).where(eq(projects.id, id)).run();
      return written;
    });
  }

  remove(author: Author, slug: string, decide: (current: Project | undefined, contents: Contents) => ChangeDraft): Promise<void> {
    return this.log.commit(author, async () => {
      const project = this.fresh(slug);
      const { db } = this.log.store;
      const contents: Contents = project
        ? {
            flags: db.select({ key: flags.key }).from(flags).where(eq(flags.projectId, project.id)).orderBy(asc(flags.key)).all().map((f) => f.key),
            apiKeys: db.select({ id: apiKeys.id, name: apiKeys.name }).from(apiKeys).where(eq(apiKeys.projectId, project.id)).all(),
            webhooks: db.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.projectId, project.id)).all().map((w) => w.id),
          }
        : { flags: [], apiKeys: [] };
      const change = decide(project, contents);
      // Foreign keys cascade from projects to everything that belongs to a project.
      db.delete(projects).where(eq(projects.id, project!.id)).run();
      return { result: undefined, changes: [change] };
    });
  }

  createEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment> {
    return this.log.commit(author, async () => {
      const project = this.fresh(slug);
      const written = decide(project);
      this.log.store.db.insert(environments).values({ ...written.result, projectId: project!.id, seq: nextSeq(environments) }).run();
      return written;
    });
  }

  updateEnvironment(author: Author, slug: string, decide: (project: Project | undefined) => Written<Environment>): Promise<Environment> {
    return this.log.commit(author, async () => {
      const written = decide(this.fresh(slug));
      const { id, name } = written.result;
      if (written.changes.length > 0) this.log.store.db.update(environments).set({ name }).where(eq(environments.id, id)).run();
      return written;
    });
  }

  removeEnvironment(author: Author, slug: string, envSlug: string, decide: (project: Project | undefined, contents: Contents) => Written<Environment>): Promise<void> {
    return this.log.commit(author, async () => {
      const project = this.fresh(slug);
      const env = project?.environments.find((e) => e.slug === envSlug);
      const { db } = this.log.store;
      const contents: Contents = env
        ? {
            flags: db
              .select({ key: flags.key })
              .from(flags)
              .where(sql`${flags.id} IN (SELECT flag_id FROM flag_states WHERE environment_id = ${env.id})`)
              .orderBy(asc(flags.key))
              .all()
              .map((f) => f.key),
            apiKeys: db.select({ id: apiKeys.id, name: apiKeys.name }).from(apiKeys).where(eq(apiKeys.environmentId, env.id)).all(),
          }
        : { flags: [], apiKeys: [] };
      const written = decide(project, contents);
      db.delete(environments).where(eq(environments.id, written.result.id)).run();
      return { result: undefined, changes: written.changes };
    });
  }
}
