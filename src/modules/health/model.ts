import { t } from "elysia";
import { OneOf, ResponseInt } from "../../http/schema";
import { PLUGIN_STATUSES } from "../plugins/model";

const Count = (description: string) => ResponseInt({ minimum: 0, description });
const ThreadState = OneOf(["running", "restarting", "in-process"] as const, {
  description: "running; restarting (it ended and its supervisor starts it again); in-process (no thread: tests and tools)",
});

export const HealthDetail = t.Object(
  {
    node: t.String({
      description: "This node's id: its host name and a random part, new at each start. The plugin status endpoint names the node that runs a plugin by this id (docs/scaling.md)",
    }),
    database: t.Object({
      answers: t.Boolean({ description: "The database answers a query" }),
      bytes: Count("The database's size in bytes (SQLite: the file and its write-ahead log)"),
      lag: Count("Change-log positions committed by other nodes that this node has not applied yet (PostgreSQL with several nodes; 0 on SQLite, the only writer)"),
    }),
    threads: t.Object({
      background: ThreadState,
      integrations: ThreadState,
    }),
    pluginHost: t.Object({
      workers: Count("Plugins running in a worker now"),
      plugins: t.Object(Object.fromEntries(PLUGIN_STATUSES.map((s) => [s, Count(`Installed plugins in status ${s}`)])) as Record<(typeof PLUGIN_STATUSES)[number], ReturnType<typeof Count>>),
    }),
    queues: t.Object({
      webhookDeliveries: Count("Webhook deliveries waiting for an attempt"),
      changeEvents: Count("Change events queued for plugins and integrations"),
      schedulesPending: Count("Scheduled changes not applied yet"),
    }),
  },
  { description: "With an admin key (or an admin's login token) only" },
);

export const Health = t.Object(
  {
    status: t.Union([t.Literal("ok"), t.Literal("unavailable")]),
    version: t.String(),
    edition: t.Union([t.Literal("ce"), t.Literal("pro")]),
    uptimeSeconds: ResponseInt({ minimum: 0 }),
    message: t.Optional(t.String({ description: "Why the service is unavailable (503 only)" })),
    detail: t.Optional(HealthDetail),
  },
  { title: "Health" },
);

export const Probe = t.Object({ status: t.Union([t.Literal("ok"), t.Literal("ready"), t.Literal("unavailable")]) }, { title: "Probe" });
