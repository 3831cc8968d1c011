/**
 * All SQL of projects and environments, behind `ProjectStore` (asynchronous at its boundary,
 * so that a PostgreSQL implementation can stand behind the same interface; on SQLite each
 * method runs synchronously inside).
 */
import { eq, sql } from "drizzle-orm";
import type { SqliteChangeLog } from "../../changes/sqlite";
import { prepared } from "../../db/client";
import { environments, projects } from "../../db/schema";

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
  createdAt: string;
  updatedAt: string;
}

/** What other modules read of projects: one by slug, with its environments in the order they were added. */
export interface ProjectReader {
  bySlug(slug: string): Promise<Project | undefined>;
}

export interface ProjectStore extends ProjectReader {}

const ENV_COLUMNS = { id: environments.id, slug: environments.slug, name: environments.name, createdAt: environments.createdAt };

const lookups = prepared((db) => ({
  projectBySlug: db.select().from(projects).where(eq(projects.slug, sql.placeholder("slug"))).prepare(),
  environmentsOf: db
    .select(ENV_COLUMNS)
    .from(environments)
    .where(eq(environments.projectId, sql.placeholder("projectId")))
    .orderBy(sql`rowid`) // the order they were added
    .prepare(),
}));

export class SqliteProjectStore implements ProjectStore {
  constructor(private readonly log: SqliteChangeLog) {}

  /** Synchronous, for what must run inside a transaction. */
  bySlugNow(slug: string): Project | undefined {
    const queries = lookups(this.log.store);
    const project = queries.projectBySlug.get({ slug });
    if (!project) return undefined;
    return { ...project, environments: queries.environmentsOf.all({ projectId: project.id }) };
  }

  async bySlug(slug: string): Promise<Project | undefined> {
    return this.bySlugNow(slug);
  }
}
