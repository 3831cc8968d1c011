/**
 * The audit log (docs/audit.md): the change log read back, newest first, filtered and paged by
 * cursor, or streamed whole as NDJSON. Receives what it reads (the audit
 * store, the projects) as parameters.
 */
import type { Action, ChangeEntry } from "../../changes/entry";
import { notFound, validationError } from "../../http/errors";
import { iso } from "../../lib/clock";
import type { ProjectReader } from "../projects/store";
import { normalizeEmail } from "../users/service";
import { LIMIT_DEFAULT } from "./model";
import type { AuditFilter, AuditStore } from "./store";
import type { Principal } from "../../http/access";
import { positionOf } from "../streams/hub";

/** The query of a list or an export, as the route passes it (model.ts AuditQuery, limit read; times as sent). */
export type AuditQueryInput = Pick<AuditFilter, "resourceType" | "resourceKey" | "actorId" | "action" | "since" | "until"> & { limit?: number; cursor?: string };

/** The stream's query, as the route passes it (model.ts AuditStreamQuery). */
export type AuditStreamInput = Pick<AuditFilter, "resourceType" | "resourceKey" | "actorId" | "action"> & { since?: string };

/** An entry as the API answers it (model.ts AuditEntry). */
export interface AuditEntryView {
  id: string;
  position: number;
  at: string;
  actor: ChangeEntry["actor"];
  requestId: string | null;
  project: string | null;
  environment: string | null;
  resource: ChangeEntry["resource"];
  action: Action;
  changes: ChangeEntry["changes"];
}

/** Entries read at a time by an export: its memory stays bounded whatever the log's size. */
export const EXPORT_BATCH = 500;

export const viewOf = (e: ChangeEntry): AuditEntryView => ({
  id: e.id,
  position: e.position,
  at: e.at,
  actor: e.actor,
  requestId: e.requestId,
  project: e.project?.slug ?? null,
  environment: e.environment,
  resource: e.resource,
  action: e.action,
  changes: e.changes,
});

/**
 * A cursor: the position of the last entry of a page, base64url-encoded (opaque to clients; the
 * next page holds the entries below it). Decoding takes only what encoding writes.
 */
export const encodeCursor = (position: number) => Buffer.from(String(position)).toString("base64url");

function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, "base64url").toString();
  if (!/^[1-9][0-9]{0,14}$/.test(text) || encodeCursor(Number(text)) !== cursor) {
    throw validationError("Invalid request", [{ path: "query.cursor", message: "Must be a nextCursor of this API" }]);
  }
  return Number(text);
}

/** An ISO timestamp of the query, as stored (UTC, milliseconds), or a 400 at its path when it is no real date. */
function instant(value: string | undefined, name: "since" | "until"): string | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  // Date.parse rolls 2026-02-30 over to March: a date that does not exist is refused, not moved.
  if (Number.isNaN(ms) || !sameCalendarDay(value, ms)) {
    throw validationError("Invalid request", [{ path: `query.${name}`, message: "Not a valid date and time" }]);
  }
  return iso(ms);
}

/** The date part of `value` names a real day: shifting `ms` back by the written offset gives it again. */
function sameCalendarDay(value: string, ms: number): boolean {
  const offset = /([+-])(\d\d):(\d\d)$/.exec(value);
  const shift = offset ? (offset[1] === "-" ? -1 : 1) * (Number(offset[2]) * 60 + Number(offset[3])) * 60_000 : 0;
  return new Date(ms + shift).toISOString().slice(0, 10) === value.slice(0, 10);
}

/**
 * `actorId` as the store filters it: an e-mail address (no actor id holds an `@`) names a user,
 * compared as logins compare it (trimmed, lower-case); anything else is an actor id.
 */
function actorFilter(actorId: string | undefined): Pick<AuditFilter, "actorId" | "actorEmail"> {
  if (actorId === undefined) return {};
  return actorId.includes("@") ? { actorEmail: normalizeEmail(actorId) } : { actorId };
}

export interface AuditServiceDeps {
  audit: AuditStore;
  projects: ProjectReader;
  /** The open live streams (stream.ts AuditStreamHub): a stream of the entries passing `filter`, after `since` when given. */
  live: { open(principal: Principal, filter: AuditFilter, since: number | null): ReadableStream<Uint8Array> };
}

export type AuditService = ReturnType<typeof auditService>;

export function auditService({ audit, projects, live }: AuditServiceDeps) {
  /** The filters of a list or a stream: the project's (by slug; 404 when unknown) or the instance's. */
  const scopeOf = async (slug: string | null, q: AuditStreamInput): Promise<AuditFilter> => {
    let projectId: string | undefined;
    if (slug !== null) {
      const project = await projects.bySlug(slug);
      if (!project) throw notFound(`Project ${slug}`);
      projectId = project.id;
    }
    const { resourceType, resourceKey, action } = q;
    return { projectId, resourceType, resourceKey, ...actorFilter(q.actorId), action };
  };
  /** The store's filter for a list's query. */
  const filterOf = async (slug: string | null, q: AuditQueryInput): Promise<AuditFilter> => {
    const since = instant(q.since, "since");
    const until = instant(q.until, "until");
    const before = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
    return { ...(await scopeOf(slug, q)), since, until, before };
  };

  return {
    /**
     * The live stream (stream.ts) of the entries passing the query's filters, resumed after
     * `Last-Event-ID` (or else the query's `since`) when given.
     */
    async stream(principal: Principal, slug: string | null, q: AuditStreamInput, lastEventId: string | null): Promise<ReadableStream<Uint8Array>> {
      const filter = await scopeOf(slug, q);
      const since = positionOf(lastEventId) ?? (q.since === undefined ? null : Number(q.since));
      return live.open(principal, filter, since);
    },

    /**
     * One page, newest first; `nextCursor` when older entries match (one more is read to know),
     * or when the page stopped at its scan window (it may then hold fewer than `limit`, even none).
     */
    async list(slug: string | null, q: AuditQueryInput): Promise<{ entries: AuditEntryView[]; nextCursor: string | null }> {
      const filter = await filterOf(slug, q);
      const limit = q.limit ?? LIMIT_DEFAULT;
      const { entries: rows, resumeBelow } = await audit.page(filter, limit + 1);
      const entries = rows.slice(0, limit).map(viewOf);
      const next = rows.length > limit ? entries.at(-1)!.position : resumeBelow;
      return { entries, nextCursor: next === null ? null : encodeCursor(next) };
    },

    /**
     * Every matching entry, newest first, from the cursor on when one is given (`limit` does not
     * apply), read EXPORT_BATCH at a time. The project is checked before the first entry (a 404
     * is an answer, not a broken stream). Entries committed after the first batch are not in it.
     */
    async export(slug: string | null, q: AuditQueryInput): Promise<AsyncGenerator<AuditEntryView>> {
      const filter = await filterOf(slug, q);
      return (async function* () {
        for (let before: number | null | undefined = filter.before; before !== null; ) {
          const { entries, resumeBelow } = await audit.page({ ...filter, before: before ?? undefined }, EXPORT_BATCH);
          for (const entry of entries) yield viewOf(entry);
          before = entries.length === EXPORT_BATCH ? entries.at(-1)!.position : resumeBelow;
        }
      })();
    },
  };
}
