/** Integrations (Pro): request and response schemas (api-spec: Integration; decisions §12). */
import { t } from "elysia";
import { ResponseInt, Slug, Timestamp } from "../../http/schema";

const Config = (description: string) => t.Record(t.String(), t.Unknown(), { description, error: "Must be a JSON object" });

export const IntegrationParams = t.Object({
  slug: Slug("Project slug"),
  integrationId: t.String({ description: "The integration's id, int_..." }),
});

export const NewIntegration = t.Object(
  {
    type: t.String({ minLength: 1, maxLength: 64, description: "One of the types of GET /v1/integrations/types", error: "Must be an integration type" }),
    config: Config("Checked against the type's config schema"),
    enabled: t.Optional(t.Boolean({ description: "Default true", error: "Must be a boolean" })),
  },
  { additionalProperties: false },
);

export const IntegrationPatch = t.Object(
  {
    config: t.Optional(Config('Merged into the stored one key by key: `null` removes an optional key, a secret sent as "********" keeps the stored value')),
    enabled: t.Optional(t.Boolean({ description: "false: nothing more is sent from now on", error: "Must be a boolean" })),
  },
  { additionalProperties: false },
);

export const Integration = t.Object({
  id: t.String({ description: "int_..." }),
  type: t.String(),
  config: t.Record(t.String(), t.Unknown(), { description: 'Secrets as "********"' }),
  enabled: t.Boolean(),
  stats: t.Object({
    sent: ResponseInt({ description: "Events the vendor accepted" }),
    failed: ResponseInt({ description: "Events the vendor refused for good, or that could not be sent" }),
    lastError: t.Union([t.String(), t.Null()]),
    lastSentAt: t.Union([Timestamp(), t.Null()]),
  }),
  createdAt: Timestamp(),
  updatedAt: Timestamp(),
});

export const IntegrationList = t.Object({ integrations: t.Array(Integration) });

export const IntegrationTypes = t.Object({
  types: t.Array(
    t.Object({
      type: t.String(),
      name: t.String(),
      category: t.String({ description: "analytics, cdp, crm, monitoring or notifications" }),
      description: t.String(),
      configSchema: t.Unknown({ description: "JSON Schema of the config; secrets marked `secret: true`" }),
    }),
  ),
});
