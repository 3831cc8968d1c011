/** Projects and their environments: storage operations and the rules of decisions §5. */
import { asc, count, eq, sql } from "drizzle-orm";
import type { AppContext } from "../../context";
import { prepared, transaction, type Store } from "../../db/client";
import { credentialsChanged } from "../../http/credentials";
import { projectChanged, type SnapshotStore } from "../flags/snapshot";
import { environments, projects } from "../../db/schema";
import type { Principal } from "../../http/access";
import { conflict, notFound, validationError } from "../../http/errors";
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

/** Creates a project with its environments (the default three when none are given), atomically. */
export function createProject(store: SnapshotStore, clock: Clock, input: NewProject): Project {
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
  projectChanged(store, project.id);
  return { ...project, environments: envs.map(({ projectId: _, ...e }) => e) };
}

export function countProjects({ db }: Store): number {
  return db.select({ n: count() }).from(projects).get()!.n;
}

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

export function getProjectBySlug(store: Store, slug: string): Project | undefined {
  const queries = lookups(store);
  const project = queries.projectBySlug.get({ slug });
  if (!project) return undefined;
  return { ...project, environments: queries.environmentsOf.all({ projectId: project.id }) };
}

/** The project, or 404 NOT_FOUND. */
export function requireProject(store: Store, slug: string): Project {
  const project = getProjectBySlug(store, slug);
  if (!project) throw notFound(`Project ${slug}`);
  return project;
}

// ---- the API's operations ---------------------------------------------------------------------

/** Every project the caller may see, ordered by slug: an API key sees only its own. */
export function listProjects(store: Store, principal: Principal): Project[] {
  const { db } = store;
  const rows =
    principal.kind === "apiKey"
      ? db.select().from(projects).where(eq(projects.id, principal.projectId)).all()
      : db.select().from(projects).orderBy(asc(projects.slug)).all();
  if (rows.length === 0) return [];
  const byProject = new Map<string, Environment[]>(rows.map((p) => [p.id, []]));
  const envRows = db
    .select({ ...ENV_COLUMNS, projectId: environments.projectId })
    .from(environments)
    .orderBy(sql`rowid`)
    .all();
  for (const { projectId, ...e } of envRows) byProject.get(projectId)?.push(e);
  return rows.map((p) => ({ ...p, environments: byProject.get(p.id)! }));
}

/** POST /v1/projects: 409 on a taken slug, 400 on repeated environment slugs; nothing written on failure. */
export function createProjectChecked(ctx: AppContext, input: NewProject): Project {
  if (input.environments) {
    const seen = new Set<string>();
    const details = [];
    for (const [i, e] of input.environments.entries()) {
      if (seen.has(e.slug)) details.push({ path: `body.environments[${i}].slug`, message: `Duplicate environment slug ${e.slug}` });
      seen.add(e.slug);
    }
    if (details.length > 0) throw validationError("Environment slugs must be unique within the project", details);
  }
  return transaction(ctx, () => {
    if (getProjectBySlug(ctx, input.slug)) throw conflict(`Project ${input.slug} already exists`);
    return createProject(ctx, ctx.clock, input);
  });
}

/** PATCH /v1/projects/{slug}: only `name` changes; an empty body changes nothing. */
export function updateProject(ctx: AppContext, slug: string, patch: { name?: string }): Project {
  const project = requireProject(ctx, slug);
  if (patch.name === undefined || patch.name === project.name) return project;
  const updatedAt = iso(ctx.clock.now());
  ctx.db.update(projects).set({ name: patch.name, updatedAt }).where(eq(projects.id, project.id)).run();
  return { ...project, name: patch.name, updatedAt };
}

/** DELETE /v1/projects/{slug}: the project, its environments, keys and everything else in it. */
export function deleteProject(ctx: AppContext, slug: string): void {
  const project = requireProject(ctx, slug);
  // Foreign keys cascade from projects to everything that belongs to a project.
  ctx.db.delete(projects).where(eq(projects.id, project.id)).run();
  credentialsChanged(ctx);
  projectChanged(ctx, project.id);
  ctx.testSessions.removeProject(project.id); // its test sessions' tokens stop working at once
}

/** The project's environment of this slug, or 404 NOT_FOUND. */
export function requireEnvironment(project: Project, envSlug: string): Environment {
  const env = project.environments.find((e) => e.slug === envSlug);
  if (!env) throw notFound(`Environment ${envSlug} in project ${project.slug}`);
  return env;
}

export function listEnvironments(ctx: AppContext, slug: string): Environment[] {
  return requireProject(ctx, slug).environments;
}

/** GET /v1/projects/{slug}/environments/{environment}: 404 for an unknown project or environment. */
export function getEnvironment(ctx: AppContext, slug: string, envSlug: string): Environment {
  return requireEnvironment(requireProject(ctx, slug), envSlug);
}

/**
 * PATCH /v1/projects/{slug}/environments/{environment}: only `name` changes; an empty body
 * changes nothing. Nothing else holds the name (the snapshot, credentials and webhook events
 * know environments by id and slug), and the project's `updatedAt` stays: an environment is not
 * one of the project's own fields, as adding or deleting one leaves it too.
 */
export function updateEnvironment(ctx: AppContext, slug: string, envSlug: string, patch: { name?: string }): Environment {
  const env = getEnvironment(ctx, slug, envSlug);
  if (patch.name === undefined || patch.name === env.name) return env;
  ctx.db.update(environments).set({ name: patch.name }).where(eq(environments.id, env.id)).run();
  return { ...env, name: patch.name };
}

/** POST /v1/projects/{slug}/environments: 409 when the slug is taken in that project. */
export function createEnvironment(ctx: AppContext, slug: string, input: { slug: string; name: string }): Environment {
  const { projectId, env } = transaction(ctx, () => {
    const project = requireProject(ctx, slug);
    if (project.environments.some((e) => e.slug === input.slug)) {
      throw conflict(`Environment ${input.slug} already exists in project ${slug}`);
    }
    const env = { id: newId("env"), slug: input.slug, name: input.name, createdAt: iso(ctx.clock.now()) };
    ctx.db.insert(environments).values({ ...env, projectId: project.id }).run();
    return { projectId: project.id, env };
  });
  projectChanged(ctx, projectId); // its flags exist there now, disabled
  return env;
}

/**
 * DELETE /v1/projects/{slug}/environments/{environment}: removes its flag states and the keys
 * bound to it (revoked at once). The last environment of a project stays: 409.
 */
export function deleteEnvironment(ctx: AppContext, slug: string, envSlug: string): void {
  const project = requireProject(ctx, slug);
  const env = requireEnvironment(project, envSlug);
  if (project.environments.length === 1) {
    throw conflict(`Environment ${envSlug} is the last environment of project ${slug}; a project keeps at least one`);
  }
  ctx.db.delete(environments).where(eq(environments.id, env.id)).run();
  credentialsChanged(ctx);
  projectChanged(ctx, project.id);
}
