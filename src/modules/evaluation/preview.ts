/**
 * Evaluation as a reader of a project's flags (the console's playground; docs/decisions.md,
 * Evaluate as a reader): the environment comes from the path, the answer from the same engine
 * and snapshot call as the evaluation routes', neither counted nor recorded.
 */
import { requireEnvironment, requireProject } from "../projects/service";
import type { ProjectReader } from "../projects/store";
import type { BatchRequest, EvaluateRequest } from "./model";
import type { EvaluationService, EvaluationTarget } from "./service";

export interface PreviewDeps {
  evaluation: Pick<EvaluationService, "previewOne" | "previewBatch">;
  projects: ProjectReader;
}

export function previewService({ evaluation, projects }: PreviewDeps) {
  /** The project's environment, or 404 NOT_FOUND (an unknown project or environment). */
  const target = async (slug: string, envSlug: string): Promise<EvaluationTarget> => {
    const project = await requireProject(projects, slug);
    const env = requireEnvironment(project, envSlug);
    return { projectId: project.id, environmentId: env.id, environmentSlug: env.slug };
  };
  return {
    one: async (slug: string, envSlug: string, body: EvaluateRequest, sessionToken: string | null) => evaluation.previewOne(await target(slug, envSlug), body, sessionToken),
    batch: async (slug: string, envSlug: string, body: BatchRequest, sessionToken: string | null) => evaluation.previewBatch(await target(slug, envSlug), body, sessionToken),
  };
}

export type PreviewService = ReturnType<typeof previewService>;
