/** Installed plugins: routes (api-spec: Plugins; decisions §11). Community Edition and Pro alike. */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent } from "../../http/schema";
import { ProjectParams } from "../projects/model";
import { LOG_LINES, NewPlugin, Plugin, PluginList, PluginParams, PluginPatch, PluginStatusView } from "./model";
import type { PluginService } from "./service";

const TAGS = ["Plugins"];
const WHO = "Who: admin keys and login JWTs of role admin; any other credential is 403 FORBIDDEN, none 401.";
const RECORD =
  'The record: `{ id, packageName, version, status, config, errorMessage, installedAt, updatedAt }`; `config` with every secret (a configSchema property marked `"secret": true`) as "********"; `errorMessage` null unless status is error.';
const LIFECYCLE =
  "Status: installing -> active (activate succeeded) or error (activate failed); active -> error on a crash, a cap hit (memory SVC_PLUGIN_MEMORY_MB, CPU slice), or 3 failing hook calls in a row (a throw, or over 5 s); PATCH { enabled: false } -> disabled; PATCH { enabled: true } or a new config or version -> installing. Plugins that were enabled and not in error are activated again when the server starts.";
const AUDIT = "Recorded in the audit log as resource `plugin` (key: the package name), secrets as \"********\"; status changes made by the host (active, error) are runtime state, shown by the status endpoint, not entries.";
const UNKNOWN = "Unknown project or plugin 404 (a plugin of another project is unknown here).";

export const pluginsRoutes = (plugins: PluginService) =>
  new Elysia({ name: "flagsvc/plugins" })
    .use(accessGuard())
    .get("/v1/projects/:slug/plugins", async ({ params }) => ({ plugins: await plugins.list(params.slug) }), {
      access: "admin",
      params: ProjectParams,
      response: { 200: PluginList },
      detail: { tags: TAGS, summary: "List a project's plugins", description: `Oldest first. ${RECORD} Unknown project 404. ${WHO}` },
    })
    .post("/v1/projects/:slug/plugins", async ({ params, body, principal, set, status }) => status(201, await plugins.install(authorOf({ principal, set }), params.slug, body)), {
      access: "admin",
      params: ProjectParams,
      body: NewPlugin,
      response: { 201: Plugin },
      detail: {
        tags: TAGS,
        summary: "Install a plugin from the catalog",
        description: `\`packageName\` a package of the catalog (first-party ones and those in DATA_DIR/marketplace/), \`version\` one of its versions or \`latest\` (default; resolved now, the record holds the version), \`config\` checked against the package's configSchema (400 VALIDATION_ERROR with one detail per property, e.g. \`body.config.apiKey\`). Unknown package or version 404. Answers 201 at once with status \`installing\`: the plugin is activated off the request, in its own worker; poll GET .../status. Each install counts in the marketplace's \`downloads\`. It receives the events of changes committed from now on. ${RECORD} ${LIFECYCLE} ${AUDIT} ${WHO}`,
      },
    })
    .get("/v1/projects/:slug/plugins/:pluginId", ({ params }) => plugins.get(params.slug, params.pluginId), {
      access: "admin",
      params: PluginParams,
      response: { 200: Plugin },
      detail: { tags: TAGS, summary: "Get a plugin", description: `${RECORD} ${UNKNOWN} ${WHO}` },
    })
    .patch("/v1/projects/:slug/plugins/:pluginId", ({ params, body, principal, set }) => plugins.update(authorOf({ principal, set }), params.slug, params.pluginId, body), {
      access: "admin",
      params: PluginParams,
      body: PluginPatch,
      response: { 200: Plugin },
      detail: {
        tags: TAGS,
        summary: "Update a plugin: configuration, enabled, version",
        description: `Any of \`config\` (merged into the stored one key by key; null removes a key; a secret sent as "********" keeps the stored value; the result is checked against the configSchema, 400 with details), \`enabled\`, \`version\` (another catalog version of the package, or \`latest\`: an upgrade or a downgrade; the configuration is checked against that version's schema; unknown version 404; a key stored as a secret stays masked under the new version even when its schema no longer marks it \`"secret": true\`: the change goes through and the value is never shown again, rather than the change being refused until it is entered again). A new configuration or version restarts the plugin (status installing; deactivate is called on the old instance) and turns a disabled one on again unless \`enabled: false\` is sent with it; its event feed goes on from where it was. \`enabled: true\` on a disabled or errored plugin activates it again; events committed while it was off are not handed to it. A PATCH that changes nothing leaves the plugin and \`updatedAt\` alone. ${RECORD} ${LIFECYCLE} ${AUDIT} ${UNKNOWN} ${WHO}`,
      },
    })
    .delete(
      "/v1/projects/:slug/plugins/:pluginId",
      async ({ params, principal, set, status }) => {
        await plugins.remove(authorOf({ principal, set }), params.slug, params.pluginId);
        return status(204);
      },
      {
        access: "admin",
        params: PluginParams,
        detail: {
          tags: TAGS,
          summary: "Uninstall a plugin",
          responses: noContent("Removed: deactivate was called (5 s at most) and its instance freed"),
          description: `${AUDIT} ${UNKNOWN} ${WHO}`,
        },
      },
    )
    .get("/v1/projects/:slug/plugins/:pluginId/status", ({ params }) => plugins.status(params.slug, params.pluginId), {
      access: "admin",
      params: PluginParams,
      response: { 200: PluginStatusView },
      detail: {
        tags: TAGS,
        summary: "A plugin's status, recent logs and counters",
        description: `\`{ id, status, errorMessage, node, logs: [{ timestamp, level, message }] (the last ${LOG_LINES} ctx.log lines of the running instance, oldest first, secrets masked; log lines over the rate limit are dropped and counted in one warn line), stats: { eventsHandled, errors, lastEventAt, evaluationsDropped } }\`. With several nodes a plugin runs on one of them, the holder of its lease: \`node\` names it (null while none holds it); \`status\` and \`stats\` are stored and read the same from every node; \`logs\` are kept in the memory of the node that runs the plugin, so another node answers an empty list (ask that node). \`errors\` counts failed hook calls; \`evaluationsDropped\` evaluation records not handed over because the plugin fell behind (evaluation never waits for a plugin), or because the server was saturated: while the request thread is on a CPU 80 % of the time or more, a plugin gets at most one batch (up to 500 records) a second. ${LIFECYCLE} ${UNKNOWN} ${WHO}`,
      },
    });
