/**
 * The audit log: request and response schemas (docs/audit.md). An entry is the change log's
 * entry (src/changes/entry.ts) as the API shows it: the project by slug, the actor and the
 * resource as objects.
 */
import { t } from "elysia";
import { ACTIONS, ACTOR_TYPES, RESOURCE_TYPES } from "../../changes/entry";
import { OneOf, QueryInt, ResponseInt, Timestamp } from "../../http/schema";

export const LIMIT_DEFAULT = 50;
export const LIMIT_MAX = 200;
const ONE_TO_200 = "^(200|1[0-9]{2}|[1-9][0-9]?)$";
/** What `since` and `until` take: an ISO 8601 date and time with a zone (Z or an offset); the service checks it is a real date. */
export const ISO_PATTERN = "^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d(:\\d\\d(\\.\\d{1,9})?)?(Z|[+-]\\d\\d:\\d\\d)$";
const TIME_ERROR = "Must be an ISO 8601 date and time with a zone, e.g. 2026-11-22T10:00:00.000Z";
/** A cursor as nextCursor writes it (cursor.ts); what it holds is checked by the service. */
const CURSOR_PATTERN = "^[A-Za-z0-9_-]{1,64}$";

const withValues = (description: string, values: readonly string[]) => ({ description: `${description}: ${values.join(", ")}` });

const Changes = t.Record(
  t.String(),
  t.Object({
    before: t.Unknown(),
    after: t.Unknown(),
    changed: t.Optional(t.Literal(true, { description: "On a secret, whose value shows as \"********\" on both sides" })),
  }),
  { description: "`{ field: { before, after } }` for the fields that changed; every field of the record for created (before null) and deleted (after null); secrets as \"********\" with `changed: true`" },
);

export const AuditEntry = t.Object(
  {
    id: t.String({ description: "aud_...: 8 characters of time, then random (ids sort by time)" }),
    position: ResponseInt({ description: "Order of commit, increasing over the whole instance" }),
    at: Timestamp("When the change was committed"),
    actor: t.Object({
      type: OneOf(ACTOR_TYPES, withValues("Who made the change", ACTOR_TYPES)),
      id: t.String({ description: "usr_... or key_... (a user, an admin key, an API key); cli:<os user>; system" }),
      label: t.String({ description: "The user's email or the key's name, as they were at the time" }),
    }),
    requestId: t.Union([t.String(), t.Null()], { description: "The X-Request-Id of the write; null from the CLI or the service itself" }),
    project: t.Union([t.String(), t.Null()], { description: "The project's slug at the time; null for instance-level resources (users, admin keys)" }),
    environment: t.Union([t.String(), t.Null()], { description: "The environment's slug, for an environment and a resource of one environment (a flag state, an API key)" }),
    resource: t.Object({
      type: OneOf(RESOURCE_TYPES, withValues("What changed", RESOURCE_TYPES)),
      id: t.String(),
      key: t.Union([t.String(), t.Null()], { description: "Its human key: a flag's key (on its states too), a slug, a name, an email" }),
    }),
    action: OneOf(ACTIONS, withValues("What was done", ACTIONS)),
    changes: Changes,
  },
  { title: "AuditEntry" },
);

export const AuditList = t.Object(
  {
    entries: t.Array(AuditEntry, { description: "Newest first" }),
    nextCursor: t.Union([t.String(), t.Null()], { description: "Pass as `cursor` for the next (older) page; null on the last page" }),
  },
  { title: "AuditList" },
);

/** The filters of the list and of the stream. */
const FILTERS = {
  resourceType: t.Optional(OneOf(RESOURCE_TYPES, withValues("Only entries of this resource type", RESOURCE_TYPES))),
  resourceKey: t.Optional(t.String({ minLength: 1, maxLength: 256, description: "Only entries of resources with this key (a flag key: the flag and its states in every environment)", error: "Must be a string of 1 to 256 characters" })),
  actorId: t.Optional(t.String({ minLength: 1, maxLength: 256, description: "Only entries by this actor: its id (usr_..., key_..., cli:<user>, system), or a user's e-mail address (any case, as logins take it: that user's entries, also of a user deleted since)", error: "Must be a string of 1 to 256 characters" })),
  action: t.Optional(OneOf(ACTIONS, withValues("Only entries of this action", ACTIONS))),
};

export const AuditQuery = t.Object(
  {
    ...FILTERS,
    since: t.Optional(t.String({ pattern: ISO_PATTERN, description: "Only entries at or after this time (inclusive)", error: TIME_ERROR })),
    until: t.Optional(t.String({ pattern: ISO_PATTERN, description: "Only entries before this time (exclusive)", error: TIME_ERROR })),
    limit: t.Optional(QueryInt(ONE_TO_200, `Entries a page: default ${LIMIT_DEFAULT}, 1 to ${LIMIT_MAX}`, `Must be an integer from 1 to ${LIMIT_MAX}`)),
    cursor: t.Optional(t.String({ pattern: CURSOR_PATTERN, description: "The nextCursor of the previous page", error: "Must be a nextCursor of this API" })),
  },
  { additionalProperties: false },
);

/** The stream's query: the list's filters; `since` a change-log position (as `Last-Event-ID`), not a time. */
export const AuditStreamQuery = t.Object(
  {
    ...FILTERS,
    since: t.Optional(
      t.String({
        pattern: "^[0-9]{1,15}$",
        description: "Resume after this change-log position (an event's `id`), as `Last-Event-ID` does (which wins when both are sent): on the stream a position, not a time",
        error: "Must be a change-log position (an event's id: digits)",
      }),
    ),
  },
  { additionalProperties: false },
);
