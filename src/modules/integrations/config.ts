/**
 * An integration's config against its type's schema (decisions §12): checked with TypeBox (the
 * connectors' schemas are TypeBox objects), then the connector's own rules and its URLs against
 * the outbound setting. Masking and PATCH merging: lib/config-secrets.ts, as for plugins.
 */
import { Value } from "@sinclair/typebox/value";
import type { ErrorDetail } from "../../http/errors";
import { checkUrl, type OutboundPolicy } from "../../lib/outbound";
import type { Connector } from "./connectors/types";

/** The config's URL properties (their schema's pattern is "^https?://"): `apiHost`, Slack's `webhookUrl`. */
function urlKeys(connector: Connector): string[] {
  return Object.entries(connector.configSchema.properties)
    .filter(([, s]) => (s as { pattern?: unknown }).pattern === "^https?://")
    .map(([k]) => k);
}

/**
 * The ways `config` does not match the type's schema, one detail per property
 * (`body.config.<name>`); then the connector's own rules (`check`); then each URL against the
 * outbound setting, as webhook URLs are (a literal address it refuses is refused here).
 */
export function configErrors(connector: Connector, config: Record<string, unknown>, outbound: OutboundPolicy): ErrorDetail[] {
  const details = new Map<string, string>();
  for (const e of Value.Errors(connector.configSchema, config)) {
    const path = `body.config${e.path.replaceAll("/", ".")}`;
    if (!details.has(path)) details.set(path, e.schema.error !== undefined ? String(e.schema.error) : e.message);
  }
  if (details.size === 0) for (const d of connector.check?.(config) ?? []) details.set(`body.config.${d.key}`, d.message);
  for (const key of urlKeys(connector)) {
    const value = config[key];
    if (typeof value !== "string" || details.has(`body.config.${key}`)) continue;
    const problem = checkUrl(value, outbound);
    if (problem) details.set(`body.config.${key}`, problem);
  }
  return [...details].map(([path, message]) => ({ path, message }));
}
