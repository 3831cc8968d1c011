import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { VERSION } from "../../version";
import { Health } from "./model";
import { databaseAnswers } from "./service";

export const healthRoutes = (ctx: AppContext) =>
  new Elysia({ name: "flagsvc/health" }).get(
    "/v1/health",
    ({ status }) => {
      const body = {
        version: VERSION,
        edition: ctx.config.edition,
        uptimeSeconds: Math.floor((performance.now() - ctx.startedAt) / 1000),
      };
      return databaseAnswers(ctx)
        ? status(200, { status: "ok" as const, ...body })
        : status(503, { status: "unavailable" as const, ...body, message: "The database does not answer" });
    },
    {
      response: { 200: Health, 503: Health },
      detail: {
        tags: ["Operations"],
        summary: "Liveness and readiness",
        description:
          "No credential. 200 when the database answers a query, 503 otherwise. Suitable for load-balancer and container health checks.",
      },
    },
  );
