/**
 * The Integrations and Marketplace APIs (Pro: decisions §9, §11, §12) are not built yet. What the
 * contract fixes for the Community Edition is: each of their endpoints answers, after the access
 * decision (admin key or admin login, decisions §4), 403 PRO_EDITION_REQUIRED. On Pro these paths
 * are not routed (404) until the APIs exist. Hidden from the API document meanwhile.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { accessGuard } from "../../http/auth";
import { editionGuard, isPro } from "../../http/edition";

/** Never runs: on CE the edition guard answers first, and on Pro the routes do not exist. */
const gated = (): never => {
  throw new Error("a Pro-only endpoint that is not built was reached");
};

export const proOnlyRoutes = (ctx: AppContext) => {
  const plugin = new Elysia({ name: "flagsvc/pro-only" }).use(accessGuard()).use(editionGuard(ctx.config));
  if (isPro(ctx.config)) return plugin;
  const gate = { access: "admin", edition: "pro", detail: { hide: true } } as const;
  // A body schema that takes anything: the edition answers before any body is judged.
  const withBody = { ...gate, body: t.Unknown() };
  return plugin
    .get("/v1/integrations/types", gated, gate)
    .get("/v1/projects/:slug/integrations", gated, gate)
    .post("/v1/projects/:slug/integrations", gated, withBody)
    .patch("/v1/projects/:slug/integrations/:integrationId", gated, withBody)
    .delete("/v1/projects/:slug/integrations/:integrationId", gated, gate)
    .get("/v1/marketplace/plugins", gated, gate)
    .get("/v1/marketplace/plugins/:packageName", gated, gate)
    .get("/v1/marketplace/plugins/:packageName/versions", gated, gate);
};
