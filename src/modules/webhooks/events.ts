/**
 * Webhook events (decisions §10), pure: which events a flag or state change emits, and the
 * payload text of each. The outbox (outbox.ts) derives them from the change log's entries in
 * the transaction of the change and stores them (store.ts); each event gets one id and one
 * payload text, which every delivery of it (each webhook, each retry, each redelivery) sends
 * and signs unchanged.
 */
import type { ChangeEntry } from "../../changes/entry";
import type { EventName } from "./model";

/** One event in one environment. */
export interface FlagChange {
  event: EventName;
  environment: string;
  flagKey: string;
  previous: boolean;
  current: boolean;
  /**
   * `rolloutPercentage` before and after, carried by the flag.updated of a rollout-only state
   * change alone (additive to `enabled`; every other event's payload stays as it was).
   */
  rollout?: { previous: number | null; current: number | null };
  /** Why and since when the flag is stale: carried by flag.stale alone. */
  stale?: { reason: string; since: string };
}

/**
 * A flag-level event (created, updated by PATCH, deleted) once per environment of the
 * project, with that environment's state: `enabledBefore` maps environment id to its enabled
 * (absent: disabled). `current` is the state after the change (false for every environment
 * once the flag is deleted).
 */
export function flagLevelChanges(
  event: "flag.created" | "flag.updated" | "flag.deleted" | "flag.stale",
  environments: readonly { id: string; slug: string }[],
  flagKey: string,
  enabledBefore: ReadonlyMap<string, boolean>,
): FlagChange[] {
  return environments.map((env) => {
    const previous = enabledBefore.get(env.id) ?? false;
    return { event, environment: env.slug, flagKey, previous, current: event === "flag.deleted" ? false : previous };
  });
}

export interface StateValues {
  enabled: boolean;
  rolloutPercentage: number | null;
}

/**
 * The event of a state PUT, or null: enabled turned on or off wins (flag.enabled,
 * flag.disabled, whatever happened to the rollout); a change of the rollout alone is
 * flag.updated, which carries the rollout before and after; no change, no event.
 */
export function stateChange(environment: string, flagKey: string, before: StateValues, after: StateValues): FlagChange | null {
  const change = { environment, flagKey, previous: before.enabled, current: after.enabled };
  if (before.enabled !== after.enabled) return { event: after.enabled ? "flag.enabled" : "flag.disabled", ...change };
  if (before.rolloutPercentage === after.rolloutPercentage) return null;
  return { event: "flag.updated", ...change, rollout: { previous: before.rolloutPercentage, current: after.rolloutPercentage } };
}

const UNSET: StateValues = { enabled: false, rolloutPercentage: null };

/** What the derivation reads of a project's flags, in the transaction of the change, after its write. */
export interface FlagReads {
  environments(projectId: string): Promise<{ id: string; slug: string }[]>;
  /** Whether the flag is on, by environment id (no row: absent). */
  enabledIn(flagId: string): Promise<Map<string, boolean>>;
  state(flagId: string, projectId: string, environment: string): Promise<StateValues | undefined>;
}

/** The events of one flag or flag-state entry (model.ts EVENTS). */
export async function flagChanges(entry: ChangeEntry, reads: FlagReads): Promise<FlagChange[]> {
  const flagKey = entry.resource.key!;
  const projectId = entry.project!.id;
  if (entry.resource.type === "flag_state") {
    const env = entry.environment!;
    const now = (await reads.state(entry.resource.id, projectId, env)) ?? UNSET;
    // A field the entry does not name kept its value; one it names was `before` (null: unset).
    const before = { ...now };
    for (const field of ["enabled", "rolloutPercentage"] as const) {
      if (field in entry.changes) (before as Record<string, unknown>)[field] = entry.changes[field]!.before ?? UNSET[field];
    }
    const change = stateChange(env, flagKey, before, now);
    return change ? [change] : [];
  }
  const environments = await reads.environments(projectId);
  if (isStaleChange(entry)) {
    // A flag that turned stale (docs/insights.md): flag.stale once per environment, its state there unchanged.
    // No longer stale, or stale for another reason: no event.
    const { before, after } = entry.changes.stale!;
    if (before !== null || after === null) return [];
    const stale = after as { reason: string; since: string };
    return flagLevelChanges("flag.stale", environments, flagKey, await reads.enabledIn(entry.resource.id)).map((c) => ({ ...c, stale }));
  }
  if (entry.action === "deleted") {
    // The flag's states went with it: its entry holds them, by environment slug.
    const states = (entry.changes.states?.before ?? {}) as Record<string, StateValues>;
    const before = new Map(environments.map((e) => [e.id, states[e.slug]?.enabled ?? false]));
    return flagLevelChanges("flag.deleted", environments, flagKey, before);
  }
  return flagLevelChanges(entry.action === "created" ? "flag.created" : "flag.updated", environments, flagKey, await reads.enabledIn(entry.resource.id));
}

/** An entry of the stale-flag detection (src/modules/insights/): a flag's `stale` alone changed. */
export function isStaleChange(entry: Pick<ChangeEntry, "resource" | "changes">): boolean {
  return entry.resource.type === "flag" && "stale" in entry.changes && Object.keys(entry.changes).length === 1;
}

/** The payload text of an event: what every delivery of it sends and signs. */
export function eventPayload(id: string, projectSlug: string, c: FlagChange, at: string): string {
  return JSON.stringify({
    id,
    event: c.event,
    projectSlug,
    environment: c.environment,
    timestamp: at,
    data: {
      flagKey: c.flagKey,
      previousState: c.rollout ? { enabled: c.previous, rolloutPercentage: c.rollout.previous } : { enabled: c.previous },
      currentState: c.rollout ? { enabled: c.current, rolloutPercentage: c.rollout.current } : { enabled: c.current },
      ...(c.stale ? { stale: c.stale } : {}),
    },
  });
}
