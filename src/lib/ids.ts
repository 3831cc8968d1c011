/**
 * Identifiers and secrets: `<prefix>_<random>` with a base62 random part.
 * 22 base62 characters carry 131 bits from the OS CSPRNG (decisions §2: at least 128 bits, URL-safe).
 */
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const ID_RANDOM_LENGTH = 22;

/** `length` uniformly random base62 characters (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2));
    for (const b of bytes) {
      if (b < 248) out += ALPHABET[b % 62]; // 248 = 4 * 62
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix =
  | "proj" | "env" | "flag" | "rule" | "sess" | "key" | "usr"
  | "wh" | "del" | "evt" | "plugin" | "int";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(ID_RANDOM_LENGTH)}`;
}
