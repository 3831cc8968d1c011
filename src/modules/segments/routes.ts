/** Segments: routes (docs/targeting.md, Segments). Access: as flags (src/http/access.ts, group `flags`). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent, queryInt } from "../../http/schema";
import { EDIT_CONFLICTS, IF_MATCH_DOC, IF_NONE_MATCH_DOC, ifMatchOf, NOT_MODIFIED_RESPONSES, PRECONDITION_RESPONSES, tagged, withEtag } from "../../http/etag";
import { ProjectParams } from "../projects/model";
import { LIMITS, PER_PAGE_MAX } from "../flags/model";
import { NewSegment, Segment, SegmentList, SegmentListQuery, SegmentParams, SegmentPatch, USER_IDS_MAX } from "./model";
import { segmentEtag, type SegmentService } from "./service";

const SEGMENTS = ["Segments"];
const ETAG = "The answer carries the segment's `ETag` (strong: a hash of the segment as answered; it changes with every change of it).";
const WHO = "API keys of scope mgmt or full (their own project only: another project's slug is 403 FORBIDDEN), admin keys, and login JWTs (writes: admin and editor roles)";
const MEMBERSHIP = `A user is a member when their id is in \`included\`; otherwise when it is not in \`excluded\` and the segment has conditions and all match the evaluation context. Ids are compared with the context's \`userId\` (a string, or a number in decimal form). Flag rules name a segment with a condition \`{ attribute: "userId", operator: "in_segment" | "not_in_segment", value: "<segment key>" }\`; changing a segment changes the evaluation of every flag that uses it from the next request on.`;
const DEFINITION = `\`conditions\` (AND-ed, at most ${LIMITS.conditions}) are validated as a flag rule's conditions are (a wrong value type for the operator is a 400 at its path); in_segment and not_in_segment are not allowed in a segment's conditions (400: a segment cannot name a segment). \`included\` and \`excluded\`: at most ${USER_IDS_MAX} user ids each (400 beyond), duplicates dropped; the request body is limited to 1 MiB (413). Every problem is listed in \`details\`; a refused write changes nothing.`;

export const segmentsRoutes = (segments: SegmentService) =>
  new Elysia({ name: "flagsvc/segments" })
    .use(accessGuard())
    .post("/v1/projects/:slug/segments", async ({ params, body, principal, set, status }) => {
      const segment = await segments.createSegment(authorOf({ principal, set }), params.slug, body);
      return status(201, withEtag(set, segment, segmentEtag(segment)));
    }, {
      access: "flags",
      params: ProjectParams,
      body: NewSegment,
      response: { 201: Segment },
      detail: {
        tags: SEGMENTS,
        summary: "Create a segment",
        description: `Key: kebab-case, 1 to 128 characters, unique in the project (a taken key is 409 CONFLICT), immutable. ${MEMBERSHIP} ${ETAG} ${DEFINITION} ${WHO}.`,
      },
    })
    .get("/v1/projects/:slug/segments", ({ params, query }) => segments.listSegments(params.slug, { ...query, page: queryInt(query.page), perPage: queryInt(query.perPage) }), {
      access: "flags",
      params: ProjectParams,
      query: SegmentListQuery,
      response: { 200: SegmentList },
      detail: {
        tags: SEGMENTS,
        summary: "List segments",
        description: `Ordered by key; items hold id, key, name, createdAt, updatedAt. \`q\`: case-insensitive substring of key or name. \`page\` (default 1, 1 to 999999999) and \`perPage\` (default 20, 1 to ${PER_PAGE_MAX}); out of range is 400; a page past the end is empty. ${WHO}.`,
      },
    })
    .get("/v1/projects/:slug/segments/:key", async ({ params, request, set }) => {
      const segment = await segments.getSegment(params.slug, params.key);
      return tagged(request, set, segment, segmentEtag(segment));
    }, {
      access: "flags",
      params: SegmentParams,
      response: { 200: Segment },
      detail: {
        tags: SEGMENTS,
        summary: "Get a segment",
        description: `The whole segment, its lists included. ${ETAG} \`If-None-Match\` naming it is answered 304 with no body. Unknown project or segment: 404. ${WHO}.`,
        parameters: [IF_NONE_MATCH_DOC],
        responses: NOT_MODIFIED_RESPONSES,
      },
    })
    .patch("/v1/projects/:slug/segments/:key", async ({ params, body, principal, set, request }) => {
      const ifMatch = ifMatchOf(request.headers.get("if-match"));
      const segment = await segments.updateSegment(authorOf({ principal, set }), params.slug, params.key, body, ifMatch);
      return withEtag(set, segment, segmentEtag(segment));
    }, {
      access: "flags",
      params: SegmentParams,
      body: SegmentPatch,
      response: { 200: Segment },
      detail: {
        tags: SEGMENTS,
        summary: "Update a segment",
        description: `Updatable: name, description (null clears it), conditions, included, excluded; each array sent replaces the whole array. \`key\` in the body is a 400: keys are immutable. A PATCH that changes nothing leaves \`updatedAt\` alone. ${ETAG} ${EDIT_CONFLICTS} ${DEFINITION} ${WHO}.`,
        parameters: [IF_MATCH_DOC],
        responses: PRECONDITION_RESPONSES,
      },
    })
    .delete(
      "/v1/projects/:slug/segments/:key",
      async ({ params, principal, set, status }) => {
        await segments.deleteSegment(authorOf({ principal, set }), params.slug, params.key);
        return status(204);
      },
      {
        access: "flags",
        params: SegmentParams,
        detail: {
          tags: SEGMENTS,
          summary: "Delete a segment",
          responses: noContent("Deleted"),
          description: `Permanent. While a rule of a flag (enabled or not) names the segment, the delete is refused: 409 CONFLICT, with one \`details\` item per flag (\`path\` \`flags.<flag key>\`, its message naming the rules). ${WHO}.`,
        },
      },
    );
