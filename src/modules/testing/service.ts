/**
 * Test sessions and their overrides (decisions §8). Every write is checked in full first (a
 * refused write changes nothing), committed to SQLite, then applied to the in-memory store
 * (store.ts) before the response goes out, so the very next evaluation sees it.
 */
import { and, eq, lte } from "drizzle-orm";
import type { AppContext } from "../../context";
import { transaction } from "../../db/client";
import { sessionOverrides, testSessions } from "../../db/schema";
import type { Override } from "../../evaluation/types";
import { MESSAGES, type Principal } from "../../http/access";
import { isPro } from "../../http/edition";
import { forbidden, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { SLUG_PATTERN } from "../../http/schema";
import { iso } from "../../lib/clock";
import { newId, randomBase62 } from "../../lib/ids";
import { KEY_RANDOM_LENGTH } from "../../lib/secrets";
import { DEFAULT_TTL_SECONDS, MAX_OVERRIDES, MAX_TTL_SECONDS, MIN_TTL_SECONDS, type NewSession } from "./model";
import type { LiveSession } from "./store";

/** Pro session tokens: this prefix and 32 base62 characters (190 bits). */
export const PRO_TOKEN_PREFIX = "svc_sess_";
const FLAG_KEY = new RegExp(SLUG_PATTERN);
const FLAG_KEY_MAX = 128;

export interface SessionView {
  id: string;
  token: string;
  projectId: string;
  /** Absent when none was given (the spec: "string, optional"). */
  label?: string;
  overrides: Record<string, Override>;
  createdAt: string;
  expiresAt: string;
}

export interface OverridesView {
  id: string;
  overrides: Record<string, Override>;
}

/** The overrides as an object, keys in alphabetical order (stable across restarts). */
function overridesObject(session: LiveSession): Record<string, Override> {
  const out: Record<string, Override> = {};
  for (const key of [...session.overrides.keys()].sort()) out[key] = session.overrides.get(key)!;
  return out;
}

const view = (s: LiveSession): SessionView => ({
  id: s.id,
  token: s.token,
  projectId: s.projectId,
  ...(s.label !== null ? { label: s.label } : {}),
  overrides: overridesObject(s),
  createdAt: s.createdAt,
  expiresAt: s.expiresAt,
});

const overridesView = (s: LiveSession): OverridesView => ({ id: s.id, overrides: overridesObject(s) });

/** The Testing API is for API keys only (access table); anything else is a bug. */
function apiKeyOf(principal: Principal): Extract<Principal, { kind: "apiKey" }> {
  if (principal.kind !== "apiKey") throw new Error(`testing API reached with a ${principal.kind} principal`);
  return principal;
}

/**
 * The live session `id` for this caller: 404 when unknown, destroyed or expired (an expired
 * session is gone at once, before any sweep), 403 when it belongs to another project.
 */
function requireSession(ctx: AppContext, principal: Principal, id: string): LiveSession {
  const session = ctx.testSessions.live(id, ctx.clock.now());
  if (session === undefined) throw notFound(`Test session ${id}`);
  if (session.projectId !== apiKeyOf(principal).projectId) throw forbidden(MESSAGES.otherProject);
  return session;
}

/** The lifetime in seconds: Pro honours `ttl` (1..86400, integer); CE always uses the default. */
function ttlSeconds(ctx: AppContext, ttl: number | undefined): number {
  if (!isPro(ctx.config) || ttl === undefined) return DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < MIN_TTL_SECONDS || ttl > MAX_TTL_SECONDS) {
    throw validationError("Invalid request", [{ path: "body.ttl", message: `Must be an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS} (seconds)` }]);
  }
  return ttl;
}

/**
 * The caller's key, when `projectId` names its project (by id or slug); any other value, an
 * unknown project included, is 403.
 */
function keyOfProject(principal: Principal, projectId: string): Extract<Principal, { kind: "apiKey" }> {
  const key = apiKeyOf(principal);
  if (projectId !== key.projectId && projectId !== key.projectSlug) throw forbidden(MESSAGES.otherProject);
  return key;
}

/** POST /v1/testing/sessions */
export function createSession(ctx: AppContext, principal: Principal, input: NewSession): SessionView {
  const key = keyOfProject(principal, input.projectId);
  const ttl = ttlSeconds(ctx, input.ttl);
  const now = ctx.clock.now();
  const id = newId("sess");
  const row = {
    id,
    projectId: key.projectId,
    token: isPro(ctx.config) ? PRO_TOKEN_PREFIX + randomBase62(KEY_RANDOM_LENGTH) : id,
    label: input.label ?? null,
    createdAt: iso(now),
    expiresAt: iso(now + ttl * 1000),
  };
  ctx.db.insert(testSessions).values(row).run();
  const session: LiveSession = { ...row, expiresAtMs: now + ttl * 1000, overrides: new Map() };
  ctx.testSessions.add(session);
  return view(session);
}

