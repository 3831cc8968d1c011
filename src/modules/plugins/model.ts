/** Installed plugins: request and response schemas (api-spec: Plugin, Plugin status; decisions §11). */
import { t } from "elysia";
import { OneOf, ResponseInt, Slug, Timestamp } from "../../http/schema";

export const PLUGIN_STATUSES = ["installing", "active", "error", "disabled"] as const;
export type PluginStatus = (typeof PLUGIN_STATUSES)[number];

/** What a status page keeps of a plugin's `ctx.log` lines. */
export const LOG_LINES = 100;

const Config = (description: string) =>
  t.Record(t.String(), t.Unknown(), { description, error: "Must be a JSON object" });

/** Package names as npm spells them (a scope allowed), at most 214 characters. */
const PackageName = () =>
  t.String({ minLength: 1, maxLength: 214, description: "The catalog package, e.g. @flagsvc/posthog", error: "Must be a package name of at most 214 characters" });

const Version = (description: string) =>
  t.String({ minLength: 1, maxLength: 256, description, error: "Must be a version string, or latest" });

export const PluginParams = t.Object({
  slug: Slug("Project slug"),
  pluginId: t.String({ description: "The plugin's id, plugin_..." }),
});

export const NewPlugin = t.Object(
  {
    packageName: PackageName(),
    version: t.Optional(Version("A catalog version of the package, or `latest` (the default): the highest version, resolved now and stored")),
    config: t.Optional(Config("Checked against the package's configSchema (default {})")),
  },
  { additionalProperties: false },
);

export const PluginPatch = t.Object(
  {
    enabled: t.Optional(t.Boolean({ description: "false: deactivated and freed (status disabled); true: activated again (status installing)", error: "Must be a boolean" })),
    config: t.Optional(Config('Merged into the stored configuration key by key (null removes a key); a secret sent as "********" keeps the stored value')),
    version: t.Optional(Version("Another catalog version of the same package (or `latest`): upgrades or downgrades it")),
  },
  { additionalProperties: false },
);

export const Plugin = t.Object({
  id: t.String({ description: "plugin_..." }),
  packageName: t.String(),
  version: t.String({ description: "The catalog version installed (never `latest`)" }),
  status: OneOf(PLUGIN_STATUSES, { description: "installing, active, error or disabled" }),
  config: t.Record(t.String(), t.Unknown(), { description: 'The configuration; secrets (configSchema properties with "secret": true) as "********"' }),
  errorMessage: t.Union([t.String(), t.Null()], { description: "Why it is in error; null unless status is error" }),
  installedAt: Timestamp(),
  updatedAt: Timestamp(),
});

export const PluginList = t.Object({ plugins: t.Array(Plugin) });

export const PluginLog = t.Object({
  timestamp: Timestamp(),
  level: t.String({ description: "debug, info, warn or error" }),
  message: t.String({ description: "Secrets masked; at most 2,000 characters" }),
});

export const PluginStatusView = t.Object({
  id: t.String(),
  status: OneOf(PLUGIN_STATUSES),
  errorMessage: t.Union([t.String(), t.Null()]),
  node: t.Union([t.String(), t.Null()], {
    description: "The node that runs the plugin: the holder of its lease (the same answer from every node; null while no node holds it, and for a disabled plugin)",
  }),
  logs: t.Array(PluginLog, { description: `The last ${LOG_LINES} ctx.log lines of this run, oldest first (kept in the memory of the node that runs it: a restart begins afresh, and another node shows none)` }),
  stats: t.Object({
    eventsHandled: ResponseInt({ description: "onEvent calls made (stored: survives restarts)" }),
    errors: ResponseInt({ description: "Hook calls that failed" }),
    lastEventAt: t.Union([Timestamp(), t.Null()], { description: "When the last event was handed to it" }),
    evaluationsDropped: ResponseInt({ description: "Evaluation records dropped because the plugin fell behind, or sampled out while the server was saturated (one batch a second)" }),
  }),
});
