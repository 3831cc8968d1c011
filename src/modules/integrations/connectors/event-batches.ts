/**
 * What the event connectors (mixpanel, amplitude, segment) share: deterministic insert ids,
 * deterministic sampling, splitting serialized events at a vendor's count and byte limits,
 * Basic auth, and the status-code rules every vendor follows (decisions §12). Pure, no I/O.
 */
import { createHash } from "node:crypto";
import { Type } from "@sinclair/typebox";
import { type EvaluationRecord, type FlagChangeEvent, type Outcome, type VendorResponse, retryAfterMs } from "./types";

/** SHA-256 (hex) of the parts, unambiguously joined (JSON: `null` and `""` differ). Same input, same id. */
export function hashId(...parts: (string | number | boolean | null)[]): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}

/** The id of one evaluation: a retried or rebuilt request carries the same id (the vendor dedupes it). */
export function evaluationId(r: EvaluationRecord): string {
  return hashId("evaluation", r.flagKey, r.userId, r.evaluatedAt, r.environment);
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

/** What the event connectors' configs share (defaults may be missing when the store did not fill them in). */
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
 * Groups serialized items (JSON texts) so that each group has at most `maxCount` items and,
 * joined with commas inside an envelope of `overhead` bytes, at most `maxBytes` bytes. An item
 * alone over the limit still gets a group of its own (the vendor will say what it thinks of it).
 */
export function chunk(items: readonly string[], maxCount: number, maxBytes: number, overhead: number): string[][] {
  const groups: string[][] = [];
  let group: string[] = [];
  let bytes = overhead;
  for (const item of items) {
    const size = Buffer.byteLength(item) + (group.length > 0 ? 1 : 0);
    if (group.length > 0 && (group.length >= maxCount || bytes + size > maxBytes)) {
      groups.push(group);
      group = [];
      bytes = overhead;
    }
    bytes += Buffer.byteLength(item) + (group.length > 0 ? 1 : 0);
    group.push(item);
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** `Authorization` for HTTP Basic with `user` and an empty password (Mixpanel's project token, Segment's write key). */
export function basicAuth(user: string): string {
  return `Basic ${Buffer.from(`${user}:`).toString("base64")}`;
}

/** The base URL: `apiHost` when set (a proxy, a test receiver), else the vendor's host; no trailing slash. */
export function baseUrl(apiHost: unknown, fallback: string): string {
  return (typeof apiHost === "string" && apiHost !== "" ? apiHost : fallback).replace(/\/+$/, "");
}

/** The start of a response body, for an error message. */
export function snippet(body: string): string {
  const text = body.trim().replace(/\s+/g, " ");
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The body as JSON, or null. */
export function parseBody(body: string): any {
  try {
    return JSON.parse(body);
  } catch {
    return null;
  }
}

/**
 * The rules every vendor follows, for answers a connector has no special reading of: 2xx all
 * taken; 401/403 bad credentials (never retried); 408, 429 and 5xx retried (after Retry-After
 * when given, else `defaultRetryMs`); any other 4xx a malformed request (never retried).
 */
export function statusOutcome(vendor: string, events: number, response: VendorResponse, defaultRetryMs: number | null = null): Outcome {
  const { status } = response;
  const said = snippet(response.body);
  const detail = said === "" ? `${status}` : `${status}: ${said}`;
  if (status >= 200 && status < 300) return { kind: "sent", accepted: events, rejected: 0, error: null };
  if (status === 401 || status === 403) return { kind: "failed", error: `bad credentials: ${vendor} answered ${detail}` };
  if (status === 408 || status === 429 || status >= 500) {
    return { kind: "retry", error: `${vendor} answered ${detail}`, retryAfterMs: retryAfterMs(response.headers) ?? defaultRetryMs };
  }
  return { kind: "failed", error: `${vendor} refused the request: ${detail}` };
}

// ---- config fields the event connectors share ---------------------------------------------------

export const apiHostField = (vendorDefault: string) =>
  Type.Optional(
    Type.String({
      pattern: "^https?://",
      description: `Base URL with scheme to send to instead of the vendor's public API (a proxy, a test receiver). Default: ${vendorDefault}.`,
    }),
  );

/** A region choice: one of the keys of `hosts`, default "us" (literals: TypeBox's Value checks them, as the API does). */
export const regionField = <H extends Record<string, string>>(hosts: H, description: string) =>
  Type.Optional(Type.Union((Object.keys(hosts) as (keyof H & string)[]).map((k) => Type.Literal(k)), { default: "us", description }));

// Optional: the API stores a config as given (no defaults filled in), so a field with a default may be absent.
export const trackEvaluationsField = () =>
  Type.Optional(Type.Boolean({ default: true, description: "Send flag evaluations as events (batched, off the request path)." }));

export const trackChangesField = () =>
  Type.Optional(Type.Boolean({ default: true, description: "Send an event for each flag change (created, updated, deleted, enabled, disabled), with who made it." }));

export const sampleRateField = () =>
  Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 1,
      default: 1,
      description: "Share of evaluations to send, from 0 to 1 (1: all). The choice is made per evaluation from its id, so a retry sends the same ones.",
    }),
  );
