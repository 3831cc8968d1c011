/**
 * The streams' schemas: the definitions payload (`GET /v1/definitions`, and the `put` of its
 * stream), a patch, the OFREP change stream's query. Variants and rules are the flags API's own
 * response schemas: a record carries them exactly as stored.
 */
import { t } from "elysia";
import { ResponseInt } from "../../http/schema";
import { Condition, Prerequisite, Rule, Variant } from "../flags/model";

export const FlagRecord = t.Object(
  {
    key: t.String(),
    variants: t.Array(Variant, { description: "As stored; empty: a boolean flag" }),
    rules: t.Array(Rule, { description: "In order, disabled ones included (local evaluation skips them, as the server does)" }),
    bucketBy: t.Optional(t.String({ description: "The context attribute rollouts and variant weights bucket by; absent: userId (docs/targeting.md)" })),
    prerequisites: t.Optional(
      t.Array(Prerequisite, {
        description: "Only when the flag has prerequisites: each met when that flag (a record of the same payload), evaluated for the same context, is enabled and serves `variant` when given (docs/targeting.md, Prerequisites)",
      }),
    ),
    state: t.Object(
      {
        enabled: t.Boolean(),
        rolloutPercentage: t.Union([t.Number(), t.Null()], { description: "0 to 100, at most 3 decimals; null: everyone" }),
      },
      { description: "The flag's state in the key's environment; never set there: `{ enabled: false, rolloutPercentage: null }`" },
    ),
  },
  { title: "FlagRecord", description: "A flag as local evaluation needs it (src/evaluation/types.ts FlagDefinition and FlagState)" },
);

export const SegmentRecord = t.Object(
  {
    key: t.String(),
    conditions: t.Array(Condition, { description: "AND-ed; none: only included users are members" }),
    included: t.Array(t.String(), { description: "User ids that are members whatever the conditions" }),
    excluded: t.Array(t.String(), { description: "User ids that are not members unless included" }),
  },
  { title: "SegmentRecord", description: "A segment as local evaluation needs it (docs/targeting.md, Segments; src/evaluation/types.ts SegmentDefinition)" },
);

export const Definitions = t.Object(
  {
    version: ResponseInt({ description: "The change log's last position when this was read (in the same read): resume a stream after it with Last-Event-ID" }),
    project: t.String({ description: "Project slug" }),
    environment: t.String({ description: "Environment slug" }),
    flags: t.Array(FlagRecord, { description: "Every flag of the project, ordered by key" }),
    segments: t.Array(SegmentRecord, { description: "The segments the flags' rules name (in_segment, not_in_segment), ordered by key; empty when none" }),
  },
  { title: "Definitions" },
);

/** The OFREP change stream's query: the token the bulk evaluation handed out (`eventStreams`). */
export const EventsQuery = t.Object(
  {
    token: t.Optional(
      t.String({
        description: "The stream token of `eventStreams[0].endpoint.requestUri` in the bulk evaluation's answer (POST /ofrep/v1/evaluate/flags); never the API key. Missing, malformed, expired or revoked: 401",
      }),
    ),
  },
  { additionalProperties: false },
);

/** A stream's request headers: `Last-Event-ID` (EventSource sends it when it reconnects). */
export const StreamHeaders = (description: string) => t.Object({ "last-event-id": t.Optional(t.String({ description })) });
