import { Elysia } from "elysia";
import type { Database } from "bun:sqlite";
import type { Config } from "../../config";
import { VERSION } from "../../version";
import { Health } from "./model";
import { databaseAnswers } from "./service";

export interface HealthDeps {
  config: Pick<Config, "edition">;
  /** Monotonic start (performance.now()), for uptime. */
  startedAt: number;
  sqlite: Pick<Database, "query">;
}

export const healthRoutes = ({ config, startedAt, sqlite }: HealthDeps) =>
  new Elysia({ name: "flagsvc/health" }).get(
    "/v1/health",
    ({ status }) => {
      const body = {
        version: VERSION,
        edition: config.edition,
        uptimeSeconds: Math.floor((performance.now() - startedAt) / 1000),
      };
      return databaseAnswers(sqlite)
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
