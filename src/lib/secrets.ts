/**
 * Key material. A key is `svc_sk_{scope}_` or `svc_admin_` followed by 32 base62 characters
 * (190 bits). Only its SHA-256 is stored; credentials are looked up by that hash, so the
 * secret is never compared byte by byte and lookup time tells nothing about it.
 */
import { randomBase62 } from "./ids";

export const KEY_RANDOM_LENGTH = 32;
/** How many random characters the displayed `keyPrefix` keeps, after the fixed prefix. */
const SHOWN_RANDOM = 6;

export function sha256Hex(text: string): string {
  return Bun.SHA256.hash(text, "hex");
}

export function generateSecret(prefix: string): { secret: string; hash: string; keyPrefix: string } {
  const secret = prefix + randomBase62(KEY_RANDOM_LENGTH);
  return { secret, hash: sha256Hex(secret), keyPrefix: secret.slice(0, prefix.length + SHOWN_RANDOM) };
}

export function adminKeyParts(secret: string): { hash: string; keyPrefix: string } {
  return { hash: sha256Hex(secret), keyPrefix: secret.slice(0, "svc_admin_".length + SHOWN_RANDOM) };
}

/**
 * Whether a sent value equals a secret, in a time that depends only on their lengths, not on
 * where they differ (a plain `===` stops at the first differing character, and its time tells how
 * much of a guess was right). Lengths are public (the formats above), so another length is
 * refused at once. `crypto.timingSafeEqual` does the same on byte buffers, which would copy the
 * sent value on every request that uses this.
 */
export function sameSecret(sent: string, secret: string): boolean {
  if (sent.length !== secret.length) return false;
  let diff = 0;
  for (let i = 0; i < sent.length; i++) diff |= sent.charCodeAt(i) ^ secret.charCodeAt(i);
  return diff === 0;
}
