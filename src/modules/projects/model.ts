/** Projects and environments: request and response schemas. */
import { t } from "elysia";
import { BodyInt, ResponseInt, Slug, Timestamp } from "../../http/schema";

export const NAME_MAX = 200;
export const STALE_AFTER_DAYS_DEFAULT = 30;
export const STALE_AFTER_DAYS_MIN = 1;
export const STALE_AFTER_DAYS_MAX = 365;
/** How many environments `POST /v1/projects` accepts at once. */
export const MAX_ENVIRONMENTS_ON_CREATE = 50;

export const Name = () =>
  t.String({ minLength: 1, maxLength: NAME_MAX, error: `Must be a string of 1 to ${NAME_MAX} characters` });


export const Environment = t.Object(
  {
    id: t.String({ description: "env_..." }),
    slug: t.String(),
    name: t.String(),
    createdAt: Timestamp("ISO 8601 UTC with milliseconds"),
  },
  { title: "Environment" },
);

export const Project = t.Object(
  {
    id: t.String({ description: "proj_..." }),
    slug: t.String(),
    name: t.String(),
    environments: t.Array(Environment, { description: "In the order they were added" }),
    staleAfterDays: ResponseInt({ description: "Days after which a flag not evaluated, or serving one value to everyone unchanged, is stale (docs/insights.md); default 30" }),
    createdAt: Timestamp("ISO 8601 UTC with milliseconds"),
    updatedAt: Timestamp("Changes when the project's own fields change"),
  },
  { title: "Project" },
);

export const ProjectList = t.Object({ projects: t.Array(Project) }, { title: "ProjectList" });
export const EnvironmentList = t.Object({ environments: t.Array(Environment) }, { title: "EnvironmentList" });

export const NewEnvironment = t.Object(
  { slug: Slug("Environment slug: kebab-case, 1 to 64 characters, unique in the project"), name: Name() },
  { additionalProperties: false, title: "NewEnvironment" },
);

export const NewProject = t.Object(
  {
    slug: Slug("Project slug: kebab-case, 1 to 64 characters, unique, immutable"),
    name: Name(),
    environments: t.Optional(
      t.Array(NewEnvironment, {
        minItems: 1,
        maxItems: MAX_ENVIRONMENTS_ON_CREATE,
        description: `1 to ${MAX_ENVIRONMENTS_ON_CREATE} environments with distinct slugs; omitted: development, staging, production`,
      }),
    ),
  },
  { additionalProperties: false, title: "NewProject" },
);

export const ProjectPatch = t.Object(
  {
    name: t.Optional(Name()),
    staleAfterDays: t.Optional(
      BodyInt({
        minimum: STALE_AFTER_DAYS_MIN,
        maximum: STALE_AFTER_DAYS_MAX,
        description: `${STALE_AFTER_DAYS_MIN} to ${STALE_AFTER_DAYS_MAX}: days without a production evaluation, or serving one value to everyone unchanged, after which a flag of the project is stale`,
        error: `Must be an integer from ${STALE_AFTER_DAYS_MIN} to ${STALE_AFTER_DAYS_MAX}`,
      }),
    ),
  },
  { additionalProperties: false, title: "ProjectPatch" },
);

export const EnvironmentPatch = t.Object(
  {
    // Named so that the 400 says why instead of "Unknown field".
    slug: t.Optional(t.Never({ error: "The slug of an environment cannot be changed" })),
    name: t.Optional(Name()),
  },
  { additionalProperties: false, title: "EnvironmentPatch" },
);

/** Path slugs have the shape of decisions §2: a malformed one is 400 (decisions §3), an unknown one 404. */
export const ProjectParams = t.Object({ slug: Slug("Project slug") });
export const EnvironmentParams = t.Object({ slug: Slug("Project slug"), environment: Slug("Environment slug") });
