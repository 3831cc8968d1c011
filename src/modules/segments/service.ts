/**
 * Segments (docs/targeting.md, Segments): reusable sets of users that flag rules name with
 * in_segment/not_in_segment. Checked in full before anything is stored; each write commits with
 * its change-log entry (resource type `segment`), whose subscribers recompile the flags that use
 * the segment (the evaluation snapshot) and tell the streams.
 */
import { diff, whole, type Author, type ChangeDraft } from "../../changes/entry";
import type { Condition } from "../../evaluation/types";
import { ApiError, conflict, notFound, validationError } from "../../http/errors";
import { strongEtag, type IfMatch } from "../../http/etag";
import { iso, type Clock } from "../../lib/clock";
import { checkedWrite, requireVersion, type ResourceHistory } from "../audit/precondition";
import { pageRequest } from "../../db/paging";
import { newId } from "../../lib/ids";
import { checkConditions } from "../flags/service";
import { requireProject } from "../projects/service";
import type { Project, ProjectReader } from "../projects/store";
import { segmentOf, type Segment, type SegmentStore } from "./store";

export type { Segment } from "./store";

export interface NewSegmentInput {
  key: string;
  name: string;
  description?: string | null;
  conditions: Condition[];
  included?: string[];
  excluded?: string[];
}

export interface SegmentPatchInput {
  name?: string;
  description?: string | null;
  conditions?: Condition[];
  included?: string[];
  excluded?: string[];
}

/** Conditions as stored: only the fields of the contract. */
const normalizeConditions = (conditions: readonly Condition[]): Condition[] =>
  conditions.map((c) => (c.value === undefined ? { attribute: c.attribute, operator: c.operator } : { attribute: c.attribute, operator: c.operator, value: c.value }));

/** A list as stored: duplicates dropped, first occurrence kept. */
const unique = (ids: readonly string[] | undefined): string[] => [...new Set(ids ?? [])];

function checkSegment(conditions: readonly Condition[] | undefined): void {
  if (conditions === undefined) return;
  const details = checkConditions(conditions, "body.conditions", null);
  if (details.length > 0) throw validationError("Invalid segment", details);
}

function segmentChange(project: Project, segment: { id: string; key: string }, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft {
  return { project: { id: project.id, slug: project.slug }, environment: null, resource: { type: "segment", id: segment.id, key: segment.key }, action, changes };
}

export interface SegmentServiceDeps {
  segments: SegmentStore;
  projects: ProjectReader;
  clock: Clock;
  /** The change log read back: who changed a segment when `If-Match` no longer matches. */
  history: ResourceHistory;
}

/** A segment's ETag: a hash of it as answered (docs/decisions.md, "Live audit log and edit conflicts"). */
export const segmentEtag = (segment: Segment): string => strongEtag(segment);

export type SegmentService = ReturnType<typeof segmentService>;

export function segmentService({ segments, projects, clock, history }: SegmentServiceDeps) {
  const segmentIn = (project: Project, key: string, segment: Segment | undefined): Segment => {
    if (!segment) throw notFound(`Segment ${key} in project ${project.slug}`);
    return segment;
  };

  return {
    async getSegment(slug: string, key: string): Promise<Segment> {
      const project = await requireProject(projects, slug);
      return segmentIn(project, key, await segments.find(project.id, key));
    },

    /** Ordered by key; `q` matches key or name, case-insensitive. */
    async listSegments(slug: string, query: { q?: string; page?: number; perPage?: number }) {
      const project = await requireProject(projects, slug);
      const page = query.page ?? 1;
      const perPage = query.perPage ?? 20;
      const { rows, total } = await segments.list(project.id, { q: query.q }, pageRequest(page, perPage));
      return { segments: rows, total, page, perPage };
    },

    async createSegment(author: Author, slug: string, input: NewSegmentInput): Promise<Segment> {
      const project = await requireProject(projects, slug);
      checkSegment(input.conditions);
      const now = iso(clock.now());
      const segment = segmentOf({
        id: newId("seg"),
        key: input.key,
        name: input.name,
        description: input.description,
        conditions: normalizeConditions(input.conditions),
        included: unique(input.included),
        excluded: unique(input.excluded),
        createdAt: now,
        updatedAt: now,
      });
      const created = await segments.create(author, project.id, segment, segmentChange(project, segment, "created", whole({ ...segment }, "created")));
      if (!created) throw conflict(`Segment ${input.key} already exists in project ${slug}`);
      return segment;
    },

    /** `ifMatch`: the segment's ETag the client loaded (null: none sent), checked in the write's transaction (412 when stale). */
    async updateSegment(author: Author, slug: string, key: string, patch: SegmentPatchInput, ifMatch: IfMatch | null = null): Promise<Segment> {
      const project = await requireProject(projects, slug);
      checkSegment(patch.conditions);
      return checkedWrite(history, () => segments.update(author, project.id, key, (found) => {
        const current = segmentIn(project, key, found);
        requireVersion(ifMatch, segmentEtag(current), `Segment ${key}`, { type: "segment", id: current.id, key });
        const next = segmentOf({
          ...current,
          name: patch.name ?? current.name,
          description: patch.description === undefined ? current.description : patch.description,
          conditions: patch.conditions ? normalizeConditions(patch.conditions) : current.conditions,
          included: patch.included ? unique(patch.included) : current.included,
          excluded: patch.excluded ? unique(patch.excluded) : current.excluded,
        });
        const changes = diff({ ...current }, { ...next });
        if (Object.keys(changes).length === 0) return { result: current, changes: [] };
        next.updatedAt = iso(clock.now());
        return { result: next, changes: [segmentChange(project, next, "updated", changes)] };
      }));
    },

    /** Refused (409, `details` naming each flag and its rules) while a flag's rule names it. */
    async deleteSegment(author: Author, slug: string, key: string): Promise<void> {
      const project = await requireProject(projects, slug);
      await segments.remove(author, project.id, key, (found, uses) => {
        const segment = segmentIn(project, key, found);
        if (uses.length > 0) {
          throw new ApiError(
            409,
            "CONFLICT",
            `Segment ${key} is used by ${uses.length === 1 ? "flag" : "flags"} ${uses.map((u) => u.flagKey).join(", ")}: remove it from ${uses.length === 1 ? "its" : "their"} rules first`,
            uses.map((u) => ({ path: `flags.${u.flagKey}`, message: `Flag ${u.flagKey} names segment ${key} in ${u.ruleIds.length === 1 ? "rule" : "rules"} ${u.ruleIds.join(", ")}` })),
          );
        }
        return segmentChange(project, segment, "deleted", whole({ ...segment }, "deleted"));
      });
    },
  };
}
