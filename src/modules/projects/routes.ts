/** Projects and environments: routes (decisions §5). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent } from "../../http/schema";
import {
  Environment,
  EnvironmentList,
  EnvironmentParams,
  EnvironmentPatch,
  MAX_ENVIRONMENTS_ON_CREATE,
  NAME_MAX,
  NewEnvironment,
  STALE_AFTER_DAYS_DEFAULT,
  STALE_AFTER_DAYS_MAX,
  STALE_AFTER_DAYS_MIN,
  NewProject,
  Project,
  ProjectList,
  ProjectParams,
  ProjectPatch,
} from "./model";
import type { ProjectService } from "./service";

const PROJECTS = ["Projects"];
const ENVIRONMENTS = ["Environments"];
const SLUGS = "Slugs are kebab-case (`^[a-z0-9]+(-[a-z0-9]+)*$`), 1 to 64 characters";
const NAMES = `names 1 to ${NAME_MAX} characters`;
const WHO = "API keys of scope mgmt or full (their own project only: another project's slug is 403 FORBIDDEN), admin keys, and login JWTs";

export const projectsRoutes = (projects: ProjectService) =>
  new Elysia({ name: "flagsvc/projects" })
    .use(accessGuard())
    .get("/v1/projects", async ({ principal }) => ({ projects: await projects.list(principal) }), {
      access: "projects",
      response: { 200: ProjectList },
      detail: {
        tags: PROJECTS,
        summary: "List projects",
        description: `Ordered by slug, each with its environments (in the order they were added). An API key (mgmt or full) sees only its own project; admin keys and login JWTs (any role) see all.`,
      },
    })
    .post("/v1/projects", async ({ body, principal, set, status }) => status(201, await projects.create(authorOf({ principal, set }), body)), {
      access: "projectCreate",
      body: NewProject,
      response: { 201: Project },
      detail: {
        tags: PROJECTS,
        summary: "Create a project",
        description: `Admin key or admin JWT only. ${SLUGS}; ${NAMES}. \`environments\`, when sent, holds 1 to ${MAX_ENVIRONMENTS_ON_CREATE} environments \`{ slug, name }\` (an empty array is a 400); when omitted the project gets development, staging and production. A taken project slug is 409 CONFLICT; an environment slug repeated within the request is 400 VALIDATION_ERROR. Nothing is written when the request is refused.`,
      },
    })
    .get("/v1/projects/:slug", ({ params }) => projects.get(params.slug), {
      access: "projects",
      params: ProjectParams,
      response: { 200: Project },
      detail: {
        tags: PROJECTS,
        summary: "Get a project",
        description: `${WHO}. An unknown slug is 404 NOT_FOUND.`,
      },
    })
    .patch("/v1/projects/:slug", ({ params, body, principal, set }) => projects.update(authorOf({ principal, set }), params.slug, body), {
      access: "projects",
      params: ProjectParams,
      body: ProjectPatch,
      response: { 200: Project },
      detail: {
        tags: PROJECTS,
        summary: "Update a project (name, staleAfterDays)",
        description: `\`name\` (1 to ${NAME_MAX} characters) and \`staleAfterDays\` (an integer from ${STALE_AFTER_DAYS_MIN} to ${STALE_AFTER_DAYS_MAX}, default ${STALE_AFTER_DAYS_DEFAULT}: after that many days without a production evaluation in any environment, or serving one value to everyone in every environment without a change, a flag of the project is stale; docs/insights.md) can change; the slug is immutable, so \`slug\` or any other field in the body is a 400. An empty body changes nothing. \`updatedAt\` moves only when a field changes. Flags' staleness follows a new \`staleAfterDays\` at the next detection (every 5 minutes). Writers: mgmt/full keys of the project, admin keys, admin JWTs.`,
      },
    })
    .delete(
      "/v1/projects/:slug",
      async ({ params, principal, set, status }) => {
        await projects.delete(authorOf({ principal, set }), params.slug);
        return status(204);
      },
      {
        access: "projects",
        params: ProjectParams,
        detail: {
          tags: PROJECTS,
          summary: "Delete a project",
          responses: noContent("Deleted"),
          description:
            "Deletes the project and everything in it: environments, flags and their states, webhooks, and its API keys, which are refused (401) from the next request on. Writers: mgmt/full keys of the project, admin keys, admin JWTs.",
        },
      },
    )
    .get("/v1/projects/:slug/environments", async ({ params }) => ({ environments: await projects.listEnvironments(params.slug) }), {
      access: "environments",
      params: ProjectParams,
      response: { 200: EnvironmentList },
      detail: {
        tags: ENVIRONMENTS,
        summary: "List environments",
        description: `In the order they were added. ${WHO}.`,
      },
    })
    .post("/v1/projects/:slug/environments", async ({ params, body, principal, set, status }) => status(201, await projects.createEnvironment(authorOf({ principal, set }), params.slug, body)), {
      access: "environments",
      params: ProjectParams,
      body: NewEnvironment,
      response: { 201: Environment },
      detail: {
        tags: ENVIRONMENTS,
        summary: "Add an environment",
        description: `${SLUGS}; ${NAMES}. A slug already used in the project is 409 CONFLICT; an unknown project 404. Writers: mgmt/full keys of the project, admin keys, admin JWTs.`,
      },
    })
    .get("/v1/projects/:slug/environments/:environment", ({ params }) => projects.getEnvironment(params.slug, params.environment), {
      access: "environments",
      params: EnvironmentParams,
      response: { 200: Environment },
      detail: {
        tags: ENVIRONMENTS,
        summary: "Get an environment",
        description: `Unknown project or environment: 404. ${WHO}.`,
      },
    })
    .patch("/v1/projects/:slug/environments/:environment", ({ params, body, principal, set }) => projects.updateEnvironment(authorOf({ principal, set }), params.slug, params.environment, body), {
      access: "environments",
      params: EnvironmentParams,
      body: EnvironmentPatch,
      response: { 200: Environment },
      detail: {
        tags: ENVIRONMENTS,
        summary: "Rename an environment",
        description: `Only \`name\` (1 to ${NAME_MAX} characters) can change; the slug is immutable (API keys, webhooks and evaluation name environments by it), so \`slug\` or any other field in the body is a 400. An empty body changes nothing and answers the environment. A rename changes nothing else: the project's \`updatedAt\` stays (as when an environment is added or deleted), and evaluation, keys and webhook payloads, which carry slugs, are unaffected. Unknown project or environment: 404. Writers: mgmt/full keys of the project, admin keys, admin JWTs.`,
      },
    })
    .delete(
      "/v1/projects/:slug/environments/:environment",
      async ({ params, principal, set, status }) => {
        await projects.deleteEnvironment(authorOf({ principal, set }), params.slug, params.environment);
        return status(204);
      },
      {
        access: "environments",
        params: EnvironmentParams,
        detail: {
          tags: ENVIRONMENTS,
          summary: "Delete an environment",
          responses: noContent("Deleted"),
          description:
            "Removes the environment, its flag states, and the API keys bound to it (revoked at once: 401 from the next request on). A project keeps at least one environment: deleting the last one is 409 CONFLICT. Unknown project or environment: 404.",
        },
      },
    );
