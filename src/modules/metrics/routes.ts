/** GET /metrics: the Prometheus text (docs/metrics.md). */
import { Elysia, t } from "elysia";
import type { Config } from "../../config";
import type { Resolution } from "../../http/credentials";
import { ApiError } from "../../http/errors";
import { sameSecret } from "../../lib/secrets";
import type { Metrics } from "./service";

export const METRICS_CREDENTIALS = "GET /metrics takes Authorization: Bearer <SVC_METRICS_TOKEN> or an admin key";

/**
 * Who may scrape: anyone with SVC_METRICS_PUBLIC; else the metrics token (SVC_METRICS_TOKEN,
 * compared in constant time) or an admin key. Login tokens and API keys are refused (403): the
 * metrics span every project. No credential, or one that is not valid: 401.
 */
export function metricsAccess(config: Pick<Config, "metricsToken" | "metricsPublic">, auth: Resolution, authorization: string | null): void {
  if (config.metricsPublic) return;
  const token = config.metricsToken;
  if (token !== undefined && authorization !== null && authorization.startsWith("Bearer ") && sameSecret(authorization.slice(7).trim(), token)) return;
  if (auth.principal === null) {
    const details = authorization === null ? [{ path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" }] : undefined;
    throw new ApiError(401, "UNAUTHORIZED", `Invalid or missing credential: ${METRICS_CREDENTIALS}`, details);
  }
  if (auth.principal.kind !== "adminKey") throw new ApiError(403, "FORBIDDEN", METRICS_CREDENTIALS);
}

export const metricsRoutes = (metrics: Metrics, config: Pick<Config, "metricsToken" | "metricsPublic">) =>
  new Elysia({ name: "flagsvc/metrics" }).get(
    "/metrics",
    async (c) => {
      const { auth } = c as unknown as { auth: Resolution };
      metricsAccess(config, auth, c.request.headers.get("authorization"));
      c.set.headers["content-type"] = metrics.contentType;
      return metrics.scrape();
    },
    {
      response: { 200: t.String({ description: "Prometheus text exposition format 0.0.4" }) },
      detail: {
        tags: ["Operations"],
        summary: "Prometheus metrics",
        description:
          "The Prometheus text format (docs/metrics.md lists every metric and its labels). Access: `Authorization: Bearer <SVC_METRICS_TOKEN>` when that is set, or an admin key; " +
          "with `SVC_METRICS_PUBLIC=true`, no credential. Without a valid credential 401 `UNAUTHORIZED`; a login token or an API key gets 403 `FORBIDDEN` (the metrics span every project). " +
          "Label values are the slugs and keys users know (project and environment slugs, flag keys, variant keys, route templates such as `/v1/projects/:slug/flags/:key`); " +
          "no user id, API key or raw path is ever a label, and a deleted flag's series are gone from the next scrape. Evaluation and request counts are cumulative since the process started.",
      },
    },
  );
