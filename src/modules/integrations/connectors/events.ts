/**
 * What the connectors share about the events they send: deterministic ids, deterministic
 * sampling, the properties of an evaluation and of a change, a user's latest evaluations,
 * splitting serialized items at a vendor's count and byte limits, Basic auth, and the config
 * fields the event connectors (mixpanel, amplitude, segment) have in common. Pure, no I/O.
 */
import { hash } from "node:crypto";
import { Type } from "@sinclair/typebox";
import type { EvaluationRecord, FlagChangeEvent } from "./types";

// ---- ids and sampling ---------------------------------------------------------------------------

/** SHA-256 (hex) of the parts, unambiguously joined (JSON: `null` and `""` differ). Same input, same id. */
export function hashId(...parts: (string | number | boolean | null)[]): string {
  return hash("sha256", JSON.stringify(parts), "hex");
}

/** Ids already worked out: the sender hands the same record objects to every integration of a project. */
const evaluationIds = new WeakMap<EvaluationRecord, string>();

/** The id of one evaluation: a retried or rebuilt request carries the same id (the vendor dedupes it). */
export function evaluationId(r: EvaluationRecord): string {
  let id = evaluationIds.get(r);
  if (id === undefined) evaluationIds.set(r, (id = hashId("evaluation", r.flagKey, r.userId, r.evaluatedAt, r.environment)));
  return id;
}

/** The id of one flag change, from its event id (stable across retries). */
export function changeId(c: FlagChangeEvent): string {
  return hashId("change", c.id);
}

/**
 * Whether an evaluation is kept at `rate` (0..1): decided by its id, so the same record is kept
 * or dropped the same way every time (a rebuilt batch samples alike).
 */
export function sampled(id: string, rate: number | undefined): boolean {
  if (rate === undefined || rate >= 1) return true;
  if (!(rate > 0)) return false;
  return Number.parseInt(id.slice(0, 8), 16) / 0x1_0000_0000 < rate;
}

/** What the event connectors' configs share (defaults may be missing: the API stores a config as given). */
export interface EventConfig {
  trackEvaluations?: boolean;
  sampleRate?: number;
}

/**
 * The records to send, each with its id: none when `trackEvaluations` is off, the sampled ones
 * else, and only those with a user when the vendor needs one (`needsUser`).
 */
export function evaluationsToSend(records: readonly EvaluationRecord[], config: EventConfig, needsUser: boolean): { record: EvaluationRecord; id: string }[] {
  if (config.trackEvaluations === false) return [];
  const out: { record: EvaluationRecord; id: string }[] = [];
  for (const record of records) {
    if (needsUser && (record.userId === null || record.userId === "")) continue;
    const id = evaluationId(record);
    if (sampled(id, config.sampleRate)) out.push({ record, id });
  }
  return out;
}

// ---- what an evaluation and a change say --------------------------------------------------------

/** The variant a user was served: the variant key, else "on"/"off" for a flag without variants. */
export function variantLabel(r: EvaluationRecord): string {
  return r.variant ?? (r.enabled ? "on" : "off");
}

/** Milliseconds since the epoch of an ISO timestamp (NaN, sent as null, when it is not one: the vendor refuses it). */
export function epochMs(iso: string): number {
  return Date.parse(iso);
}

/** Who made a change, as the id the event is attributed to in the vendor: `flagsvc:<actor id>`. */
export function actorUserId(c: FlagChangeEvent): string {
  return `flagsvc:${c.actor.id}`;
}

/** A flag's state for people: "on", "off, rollout 50%". */
export function stateText(state: FlagChangeEvent["data"]["currentState"]): string {
  const rollout = state.rolloutPercentage === undefined || state.rolloutPercentage === null ? "" : `, rollout ${state.rolloutPercentage}%`;
  return `${state.enabled ? "on" : "off"}${rollout}`;
}

