/**
 * Integrations (Pro; decisions §12): managed connectors of a project. The API writes what the
 * operator configured, with its change-log entry (secrets masked); the sender (to come) reads
 * the same evaluation-record stream and change queue as plugins do, and keeps `stats`.
 * POST 201; PATCH `{ config?, enabled? }` merges config key by key ("********" keeps a stored
 * secret, `null` removes an optional key) and checks the result against the type's schema;
 * DELETE 204. An unknown type is a 400 (a value of the body), not a 404.
 */
import { diff, noteSecretChange, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { notFound, validationError } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import type { OutboundPolicy } from "../../lib/outbound";
import { newId } from "../../lib/ids";
import { requireProject } from "../projects/service";
import type { ProjectReader } from "../projects/store";
import { maskConfig, patchConfig } from "../../lib/config-secrets";
import { configErrors } from "./config";
import type { Connector } from "./connectors/types";
import type { IntegrationStore, StoredIntegration } from "./store";

export interface IntegrationRecord {
  id: string;
  type: string;
  config: Record<string, unknown>;
  enabled: boolean;
  stats: { sent: number; failed: number; lastError: string | null; lastSentAt: string | null };
  createdAt: string;
  updatedAt: string;
}

export interface IntegrationServiceDeps {
  integrations: IntegrationStore;
  projects: ProjectReader;
  /** The connectors by type. */
  connectors: Readonly<Record<string, Connector>>;
  clock: Clock;
  /** SVC_OUTBOUND_ALLOWED_HOSTS: a URL of a config (apiHost, webhookUrl) it refuses is a 400. */
  outbound: OutboundPolicy;
}

export type IntegrationService = ReturnType<typeof integrationService>;

export function integrationService({ integrations, projects, connectors, clock, outbound }: IntegrationServiceDeps) {
  const connectorOf = (type: string): Connector => {
    const connector = Object.hasOwn(connectors, type) ? connectors[type] : undefined;
    if (!connector) throw validationError("Invalid integration", [{ path: "body.type", message: `Must be one of ${Object.keys(connectors).join(", ")}` }]);
    return connector;
  };
  const recordOf = (i: StoredIntegration): IntegrationRecord => ({
    id: i.id,
    type: i.type,
    config: maskConfig(connectors[i.type]!, i.config),
    enabled: i.enabled,
    stats: { sent: i.sent, failed: i.failed, lastError: i.lastError, lastSentAt: i.lastSentAt },
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
  });
  const fieldsOf = (i: StoredIntegration) => ({ type: i.type, enabled: i.enabled, config: maskConfig(connectors[i.type]!, i.config) });
  const change = (i: StoredIntegration, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft => ({
    project: { id: i.projectId, slug: i.projectSlug },
    environment: null,
    resource: { type: "integration", id: i.id, key: i.type },
    action,
    changes,
  });
  const check = (connector: Connector, config: Record<string, unknown>) => {
    const details = configErrors(connector, config, outbound);
    if (details.length > 0) throw validationError(`Invalid configuration for ${connector.type}`, details);
  };
  const requireIntegration = async (slug: string, integrationId: string) => {
    const project = await requireProject(projects, slug);
    const found = await integrations.find(integrationId);
    if (!found || found.projectId !== project.id) throw notFound(`Integration ${integrationId}`);
    return found;
  };

  return {
    /** GET /v1/integrations/types: each type, its category, description and config schema. */
    types() {
      return Object.values(connectors).map((c) => ({ type: c.type, name: c.name, category: c.category, description: c.description, configSchema: c.configSchema }));
    },

    async list(slug: string): Promise<IntegrationRecord[]> {
      return (await integrations.list((await requireProject(projects, slug)).id)).map(recordOf);
    },

    async get(slug: string, integrationId: string): Promise<IntegrationRecord> {
      return recordOf(await requireIntegration(slug, integrationId));
    },

    async create(author: Author, slug: string, input: { type: string; config: Record<string, unknown>; enabled?: boolean }): Promise<IntegrationRecord> {
      const project = await requireProject(projects, slug);
      const connector = connectorOf(input.type);
      check(connector, input.config);
      const now = iso(clock.now());
      const integration: StoredIntegration = {
        id: newId("int"),
        projectId: project.id,
        projectSlug: project.slug,
        type: connector.type,
        config: input.config,
        enabled: input.enabled ?? true,
        sent: 0,
        failed: 0,
        lastError: null,
        lastSentAt: null,
        createdAt: now,
        updatedAt: now,
      };
      await integrations.create(author, integration, change(integration, "created", whole(fieldsOf(integration), "created")));
      return recordOf(integration);
    },

    async update(author: Author, slug: string, integrationId: string, input: { config?: Record<string, unknown>; enabled?: boolean }): Promise<IntegrationRecord> {
      await requireIntegration(slug, integrationId);
      const updated = await integrations.update(author, integrationId, (current) => {
        if (!current) throw notFound(`Integration ${integrationId}`);
        const connector = connectors[current.type]!;
        const config = input.config === undefined ? current.config : patchConfig(connector, current.config, input.config);
        check(connector, config);
        const configChanged = JSON.stringify(config) !== JSON.stringify(current.config);
        const next: StoredIntegration = {
          ...current,
          config,
          enabled: input.enabled ?? current.enabled,
          // The error was the old config's: a new one starts clean.
          lastError: configChanged ? null : current.lastError,
          updatedAt: iso(clock.now()),
        };
        const [before, after] = [fieldsOf(current), fieldsOf(next)];
        const changes = diff(before, after);
        noteSecretChange(changes, { before: current.config, after: config }, { before: before.config, after: after.config });
        if (Object.keys(changes).length === 0) return { result: current, changes: [] };
        return { result: next, changes: [change(next, "updated", changes)] };
      });
      return recordOf(updated);
    },

    async remove(author: Author, slug: string, integrationId: string): Promise<void> {
      await requireIntegration(slug, integrationId);
      await integrations.remove(author, integrationId, (current) => {
        if (!current) throw notFound(`Integration ${integrationId}`);
        return change(current, "deleted", whole(fieldsOf(current), "deleted"));
      });
    },
  };
}
