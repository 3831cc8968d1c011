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

/** The top-level config properties marked `"secret": true`. */
export function secretKeys(owner: WithConfigSchema): string[] {
  const properties = (owner.configSchema as { properties?: unknown }).properties;
  if (typeof properties !== "object" || properties === null) return [];
  return Object.entries(properties as Record<string, unknown>)
    .filter(([, s]) => typeof s === "object" && s !== null && (s as { secret?: unknown }).secret === true)
    .map(([k]) => k);
}

/** The config as shown anywhere outside its owner: each secret present is "********". */
export function maskConfig(owner: WithConfigSchema, config: Record<string, unknown>): Record<string, unknown> {
  const masked = { ...config };
  for (const k of secretKeys(owner)) if (Object.hasOwn(masked, k)) masked[k] = SECRET;
  return masked;
}

/**
 * A PATCH's `config` merged into the stored one, key by key: `null` removes a key, a secret sent
 * as "********" keeps the stored value; with none stored it is dropped (a required secret is
 * then reported missing, rather than "********" taken for the secret).
 */
export function patchConfig(owner: WithConfigSchema, stored: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const secrets = secretKeys(owner);
  const merged: Record<string, unknown> = { ...stored };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete merged[k];
    else if (!(v === SECRET && secrets.includes(k))) merged[k] = v;
  }
  return merged;
}
