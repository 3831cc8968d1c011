/**
 * Configs whose JSON Schema marks secrets (`"secret": true` on a top-level property): plugin
 * packages' `configSchema` and integration types' alike. Masked wherever a config is shown, and
 * a PATCH from a client that only ever saw the masked config merged back safely.
 */
import { SECRET } from "../changes/entry";

/** Anything with a config schema: a plugin manifest, an integration connector. */
export interface WithConfigSchema {
  configSchema: object;
}

/**
 * The top-level config properties marked `"secret": true`, and the keys in `kept` (a plugin's
 * keys once stored as secrets: they stay secret whatever a later version's schema says).
 */
export function secretKeys(owner: WithConfigSchema, kept: readonly string[] = []): string[] {
  const properties = (owner.configSchema as { properties?: unknown }).properties;
  const marked =
    typeof properties !== "object" || properties === null
      ? []
      : Object.entries(properties as Record<string, unknown>)
          .filter(([, s]) => typeof s === "object" && s !== null && (s as { secret?: unknown }).secret === true)
          .map(([k]) => k);
  return kept.length === 0 ? marked : [...new Set([...marked, ...kept])];
}

/** The config as shown anywhere outside its owner: each secret present is "********". */
export function maskConfig(owner: WithConfigSchema, config: Record<string, unknown>, kept: readonly string[] = []): Record<string, unknown> {
  const masked = { ...config };
  for (const k of secretKeys(owner, kept)) if (Object.hasOwn(masked, k)) masked[k] = SECRET;
  return masked;
}

/** The secret values of a config as text (what masking text looks for: see lib/secret-text.ts). */
export function secretValues(owner: WithConfigSchema, config: Record<string, unknown>, kept: readonly string[] = []): string[] {
  return secretKeys(owner, kept)
    .map((k) => config[k])
    .filter((v) => v !== undefined && v !== null && v !== "")
    .map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
}

/**
 * A PATCH's `config` merged into the stored one, key by key: `null` removes a key, a secret sent
 * as "********" keeps the stored value; with none stored it is dropped (a required secret is
 * then reported missing, rather than "********" taken for the secret).
 */
export function patchConfig(owner: WithConfigSchema, stored: Record<string, unknown>, patch: Record<string, unknown>, kept: readonly string[] = []): Record<string, unknown> {
  const secrets = secretKeys(owner, kept);
  const merged: Record<string, unknown> = { ...stored };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete merged[k];
    else if (!(v === SECRET && secrets.includes(k))) merged[k] = v;
  }
  return merged;
}
