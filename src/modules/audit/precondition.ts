/**
 * Edit conflicts (docs/decisions.md, "Live audit log and edit conflicts"): a write sent with `If-Match` checks, in
 * its own transaction, that the record is still the version the client loaded. When it is not,
 * the write is rolled back and answered 412 PRECONDITION_FAILED, with a message read from the
 * change log: who changed the record, when, and which fields.
 */
import type { ChangeEntry, ResourceType } from "../../changes/entry";
import { ApiError } from "../../http/errors";
import { IF_MATCH_PATH, matches, type IfMatch } from "../../http/etag";

/** A resource as the change log names it. */
export interface Resource {
  type: ResourceType;
  id: string;
  key: string;
}

/** What the 412 reads: the latest change of a resource (the audit store's `latestChange`). */
export interface ResourceHistory {
  latestChange(resource: Resource, environment: string | null): Promise<ChangeEntry | undefined>;
}

/** Thrown inside a write's transaction when `If-Match` names no current version: nothing is written. */
export class StaleVersion extends Error {
  constructor(
    readonly what: string,
    readonly resource: Resource,
    readonly environment: string | null,
    readonly etag: string,
  ) {
    super(`${what}: If-Match names no current version`);
  }
}

/**
 * Inside the write's transaction, before it decides anything: throws StaleVersion when
 * `condition` (an `If-Match`; null: none sent) does not match the record's current `etag`.
 */
export function requireVersion(condition: IfMatch | null, etag: string, what: string, resource: Resource, environment: string | null = null): void {
  if (condition !== null && !matches(condition, etag)) throw new StaleVersion(what, resource, environment, etag);
}

/**
 * Runs a write whose transaction may have thrown StaleVersion and answers that as the 412: the
 * message names the latest change of the record (read after the rollback), the `ETag` header
 * and `details` the current version.
 */
export async function checkedWrite<T>(history: ResourceHistory, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (e) {
    if (!(e instanceof StaleVersion)) throw e;
    throw preconditionFailed(e.what, await history.latestChange(e.resource, e.environment), e.etag);
  }
}

/** The 412: e.g. `Flag checkout changed by alice@example.com at 2026-11-29T10:00:00.000Z (rules, variants) since you loaded it: ...`. */
export function preconditionFailed(what: string, last: ChangeEntry | undefined, etag: string): ApiError {
  const by = last === undefined ? "" : ` by ${last.actor.label} at ${last.at} (${last.action === "created" ? "created" : Object.keys(last.changes).join(", ")})`;
  return new ApiError(
    412,
    "PRECONDITION_FAILED",
    `${what} changed${by} since you loaded it: reload it and apply your change again`,
    [{ path: IF_MATCH_PATH, message: `Does not match the current ETag ${etag}` }],
    { etag },
  );
}
