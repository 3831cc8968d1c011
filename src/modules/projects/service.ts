/**
 * Projects and their environments: the rules of decisions §5. Writes go through the store with
 * their change-log entry; the subscribers (evaluation snapshot, credentials, test sessions)
 * learn of them from the entry, before the response goes out.
 */
import { diff, whole, type Author, type ChangeDraft } from "../../changes/entry";
import type { Principal } from "../../http/access";
import { conflict, notFound, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { STALE_AFTER_DAYS_DEFAULT } from "./model";
import type { Environment, Project, ProjectReader, ProjectStore } from "./store";

export type { Environment, Project } from "./store";

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

/** The project, or 404 NOT_FOUND. */
export async function requireProject(projects: ProjectReader, slug: string): Promise<Project> {
  return projectIn(slug, await projects.bySlug(slug));
}

function projectIn(slug: string, project: Project | undefined): Project {
  if (!project) throw notFound(`Project ${slug}`);
  return project;
}

/** The project's environment of this slug, or 404 NOT_FOUND. */
export function requireEnvironment(project: Project, envSlug: string): Environment {
  const env = project.environments.find((e) => e.slug === envSlug);
  if (!env) throw notFound(`Environment ${envSlug} in project ${project.slug}`);
  return env;
}

/** A new project's record (the default three environments when none are given). */
export function newProject(clock: Clock, input: NewProject): Project {
  const now = iso(clock.now());
  const environments = (input.environments ?? DEFAULT_ENVIRONMENTS).map((e) => ({ id: newId("env"), slug: e.slug, name: e.name, createdAt: now }));
  return { id: newId("proj"), slug: input.slug, name: input.name, environments, staleAfterDays: STALE_AFTER_DAYS_DEFAULT, createdAt: now, updatedAt: now };
}

const ref = (project: Project) => ({ id: project.id, slug: project.slug });

/** The entry of a project's creation: the whole project, its environments included. */
export function projectCreated(project: Project): ChangeDraft {
  return { project: ref(project), environment: null, resource: { type: "project", id: project.id, key: project.slug }, action: "created", changes: whole({ ...project }, "created") };
}

function environmentChange(project: Project, env: Environment, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft {
  return { project: ref(project), environment: env.slug, resource: { type: "environment", id: env.id, key: env.slug }, action, changes };
}

export interface ProjectServiceDeps {
  projects: ProjectStore;
  clock: Clock;
}

export type ProjectService = ReturnType<typeof projectService>;

export function projectService({ projects, clock }: ProjectServiceDeps) {
  return {
    get: (slug: string) => requireProject(projects, slug),

    /** Every project the caller may see, ordered by slug: an API key sees only its own. */
    list: (principal: Principal) => projects.list(principal.kind === "apiKey" ? principal.projectId : undefined),

    /** POST /v1/projects: 409 on a taken slug, 400 on repeated environment slugs; nothing written on failure. */
    async create(author: Author, input: NewProject): Promise<Project> {
      if (input.environments) {
        const seen = new Set<string>();
        const details = [];
        for (const [i, e] of input.environments.entries()) {
          if (seen.has(e.slug)) details.push({ path: `body.environments[${i}].slug`, message: `Duplicate environment slug ${e.slug}` });
          seen.add(e.slug);
        }
        if (details.length > 0) throw validationError("Environment slugs must be unique within the project", details);
      }
      const project = newProject(clock, input);
      if (!(await projects.create(author, project, projectCreated(project)))) throw conflict(`Project ${input.slug} already exists`);
      return project;
    },

    /** PATCH /v1/projects/{slug}: `name` and `staleAfterDays` change; an empty body changes nothing. */
    update(author: Author, slug: string, patch: { name?: string; staleAfterDays?: number }): Promise<Project> {
      return projects.update(author, slug, (found) => {
        const project = projectIn(slug, found);
        const next = { ...project, name: patch.name ?? project.name, staleAfterDays: patch.staleAfterDays ?? project.staleAfterDays };
        const changes = diff({ name: project.name, staleAfterDays: project.staleAfterDays }, { name: next.name, staleAfterDays: next.staleAfterDays });
        if (Object.keys(changes).length === 0) return { result: project, changes: [] };
        next.updatedAt = iso(clock.now());
        return { result: next, changes: [{ project: ref(project), environment: null, resource: { type: "project", id: project.id, key: slug }, action: "updated", changes }] };
      });
    },

    /** DELETE /v1/projects/{slug}: the project, its environments, keys and everything else in it (recorded in its entry). */
    delete(author: Author, slug: string): Promise<void> {
      return projects.remove(author, slug, (found, contents) => {
        const project = projectIn(slug, found);
        return { project: ref(project), environment: null, resource: { type: "project", id: project.id, key: slug }, action: "deleted", changes: whole({ ...project, ...contents }, "deleted") };
      });
    },

    listEnvironments: async (slug: string) => (await requireProject(projects, slug)).environments,

    /** GET /v1/projects/{slug}/environments/{environment}: 404 for an unknown project or environment. */
    getEnvironment: async (slug: string, envSlug: string) => requireEnvironment(await requireProject(projects, slug), envSlug),

    /**
     * PATCH /v1/projects/{slug}/environments/{environment}: only `name` changes; an empty body
     * changes nothing. Nothing else holds the name (the snapshot, credentials and webhook events
     * know environments by id and slug), and the project's `updatedAt` stays: an environment is
     * not one of the project's own fields, as adding or deleting one leaves it too.
     */
    updateEnvironment(author: Author, slug: string, envSlug: string, patch: { name?: string }): Promise<Environment> {
      return projects.updateEnvironment(author, slug, (found) => {
        const project = projectIn(slug, found);
        const env = requireEnvironment(project, envSlug);
        if (patch.name === undefined || patch.name === env.name) return { result: env, changes: [] };
        const next = { ...env, name: patch.name };
        return { result: next, changes: [environmentChange(project, env, "updated", diff({ name: env.name }, { name: next.name }))] };
      });
    },

    /** POST /v1/projects/{slug}/environments: 409 when the slug is taken in that project. */
    createEnvironment(author: Author, slug: string, input: { slug: string; name: string }): Promise<Environment> {
      return projects.createEnvironment(author, slug, (found) => {
        const project = projectIn(slug, found);
        if (project.environments.some((e) => e.slug === input.slug)) throw conflict(`Environment ${input.slug} already exists in project ${slug}`);
        const env = { id: newId("env"), slug: input.slug, name: input.name, createdAt: iso(clock.now()) };
        return { result: env, changes: [environmentChange(project, env, "created", whole({ ...env }, "created"))] };
      });
    },

    /**
     * DELETE /v1/projects/{slug}/environments/{environment}: removes its flag states and the keys
     * bound to it (revoked at once), recorded in its entry. The last environment of a project
     * stays: 409.
     */
    deleteEnvironment(author: Author, slug: string, envSlug: string): Promise<void> {
      return projects.removeEnvironment(author, slug, envSlug, (found, contents) => {
        const project = projectIn(slug, found);
        const env = requireEnvironment(project, envSlug);
        if (project.environments.length === 1) {
          throw conflict(`Environment ${envSlug} is the last environment of project ${slug}; a project keeps at least one`);
        }
        const { flags, apiKeys } = contents;
        return { result: env, changes: [environmentChange(project, env, "deleted", whole({ ...env, flagStates: flags, apiKeys }, "deleted"))] };
      });
    },
  };
}
