/**
 * The documents of `flagsvc export` / `flagsvc import` (docs/export-import.md):
 * - `instance`: the whole instance, table by table, rows as stored (secrets as stored: hashes,
 *   and the plugins' and integrations' config and the webhooks' signing secrets in clear, as the
 *   database holds them): a backup, to be kept as one.
 * - `flags`: one project's flags (and the segments they use), readable, without ids or times,
 *   in a stable order: flags as code, kept in git.
 */
import { t, type Static } from "elysia";
import { Slug, Timestamp } from "../../http/schema";
import { NewFlag } from "../flags/model";
import { NewSegment } from "../segments/model";
import { TABLES } from "./store";

export const INSTANCE_KIND = "instance";
export const FLAGS_KIND = "flags";
export const DOCUMENT_VERSION = 1;

const Rows = t.Array(t.Record(t.String(), t.Unknown()));

export const InstanceDocument = t.Object(
  {
    flagsvc: t.Literal(INSTANCE_KIND),
    version: t.Literal(DOCUMENT_VERSION),
    exportedAt: Timestamp("When it was read"),
    /** The backend it was read from (informative). */
    source: t.Optional(t.String()),
    tables: t.Object(Object.fromEntries(TABLES.map((name) => [name, Rows])) as Record<(typeof TABLES)[number], typeof Rows>, { additionalProperties: false }),
  },
  { additionalProperties: false, title: "InstanceDocument" },
);
export type InstanceDocument = Static<typeof InstanceDocument>;

const State = t.Object(
  {
    enabled: t.Boolean(),
    rolloutPercentage: t.Optional(t.Union([t.Number({ minimum: 0, maximum: 100 }), t.Null()])),
  },
  { additionalProperties: false },
);

/** A flag as code: the fields of a new flag (rules without ids), and its state per environment slug. */
export const FlagAsCode = t.Object(
  { ...NewFlag.properties, states: t.Optional(t.Record(t.String(), State, { description: "Environment slug -> state; an environment not named is left as it is" })) },
  { additionalProperties: false, title: "FlagAsCode" },
);
export type FlagAsCode = Static<typeof FlagAsCode>;

export const SegmentAsCode = NewSegment;
export type SegmentAsCode = Static<typeof SegmentAsCode>;

export const FlagsDocument = t.Object(
  {
    flagsvc: t.Literal(FLAGS_KIND),
    version: t.Literal(DOCUMENT_VERSION),
    project: Slug("The project's slug"),
    flags: t.Array(FlagAsCode),
    segments: t.Optional(t.Array(SegmentAsCode)),
  },
  { additionalProperties: false, title: "FlagsDocument" },
);
export type FlagsDocument = Static<typeof FlagsDocument>;

/** What an import did to one kind of resource (or would do: `--dry-run`). */
export interface Counts {
  created: number;
  updated: number;
  unchanged: number;
  deleted?: number;
}
