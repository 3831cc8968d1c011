/**
 * Text folded for a case-insensitive comparison: each character on its own lower-cased,
 * upper-cased and lower-cased again. Unlike lower-casing the whole string, it folds the variants
 * of a letter together (ς and Σ to σ, ſ to s, µ to μ, ß and ẞ to ss) and applies no rule that
 * depends on the neighbouring letters (a word-final Σ would lower-case to ς, and a search for Σ
 * would miss it).
 */
export function foldCase(text: string): string {
  if (ASCII.test(text)) return text.toLowerCase();
  let folded = "";
  for (const ch of text) folded += ch.toLowerCase().toUpperCase().toLowerCase();
  return folded;
}

const ASCII = /^[\x00-\x7f]*$/;
