/**
 * A change-log entry (docs/audit.md): what one write did to one resource, by whom, in which
 * request. Services describe a change as a `ChangeDraft` (pure data, built from the records
 * before and after); the store appends it in the write's own transaction, which gives it its
 * id, time, author and position; after the commit it is published (bus.ts).
 */
import { userInfo } from "node:os";
import type { Principal } from "../http/access";

export const ACTOR_TYPES = ["user", "admin_key", "api_key", "cli", "system"] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/** Who made a change. `label`: the user's email or the key's name. */
export interface Actor {
  type: ActorType;
  id: string;
  label: string;
}

/** The author of a write: its actor and the request it came in (null from the CLI or the system). */
export interface Author {
  actor: Actor;
  requestId: string | null;
}

export const RESOURCE_TYPES = ["project", "environment", "flag", "flag_state", "api_key", "admin_key", "user", "webhook", "plugin", "integration", "schedule", "segment"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

export const ACTIONS = ["created", "updated", "deleted", "enabled", "disabled", "rotated"] as const;
export type Action = (typeof ACTIONS)[number];

/** `{ field: { before, after } }`; a secret's value is `SECRET` on both sides, with `changed: true`. */
export type Changes = Record<string, { before: unknown; after: unknown; changed?: true }>;

export interface ChangeDraft {
  /** The project it belongs to, null for instance-level resources (users, admin keys). */
  project: { id: string; slug: string } | null;
  /** The environment's slug, for a resource of one environment (a flag state, an API key). */
  environment: string | null;
  resource: { type: ResourceType; id: string; key: string | null };
  action: Action;
  changes: Changes;
}

export interface ChangeEntry extends Omit<ChangeDraft, "project"> {
  /** Order of commit, increasing: "everything after N". */
  position: number;
  id: string;
  at: string;
  actor: Actor;
  requestId: string | null;
  project: ChangeDraft["project"];
}

/** What a secret's value is shown as, wherever it would appear in an entry. */
export const SECRET = "********";

/**
 * The fields of `before` and `after` whose values differ (compared as JSON), as `changes`.
 * `secrets`: fields whose values are masked; `ignore`: bookkeeping fields (updatedAt).
 */
export function diff(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  opts: { secrets?: readonly string[]; ignore?: readonly string[] } = {},
): Changes {
  const changes: Changes = {};
  for (const field of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (opts.ignore?.includes(field)) continue;
    const b = before[field];
    const a = after[field];
    if (JSON.stringify(b) === JSON.stringify(a)) continue;
    changes[field] = opts.secrets?.includes(field) ? { before: SECRET, after: SECRET, changed: true } : { before: b ?? null, after: a ?? null };
  }
  return changes;
}

/**
 * A config whose secrets alone changed: the masked configs are equal, so `diff` saw nothing, yet
 * the change is one. Adds `changes.config` as the masked configs with `changed: true`.
 */
export function noteSecretChange(
  changes: Changes,
  config: { before: Record<string, unknown>; after: Record<string, unknown> },
  masked: { before: Record<string, unknown>; after: Record<string, unknown> },
): void {
  if (!changes.config && JSON.stringify(config.before) !== JSON.stringify(config.after)) changes.config = { ...masked, changed: true };
}

/** A whole record as `changes` of a create (`before` null) or a delete (`after` null), secrets masked. */
export function whole(record: Record<string, unknown>, side: "created" | "deleted", secrets: readonly string[] = []): Changes {
  const changes: Changes = {};
  for (const [field, value] of Object.entries(record)) {
    if (value === undefined) continue;
    const v = secrets.includes(field) ? SECRET : value;
    changes[field] = side === "created" ? { before: null, after: v, ...(secrets.includes(field) ? { changed: true as const } : {}) } : { before: v, after: null };
  }
  return changes;
}

/** The actor of an authenticated request. */
export function actorOf(principal: Principal): Actor {
  switch (principal.kind) {
    case "user":
      return { type: "user", id: principal.id, label: principal.email };
    case "adminKey":
      return { type: "admin_key", id: principal.id, label: principal.name };
    case "apiKey":
      return { type: "api_key", id: principal.id, label: principal.name };
  }
}

/** The author of a command of `flagsvc admin ...`: the operating-system user who ran it. */
export function cliAuthor(): Author {
  const user = process.env.USER ?? process.env.LOGNAME ?? process.env.USERNAME ?? osUser();
  return { actor: { type: "cli", id: `cli:${user}`, label: user }, requestId: null };
}

/** Writes the service makes on its own (the first start's bootstrap). */
export const SYSTEM: Author = { actor: { type: "system", id: "system", label: "flagsvc" }, requestId: null };

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "unknown"; // a uid without a passwd entry (some containers)
  }
}
