/**
 * An integration's config against its type's schema (decisions §12): checked with TypeBox (the
 * connectors' schemas are TypeBox objects), then the connector's own rules and its URLs against
 * the outbound setting. Masking and PATCH merging: lib/config-secrets.ts, as for plugins.
 */
import { Value } from "@sinclair/typebox/value";
import { describe, unknownConfigField, type ErrorDetail } from "../../http/errors";
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
 * (`body.config.<name>`: `Required`, `Unknown field; known: ...`, `Must be one of ...` for a
 * choice, the schema's own message otherwise); then the connector's own rules (`check`); then each URL against the
 * outbound setting, as webhook URLs are (a literal address it refuses is refused here).
 */
export function configErrors(connector: Connector, config: Record<string, unknown>, outbound: OutboundPolicy): ErrorDetail[] {
  const details = new Map<string, string>();
  const known = Object.keys(connector.configSchema.properties);
  for (const e of Value.Errors(connector.configSchema, config)) {
    const path = `body.config${e.path.replaceAll("/", ".")}`;
    // As request bodies are told (errors.ts), and an unknown key is told the keys the type takes.
    if (!details.has(path)) details.set(path, e.message === "Unexpected property" && e.schema === connector.configSchema ? unknownConfigField(known) : describe(e));
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
