/**
 * Segments: request and response schemas (docs/targeting.md, Segments). The schemas check
 * shapes; conditions are checked further by the service, as a flag rule's are.
 */
import { t } from "elysia";
import { ONE_OR_MORE, ONE_TO_100, QueryInt, ResponseInt, Slug, SLUG_PATTERN, Timestamp } from "../../http/schema";
import { Condition, LIMITS, PER_PAGE_MAX } from "../flags/model";

/** At most this many user ids in `included`, and as many in `excluded`. */
export const USER_IDS_MAX = 10_000;
const USER_ID_MAX = 256;
const NAME_MAX = 200;
const DESCRIPTION_MAX = 2000;

export const SegmentKey = (description = "kebab-case, 1 to 128 characters, unique in the project, immutable") =>
  t.String({ pattern: SLUG_PATTERN, minLength: 1, maxLength: 128, description, error: "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters" });

const Name = () => t.String({ minLength: 1, maxLength: NAME_MAX, error: `Must be a string of 1 to ${NAME_MAX} characters` });
const NullableDescription = (description: string) =>
  t.Union([t.String({ maxLength: DESCRIPTION_MAX }), t.Null()], { description, error: `Must be a string of at most ${DESCRIPTION_MAX} characters, or null` });

const Conditions = () =>
  t.Array(Condition, {
    maxItems: LIMITS.conditions,
    description: `AND-ed; at most ${LIMITS.conditions}; validated as a flag rule's conditions are, except that in_segment and not_in_segment are not allowed (a segment cannot name a segment: 400). None (the default): only included users are members`,
  });

const UserIds = (what: string) =>
  t.Array(t.String({ minLength: 1, maxLength: USER_ID_MAX, error: `Must be a user id of 1 to ${USER_ID_MAX} characters` }), {
    maxItems: USER_IDS_MAX,
    description: `${what}; at most ${USER_IDS_MAX.toLocaleString("en-US")} user ids of 1 to ${USER_ID_MAX} characters (duplicates are dropped); compared with the context's userId (a number in decimal form)`,
    error: `Must be an array of at most ${USER_IDS_MAX} user ids of 1 to ${USER_ID_MAX} characters`,
  });

const INCLUDED = "Members whatever the conditions";
const EXCLUDED = "Not members unless included, whatever the conditions";

export const NewSegment = t.Object(
  {
    key: SegmentKey(),
    name: Name(),
    description: t.Optional(NullableDescription("null or omitted: none")),
    conditions: Conditions(),
    included: t.Optional(UserIds(`${INCLUDED}; default none`)),
    excluded: t.Optional(UserIds(`${EXCLUDED}; default none`)),
  },
  { additionalProperties: false, title: "NewSegment" },
);

export const SegmentPatch = t.Object(
  {
    key: t.Optional(t.Never({ error: "The key of a segment cannot be changed" })),
    name: t.Optional(Name()),
    description: t.Optional(NullableDescription("null clears it")),
    conditions: t.Optional(Conditions()),
    included: t.Optional(UserIds(`${INCLUDED}; replaces the whole list`)),
    excluded: t.Optional(UserIds(`${EXCLUDED}; replaces the whole list`)),
  },
  { additionalProperties: false, title: "SegmentPatch" },
);

export const Segment = t.Object(
  {
    id: t.String({ description: "seg_..." }),
    key: t.String(),
    name: t.String(),
    description: t.Optional(t.String({ description: "Absent when not set" })),
    conditions: t.Array(Condition),
    included: t.Array(t.String()),
    excluded: t.Array(t.String()),
    createdAt: Timestamp(),
    updatedAt: Timestamp("Moves when name, description, conditions, included or excluded change"),
  },
  { title: "Segment" },
);

export const SegmentListItem = t.Object(
  { id: t.String(), key: t.String(), name: t.String(), createdAt: Timestamp(), updatedAt: Timestamp() },
  { title: "SegmentListItem" },
);

export const SegmentList = t.Object(
  {
    segments: t.Array(SegmentListItem),
    total: ResponseInt({ description: "Segments matching the filter, over all pages" }),
    page: ResponseInt(),
    perPage: ResponseInt(),
  },
  { title: "SegmentList" },
);

export const SegmentListQuery = t.Object(
  {
    q: t.Optional(t.String({ maxLength: 200, description: "Case-insensitive substring of key or name" })),
    page: t.Optional(QueryInt(ONE_OR_MORE, "Default 1, at most 999999999", "Must be an integer from 1 to 999999999")),
    perPage: t.Optional(QueryInt(ONE_TO_100, `Default 20, at most ${PER_PAGE_MAX}`, `Must be an integer from 1 to ${PER_PAGE_MAX}`)),
  },
  { additionalProperties: false },
);

export const SegmentParams = t.Object({ slug: Slug("Project slug"), key: SegmentKey("Segment key") });
