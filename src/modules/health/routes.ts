import { Elysia } from "elysia";
import type { Config } from "../../config";
import { decide } from "../../http/access";
import type { Resolution } from "../../http/credentials";
import { VERSION } from "../../version";
import { Health, Probe } from "./model";
import { healthDetail, type DatabaseHealth, type HealthDetailDeps, type Readiness } from "./service";

export interface HealthDeps {
  config: Pick<Config, "edition">;
  /** Monotonic start (performance.now()), for uptime. */
  startedAt: number;
  database: Pick<DatabaseHealth, "answers">;
  readiness: Readiness;
  detail: HealthDetailDeps;
}

const TAGS = ["Operations"];

export const healthRoutes = ({ config, startedAt, database, readiness, detail }: HealthDeps) =>
  new Elysia({ name: "flagsvc/health" })
    .get(
      "/v1/health",
      async (c) => {
        const body = {
          version: VERSION,
          edition: config.edition,
          uptimeSeconds: Math.floor((performance.now() - startedAt) / 1000),
        };
        const { auth } = c as unknown as { auth: Resolution };
        // The detail is read from the database: left out while it does not answer (or stops answering meanwhile).
        const answers = await database.answers();
        const more = answers && decide(auth.principal, "admin", "GET").allow ? await healthDetail(detail).then((d) => ({ detail: d }), () => null) : {};
        return answers && more !== null
          ? c.status(200, { status: "ok" as const, ...body, ...more })
          : c.status(503, { status: "unavailable" as const, ...body, message: "The database does not answer" });
      },
      {
        response: { 200: Health, 503: Health },
        detail: {
          tags: TAGS,
          summary: "Health",
          description:
            "No credential. 200 when the database answers a query, 503 otherwise. Suitable for load-balancer and container health checks (for orchestrators, see `/livez` and `/readyz`). " +
            "With an admin key (or an admin's login token) the answer adds `detail`: the database (answers, bytes with its write-ahead log), the background and integrations threads " +
            "(`running`, `restarting`, or `in-process` when there is none), the plugin host (plugins running in a worker, installed plugins by status) and queue depths " +
            "(webhook deliveries waiting, change events queued for plugins and integrations, scheduled changes pending). Any other credential, or an invalid one, gets the answer without it. The detail is read from the database: a 503 never has it.",
        },
      },
    )
    .get("/livez", () => ({ status: "ok" as const }), {
      response: { 200: Probe },
      detail: {
        tags: TAGS,
        summary: "Liveness (orchestrators)",
        description: "No credential. 200 `{\"status\":\"ok\"}` while the process serves requests, draining included; it reveals nothing else. A liveness probe: restart the instance when it fails.",
      },
    })
    // Not the database: a node serves evaluation from memory through a database outage (docs/scaling.md), and a
    // probe that asked it would take every node of a cluster out of the pool at once. /v1/health reports it.
    .get("/readyz", ({ status }) => (readiness.ready ? status(200, { status: "ready" as const }) : status(503, { status: "unavailable" as const })), {
      response: { 200: Probe, 503: Probe },
      detail: {
        tags: TAGS,
        summary: "Readiness (orchestrators)",
        description:
          "No credential. 200 `{\"status\":\"ready\"}` once the database is migrated, the flag snapshot loaded and the listener up; 503 `{\"status\":\"unavailable\"}` before that " +
          "and from the moment the process is asked to stop (SIGTERM, SIGINT): it keeps serving for `SVC_SHUTDOWN_DELAY_SECONDS` (default 0) " +
          "with 503 here, so that load balancers stop sending, then drains in-flight requests and stops. It does not ask the database: a node whose database stops answering " +
          "keeps evaluating from memory and stays ready (`/v1/health` answers 503 then). It reveals nothing else.",
      },
    });
