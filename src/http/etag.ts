/**
 * Entity tags (RFC 9110 §8.8.3, §13.1.1-2): strong ETags of records, `If-Match` (edit conflicts:
 * docs/decisions.md, "Live audit log and edit conflicts") and `If-None-Match` (a GET answered 304).
 */
import { createHash } from "node:crypto";
import { validationError } from "./errors";

/** A strong ETag of a value: a hash of its JSON (two equal values have the same tag). */
export const strongEtag = (value: unknown): string => `"${createHash("sha256").update(JSON.stringify(value)).digest("base64url").slice(0, 27)}"`;

/** Whether an `If-None-Match` value names `etag` (`*`, or a list; compared weakly, as RFC 9110 says for this header). */
export function noneMatch(header: string | null, etag: string): boolean {
  if (header === null) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag);
}

/** An entity tag as RFC 9110 writes it: optionally `W/`, then a quoted string of etagc characters. */
const TAG = '(?:W/)?"[\\x21\\x23-\\x7e\\x80-\\xff]*"';
const IF_MATCH = new RegExp(`^\\s*(?:\\*|${TAG}(?:\\s*,\\s*${TAG})*)\\s*$`);

/** An `If-Match` read: `*` (any current version) or the strong tags it lists (weak ones never match). */
export type IfMatch = "*" | readonly string[];

export const IF_MATCH_PATH = "headers.if-match";

/** `If-Match` of a request: null when absent; a 400 at `headers.if-match` when it is no list of entity tags. */
export function ifMatchOf(header: string | null | undefined): IfMatch | null {
  if (header === null || header === undefined) return null;
  if (!IF_MATCH.test(header)) {
    throw validationError("Invalid request", [{ path: IF_MATCH_PATH, message: 'Must be an ETag of this resource as answered (a quoted string such as "abc..."), a comma-separated list of them, or *' }]);
  }
  if (header.trim() === "*") return "*";
  return (header.match(new RegExp(TAG, "g")) ?? []).filter((t) => !t.startsWith("W/"));
}

/** Whether the current `etag` satisfies `If-Match` (strong comparison). */
export const matches = (condition: IfMatch, etag: string): boolean => condition === "*" || condition.includes(etag);

type Headers = { headers: Record<string, unknown> };

/** A write's answer with the record's new ETag. */
export function withEtag<T>(set: Headers, body: T, etag: string): T {
  set.headers.etag = etag;
  return body;
}

/** A GET's answer with its ETag; 304 with no body when `If-None-Match` names it. */
export function tagged<T>(request: Request, set: Headers, body: T, etag: string): T {
  set.headers.etag = etag;
  // A Response of its own (no body, the headers set here added by the pipeline): no schema describes "nothing".
  return noneMatch(request.headers.get("if-none-match"), etag) ? (new Response(null, { status: 304 }) as never) : body;
}

/** The API document's If-Match and If-None-Match headers, and the answers they add. */
export const IF_MATCH_DOC = {
  in: "header" as const,
  name: "If-Match",
  required: false,
  description: "The ETag of the version the change was made on (as a GET or the last write answered it): when it is no longer the current one, 412 PRECONDITION_FAILED and nothing is written. Without it, the write applies to whatever is current",
  schema: { type: "string" as const },
};
export const IF_NONE_MATCH_DOC = {
  in: "header" as const,
  name: "If-None-Match",
  required: false,
  description: "An ETag of an earlier answer (or a list, or `*`): 304 with no body when it is the current one",
  schema: { type: "string" as const },
};
export const PRECONDITION_RESPONSES = {
  412: { description: "PRECONDITION_FAILED: If-Match names no current version; the message says who changed it, when and which fields; the ETag header holds the current version; nothing written" },
};
export const NOT_MODIFIED_RESPONSES = { 304: { description: "If-None-Match names the current ETag; no body" } };

/** What a write route's API document says of If-Match. */
export const EDIT_CONFLICTS =
  "Edit conflicts (docs/decisions.md): with `If-Match: <ETag>` the write is made only if that is still the current version, checked in the write's own transaction; otherwise 412 PRECONDITION_FAILED naming who changed it, when and which fields (from the change log), with the current `ETag`, and nothing is written. A malformed If-Match is a 400 at `headers.if-match`. Without If-Match the write applies to whatever is current, as before.";