/** GET /v1/testing/sessions: the live sessions of the key's project (`projectId` omitted: that one). */
export function listSessions(ctx: AppContext, principal: Principal, projectId: string | undefined): { sessions: SessionView[] } {
  const key = projectId === undefined ? apiKeyOf(principal) : keyOfProject(principal, projectId);
  return { sessions: ctx.testSessions.liveOf(key.projectId, ctx.clock.now()).map(view) };
}

/** GET /v1/testing/sessions/{id} */
export function getSession(ctx: AppContext, principal: Principal, id: string): SessionView {
  return view(requireSession(ctx, principal, id));
}

/** DELETE /v1/testing/sessions/{id}: its token is ignored from the next request on. */
export function deleteSession(ctx: AppContext, principal: Principal, id: string): void {
  const session = requireSession(ctx, principal, id);
  ctx.db.delete(testSessions).where(eq(testSessions.id, session.id)).run(); // overrides cascade
  ctx.testSessions.remove(session.id);
}

/**
 * 400 unless the session can hold these keys: at most MAX_OVERRIDES, counting the ones it has.
 * `path`: where the request named them (the path's flag key, or the batch's map).
 */
function checkCap(session: LiveSession, keys: readonly string[], path: string): void {
  let added = 0;
  for (const key of keys) if (!session.overrides.has(key)) added++;
  if (session.overrides.size + added > MAX_OVERRIDES) {
    throw validationError(
      `A test session holds at most ${MAX_OVERRIDES} overrides: this session has ${session.overrides.size} and the request would add ${added}. Nothing was changed.`,
      [{ path, message: `At most ${MAX_OVERRIDES} overrides a session` }],
    );
  }
}

/** Sets overrides (each replacing any earlier value of its key) in one transaction, then in memory. */
function writeOverrides(ctx: AppContext, session: LiveSession, entries: readonly [string, Override][]): void {
  const updatedAt = iso(ctx.clock.now());
  transaction(ctx, () => {
    for (const [flagKey, value] of entries) {
      ctx.db
        .insert(sessionOverrides)
        .values({ sessionId: session.id, flagKey, value, updatedAt })
        .onConflictDoUpdate({ target: [sessionOverrides.sessionId, sessionOverrides.flagKey], set: { value, updatedAt } })
        .run();
    }
  });
  for (const [flagKey, value] of entries) session.overrides.set(flagKey, value);
}

/** PUT /v1/testing/sessions/{id}/overrides/{flagKey} (the key is checked by the route's schema). */
export function putOverride(ctx: AppContext, principal: Principal, id: string, flagKey: string, value: Override): OverridesView {
  const session = requireSession(ctx, principal, id);
  checkCap(session, [flagKey], "params.flagKey");
  writeOverrides(ctx, session, [[flagKey, value]]);
  return overridesView(session);
}

/** PUT /v1/testing/sessions/{id}/overrides/batch (Pro): merged into the map, all or nothing. */
export function putOverrides(ctx: AppContext, principal: Principal, id: string, overrides: Record<string, Override>): OverridesView {
  const entries = Object.entries(overrides);
  const details: ErrorDetail[] = [];
  for (const [key] of entries) {
    if (key.length > FLAG_KEY_MAX || !FLAG_KEY.test(key)) {
      details.push({ path: `body.overrides.${key}`, message: "Must be a flag key: kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters" });
    }
  }
  if (details.length > 0) throw validationError("Invalid request", details);
  const session = requireSession(ctx, principal, id);
  checkCap(session, entries.map(([key]) => key), "body.overrides");
  writeOverrides(ctx, session, entries);
  return overridesView(session);
}

/** DELETE /v1/testing/sessions/{id}/overrides/{flagKey}: 204 whether or not it was there. */
export function deleteOverride(ctx: AppContext, principal: Principal, id: string, flagKey: string): void {
  const session = requireSession(ctx, principal, id);
  if (!session.overrides.has(flagKey)) return;
  ctx.db
    .delete(sessionOverrides)
    .where(and(eq(sessionOverrides.sessionId, session.id), eq(sessionOverrides.flagKey, flagKey)))
    .run();
  session.overrides.delete(flagKey);
}

/** Removes the sessions expired at the clock's now from the database and from memory. */
export function sweepExpiredSessions(ctx: AppContext): number {
  const now = ctx.clock.now();
  const removed = ctx.db.delete(testSessions).where(lte(testSessions.expiresAt, iso(now))).returning({ id: testSessions.id }).all().length;
  ctx.testSessions.removeExpired(now);
  if (removed > 0) ctx.log.info("expired test sessions removed", { sessions: removed });
  return removed;
}

/** Start-up: one sweep now, then every hour on the hour. */
export function scheduleSessionSweep(ctx: AppContext): void {
  sweepExpiredSessions(ctx);
  ctx.scheduler.every("test-sessions-sweep", "0 0 * * * *", () => {
    sweepExpiredSessions(ctx);
  });
}
