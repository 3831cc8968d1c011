/**
 * Masking secret config values in text that leaves a plugin (log lines, error messages). Its own
 * small module: every plugin worker loads it, and must not load the package checks (ajv).
 */
import { SECRET } from "../changes/entry";

/** `text` with every secret value replaced by "********"; `secrets` as `secretValues` (manifest.ts) gives them: longest first, none empty. */
export function maskSecrets(text: string, secrets: readonly string[]): string {
  for (const secret of secrets) text = text.replaceAll(secret, SECRET);
  return text;
}
