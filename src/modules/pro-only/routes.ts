/**
 * The Integrations API (Pro: decisions §9, §12) is not built yet. What the
 * contract fixes for the Community Edition is: each of its endpoints answers, after the access
 * decision (admin key or admin login, decisions §4), 403 PRO_EDITION_REQUIRED. On Pro these paths
 * are not routed (404) until the API exists. The CE document lists them with that answer.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config";
import { accessGuard } from "../../http/auth";
import { editionGuard, isPro, PRO_ONLY_NOTE } from "../../http/edition";

/** Never runs: on CE the edition guard answers first, and on Pro the routes do not exist. */
const gated = (): never => {
  throw new Error("a Pro-only endpoint that is not built was reached");
};

export const proOnlyRoutes = (config: Pick<Config, "edition">) => {
  const plugin = new Elysia({ name: "flagsvc/pro-only" }).use(accessGuard()).use(editionGuard(config));
  if (isPro(config)) return plugin;
  const gate = (tag: string, summary: string) => ({
    access: "admin" as const,
    edition: "pro" as const,
    detail: { tags: [tag], summary, description: `${PRO_ONLY_NOTE} ${WHO}` },
  });
  // A body schema that takes anything: the edition answers before any body is judged.
  const withBody = (tag: string, summary: string) => ({ ...gate(tag, summary), body: t.Unknown() });
  const integrations = "Integrations (Pro)";
  return plugin
    .get("/v1/integrations/types", gated, gate(integrations, "List integration types and their config schemas"))
    .get("/v1/projects/:slug/integrations", gated, gate(integrations, "List a project's integrations"))
    .post("/v1/projects/:slug/integrations", gated, withBody(integrations, "Configure an integration"))
    .patch("/v1/projects/:slug/integrations/:integrationId", gated, withBody(integrations, "Update an integration"))
    .delete("/v1/projects/:slug/integrations/:integrationId", gated, gate(integrations, "Remove an integration"));
};

const WHO = "Who: admin keys and login JWTs of role admin; any other credential is 403 FORBIDDEN, none 401.";
