/** Projects and their environments: storage operations (routes arrive with the identity issue). */
import { count, eq, sql } from "drizzle-orm";
import { transaction, type Store } from "../../db/client";
import { environments, projects } from "../../db/schema";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";

export const DEFAULT_ENVIRONMENTS = [
  { slug: "development", name: "Development" },
  { slug: "staging", name: "Staging" },
  { slug: "production", name: "Production" },
] as const;

export interface NewProject {
  slug: string;
  name: string;
  environments?: readonly { slug: string; name: string }[];
}

export interface Project {
  id: string;
  slug: string;
  name: string;
  environments: { id: string; slug: string; name: string; createdAt: string }[];
  createdAt: string;
  updatedAt: string;
}

/** Creates a project with its environments (the default three when none are given), atomically. */
export function createProject(store: Store, clock: Clock, input: NewProject): Project {
  const now = iso(clock.now());
  const project = { id: newId("proj"), slug: input.slug, name: input.name, createdAt: now, updatedAt: now };
  const envs = (input.environments ?? DEFAULT_ENVIRONMENTS).map((e) => ({
    id: newId("env"),
    projectId: project.id,
    slug: e.slug,
    name: e.name,
    createdAt: now,
  }));
  transaction(store, () => {
    store.db.insert(projects).values(project).run();
    if (envs.length > 0) store.db.insert(environments).values(envs).run();
  });
  return { ...project, environments: envs.map(({ projectId: _, ...e }) => e) };
}

export function countProjects({ db }: Store): number {
  return db.select({ n: count() }).from(projects).get()!.n;
}

export function getProjectBySlug({ db }: Store, slug: string): Project | undefined {
  const project = db.select().from(projects).where(eq(projects.slug, slug)).get();
  if (!project) return undefined;
  const envs = db
    .select({ id: environments.id, slug: environments.slug, name: environments.name, createdAt: environments.createdAt })
    .from(environments)
    .where(eq(environments.projectId, project.id))
    .orderBy(sql`rowid`) // the order they were added
    .all();
  return { ...project, environments: envs };
}