/** A change's properties, the same for every event vendor (snake_case). */
export function changeProperties(c: FlagChangeEvent): Record<string, unknown> {
  return {
    change: c.event.slice("flag.".length),
    flag_key: c.data.flagKey,
    project: c.projectSlug,
    environment: c.environment,
    enabled_before: c.data.previousState.enabled,
    enabled_after: c.data.currentState.enabled,
    rollout_before: c.data.previousState.rolloutPercentage ?? null,
    rollout_after: c.data.currentState.rolloutPercentage ?? null,
    actor_type: c.actor.type,
    actor_id: c.actor.id,
    actor_label: c.actor.label,
    event_id: c.id,
  };
}

/** An evaluation's properties, the same for every event vendor (snake_case). */
export function evaluationProperties(r: EvaluationRecord): Record<string, unknown> {
  return {
    flag_key: r.flagKey,
    variant: variantLabel(r),
    enabled: r.enabled,
    reason: r.reason,
    rule_id: r.ruleId,
    environment: r.environment,
  };
}

/**
 * Per user (records without one left out), the latest record of each `key` (e.g. the flag):
 * users, and each user's keys, in the order first seen; of two records at the same time the
 * later in `records` wins. What a vendor that keeps a user's state (attributes, traits) is sent.
 */
export function latestPerUser(records: readonly EvaluationRecord[], key: (r: EvaluationRecord) => string): Map<string, Map<string, EvaluationRecord>> {
  const users = new Map<string, Map<string, EvaluationRecord>>();
  for (const r of records) {
    if (r.userId === null || r.userId === "") continue;
    let latest = users.get(r.userId);
    if (!latest) users.set(r.userId, (latest = new Map()));
    const k = key(r);
    const seen = latest.get(k);
    if (!seen || !(Date.parse(r.evaluatedAt) < Date.parse(seen.evaluatedAt))) latest.set(k, r);
  }
  return users;
}

// ---- requests -----------------------------------------------------------------------------------

/**
 * Groups `items` in order so that each group has at most `maxCount` items and, serialized with
 * `text` and joined with commas inside an envelope of `overhead` bytes, at most `maxBytes`
 * bytes. An item alone over the limit still gets a group of its own (the vendor will say what
 * it thinks of it).
 */
export function chunk<T>(
  items: readonly T[],
  maxCount: number,
  maxBytes = Number.POSITIVE_INFINITY,
  overhead = 0,
  text: (item: T) => string = String,
): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let bytes = overhead;
  for (const item of items) {
    const size = Buffer.byteLength(text(item));
    if (group.length > 0 && (group.length >= maxCount || bytes + 1 + size > maxBytes)) {
      groups.push(group);
      group = [];
      bytes = overhead;
    }
    bytes += size + (group.length > 0 ? 1 : 0);
    group.push(item);
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** `Authorization` for HTTP Basic with `user` and an empty password (Mixpanel's project token, Segment's write key). */
export function basicAuth(user: string): string {
  return `Basic ${Buffer.from(`${user}:`).toString("base64")}`;
}

// ---- config fields the event connectors share ---------------------------------------------------

/** A region choice: one of the keys of `hosts`, default "us" (literals: TypeBox's Value checks them, as the API does). */
export const regionField = <H extends Record<string, string>>(hosts: H, description: string) =>
  Type.Optional(Type.Union((Object.keys(hosts) as (keyof H & string)[]).map((k) => Type.Literal(k)), { default: "us", description }));

// Optional: the API stores a config as given (no defaults filled in), so a field with a default may be absent.
export const trackEvaluationsField = (description = "Send flag evaluations as events (batched, off the request path).") =>
  Type.Optional(Type.Boolean({ default: true, description }));

export const trackChangesField = (description = "Send an event for each flag change (created, updated, deleted, enabled, disabled), with who made it.") =>
  Type.Optional(Type.Boolean({ default: true, description }));

export const sampleRateField = () =>
  Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 1,
      default: 1,
      description: "Share of evaluations to send, from 0 to 1 (1: all). The choice is made per evaluation from its id, so a retry sends the same ones.",
    }),
  );
