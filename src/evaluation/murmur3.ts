/**
 * MurmurHash3 x86 32-bit over the UTF-8 bytes of a string (decisions §7: the bucketing hash,
 * which SDKs evaluating locally must reproduce bit for bit). On the evaluation hot path: an
 * all-ASCII string (the usual userId) is hashed from its char codes, which are its UTF-8
 * bytes, without encoding; anything else is encoded into a reused buffer first.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

const encoder = new TextEncoder();
let scratch = new Uint8Array(256);

export function murmur3(text: string, seed = 0): number {
  const length = text.length;
  for (let i = 0; i < length; i++) {
    if (text.charCodeAt(i) > 0x7f) return hashUtf8(text, seed);
  }
  let h = seed | 0;
  const tail = length & ~3;
  let i = 0;
  for (; i < tail; i += 4) {
    const k =
      text.charCodeAt(i) | (text.charCodeAt(i + 1) << 8) | (text.charCodeAt(i + 2) << 16) | (text.charCodeAt(i + 3) << 24);
    h = mixBlock(h, k);
  }
  const rest = length & 3;
  if (rest !== 0) {
    let k = text.charCodeAt(i);
    if (rest > 1) k |= text.charCodeAt(i + 1) << 8;
    if (rest > 2) k |= text.charCodeAt(i + 2) << 16;
    h ^= Math.imul(rotl(Math.imul(k, C1), 15), C2);
  }
  return finalize(h, length);
}

function hashUtf8(text: string, seed: number): number {
  // A UTF-16 code unit never takes more than 3 UTF-8 bytes (a surrogate pair: 4 for 2 units).
  if (scratch.length < text.length * 3) scratch = new Uint8Array(text.length * 3);
  const bytes = scratch;
  const length = encoder.encodeInto(text, bytes).written;
  let h = seed | 0;
  const tail = length & ~3;
  let i = 0;
  for (; i < tail; i += 4) {
    h = mixBlock(h, bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
  }
  const rest = length & 3;
  if (rest !== 0) {
    let k = bytes[i]!;
    if (rest > 1) k |= bytes[i + 1]! << 8;
    if (rest > 2) k |= bytes[i + 2]! << 16;
    h ^= Math.imul(rotl(Math.imul(k, C1), 15), C2);
  }
  return finalize(h, length);
}

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function mixBlock(h: number, k: number): number {
  h ^= Math.imul(rotl(Math.imul(k, C1), 15), C2);
  return (Math.imul(rotl(h, 13), 5) + 0xe6546b64) | 0;
}

function finalize(h: number, length: number): number {
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
