/** Integrations (Pro): routes (api-spec: Integrations; decisions §4, §9, §12). */
import { Elysia } from "elysia";
import type { Config } from "../../config";
import { accessGuard, authorOf } from "../../http/auth";
import { editionGuard, PRO_ONLY_NOTE } from "../../http/edition";
import { noContent } from "../../http/schema";
import { ProjectParams } from "../projects/model";
import { Integration, IntegrationList, IntegrationParams, IntegrationPatch, IntegrationTypes, NewIntegration } from "./model";
import type { IntegrationService } from "./service";

const TAGS = ["Integrations (Pro)"];
const WHO = "Who: admin keys and login JWTs of role admin; any other credential is 403 FORBIDDEN, none 401.";
const RECORD =
  'The record: `{ id, type, config, enabled, stats: { sent, failed, lastError, lastSentAt }, createdAt, updatedAt }`; `config` with every secret as "********"; `stats.sent` counts events the vendor accepted (not requests), `failed` events it refused, given up after retries, or dropped while it could not keep up (at most 20,000 evaluations wait; while the server is saturated, its request thread on a CPU 80 % of the time or more, a project\'s integrations get one batch of up to 500 evaluations a second, the rest counted here); `lastError` starts `bad credentials:` when the vendor refused them (the integration then pauses, 1 to 15 minutes, until a config change).';
const SENDING =
  "Sending (on a thread of its own at the lowest CPU priority, never on a request): evaluations batched to the vendor's limits, flag changes from a durable queue at least once across restarts; 408, 429 (Retry-After) and 5xx retried with exponential backoff and jitter; at most 4 requests in flight (Slack 1). See docs/integrations.md.";
const URLS = "A URL of the config (`apiHost`, Slack's `webhookUrl`) that SVC_OUTBOUND_ALLOWED_HOSTS refuses (a literal address) is 400 at its key.";
const AUDIT = "Recorded in the audit log as resource `integration` (key: its type), secrets masked.";
const UNKNOWN = "Unknown project or integration 404 (another project's integration is unknown here).";

export const integrationsRoutes = (integrations: IntegrationService, config: Pick<Config, "edition">) =>
  new Elysia({ name: "flagsvc/integrations" })
    .use(accessGuard())
    .use(editionGuard(config))
    .get("/v1/integrations/types", () => ({ types: integrations.types() }), {
      access: "admin",
      edition: "pro",
      response: { 200: IntegrationTypes },
      detail: { tags: TAGS, summary: "List integration types and their config schemas", description: `Each type with its category, a description and the JSON Schema of its config (required fields, secrets marked \`secret: true\`, defaults, an optional \`apiHost\`: a base URL with scheme, default the vendor's public API). ${PRO_ONLY_NOTE} ${WHO}` },
    })
    .get("/v1/projects/:slug/integrations", async ({ params }) => ({ integrations: await integrations.list(params.slug) }), {
      access: "admin",
      edition: "pro",
      params: ProjectParams,
      response: { 200: IntegrationList },
      detail: { tags: TAGS, summary: "List a project's integrations", description: `Oldest first. ${RECORD} Unknown project 404. ${PRO_ONLY_NOTE} ${WHO}` },
    })
    .post("/v1/projects/:slug/integrations", async ({ params, body, principal, set, status }) => status(201, await integrations.create(authorOf({ principal, set }), params.slug, body)), {
      access: "admin",
      edition: "pro",
      params: ProjectParams,
      body: NewIntegration,
      response: { 201: Integration },
      detail: { tags: TAGS, summary: "Configure an integration", description: `\`type\` one of GET /v1/integrations/types (another value is 400 at \`body.type\`); \`config\` checked against its schema (400 with one detail per property, e.g. \`body.config.projectToken\`); \`enabled\` default true. ${URLS} ${RECORD} ${SENDING} ${AUDIT} ${PRO_ONLY_NOTE} ${WHO}` },
    })
    .get("/v1/projects/:slug/integrations/:integrationId", ({ params }) => integrations.get(params.slug, params.integrationId), {
      access: "admin",
      edition: "pro",
      params: IntegrationParams,
      response: { 200: Integration },
      detail: { tags: TAGS, summary: "Get an integration", description: `${RECORD} ${UNKNOWN} ${PRO_ONLY_NOTE} ${WHO}` },
    })
    .patch("/v1/projects/:slug/integrations/:integrationId", ({ params, body, principal, set }) => integrations.update(authorOf({ principal, set }), params.slug, params.integrationId, body), {
      access: "admin",
      edition: "pro",
      params: IntegrationParams,
      body: IntegrationPatch,
      response: { 200: Integration },
      detail: { tags: TAGS, summary: "Update an integration", description: `\`{ config?, enabled? }\`: \`config\` merged into the stored one key by key (\`null\` removes an optional key; a secret sent as "********" keeps the stored value), the result checked against the type's schema (400 with details). A changed config clears \`lastError\` and restarts sending with it; \`enabled: false\` stops sending at once (requests in flight aborted); enabled again, it sends the changes made from then on. A PATCH that changes nothing leaves \`updatedAt\` alone. ${URLS} ${RECORD} ${AUDIT} ${UNKNOWN} ${PRO_ONLY_NOTE} ${WHO}` },
    })
    .delete(
      "/v1/projects/:slug/integrations/:integrationId",
      async ({ params, principal, set, status }) => {
        await integrations.remove(authorOf({ principal, set }), params.slug, params.integrationId);
        return status(204);
      },
      {
        access: "admin",
        edition: "pro",
        params: IntegrationParams,
        detail: { tags: TAGS, summary: "Remove an integration", responses: noContent("Removed: nothing more is sent"), description: `${AUDIT} ${UNKNOWN} ${PRO_ONLY_NOTE} ${WHO}` },
      },
    );
