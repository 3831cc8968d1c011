/**
 * Test sessions and their overrides (decisions §8). Every write is checked in full first (a
 * refused write changes nothing), stored (store.ts), then applied to the live sessions in
 * memory (live.ts) before the response goes out, so the very next evaluation sees it. Test
 * data: no change-log entry (decisions: Testing API).
 */
import type { Override } from "../../evaluation/types";
import { MESSAGES, type Principal } from "../../http/access";
import { forbidden, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { SLUG_PATTERN } from "../../http/schema";
import { iso, type Clock } from "../../lib/clock";
import { newId, randomBase62 } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Scheduler } from "../../lib/scheduler";
import { KEY_RANDOM_LENGTH } from "../../lib/secrets";
import type { LiveSession, LiveSessions } from "./live";
import { DEFAULT_TTL_SECONDS, MAX_OVERRIDES, MAX_TTL_SECONDS, MIN_TTL_SECONDS, type NewSession } from "./model";
import type { TestSessionStore } from "./store";
import type { ProjectStore } from "../projects/store";

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

/** The project a caller names by `projectId` (id or slug): a key's own only (else 403); a login token's any existing one (else 404). */
async function projectOf(principal: Principal, projectId: string, projects: ProjectLookup): Promise<string> {
  if (principal.kind === "apiKey") {
    if (projectId !== principal.projectId && projectId !== principal.projectSlug) throw forbidden(MESSAGES.otherProject);
    return principal.projectId;
  }
  const project = (await projects.bySlug(projectId)) ?? (await projects.list(projectId))[0];
  if (project === undefined) throw notFound(`Project ${projectId}`);
  return project.id;
}

/** What the service reads of projects: a login token names any project, by slug or id. */
export type ProjectLookup = Pick<ProjectStore, "bySlug" | "list">;

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

export interface TestingServiceDeps {
  sessions: TestSessionStore;
  projects: ProjectLookup;
  /** The live sessions evaluation reads. */
  live: LiveSessions;
  clock: Clock;
  log: Logger;
  /** The Pro edition: `ttl` honoured, tokens separate from ids. */
  pro: boolean;
}

export type TestingService = ReturnType<typeof testingService>;

export function testingService({ sessions, projects, live, clock, log, pro }: TestingServiceDeps) {
  /**
   * The live session `id` for this caller: 404 when unknown, destroyed or expired (an expired
   * session is gone at once, before any sweep), 403 when it belongs to another project than
   * the caller's key (a login token reaches every project's sessions, as it reaches their flags).
   */
  const requireSession = (principal: Principal, id: string): LiveSession => {
    const session = live.live(id, clock.now());
    if (session === undefined) throw notFound(`Test session ${id}`);
    if (principal.kind === "apiKey" && session.projectId !== principal.projectId) throw forbidden(MESSAGES.otherProject);
    return session;
  };

  /** The lifetime in seconds: Pro honours `ttl` (1..86400, integer); CE always uses the default. */
  const ttlSeconds = (ttl: number | undefined): number => {
    if (!pro || ttl === undefined) return DEFAULT_TTL_SECONDS;
    if (!Number.isInteger(ttl) || ttl < MIN_TTL_SECONDS || ttl > MAX_TTL_SECONDS) {
      throw validationError("Invalid request", [{ path: "body.ttl", message: `Must be an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS} (seconds)` }]);
    }
    return ttl;
  };

  /** Sets overrides (each replacing any earlier value of its key) in one transaction, then in memory. */
  const writeOverrides = async (session: LiveSession, entries: readonly [string, Override][]): Promise<void> => {
    await sessions.putOverrides(session.id, entries, iso(clock.now()));
    for (const [flagKey, value] of entries) session.overrides.set(flagKey, value);
  };

  return {
    /** POST /v1/testing/sessions */
    async create(principal: Principal, input: NewSession): Promise<SessionView> {
      const projectId = await projectOf(principal, input.projectId, projects);
      const ttl = ttlSeconds(input.ttl);
      const now = clock.now();
      const id = newId("sess");
      const row = {
        id,
        projectId,
        token: pro ? PRO_TOKEN_PREFIX + randomBase62(KEY_RANDOM_LENGTH) : id,
        label: input.label ?? null,
        createdAt: iso(now),
        expiresAt: iso(now + ttl * 1000),
      };
      await sessions.create(row);
      const session: LiveSession = { ...row, expiresAtMs: now + ttl * 1000, overrides: new Map() };
      live.add(session);
      return view(session);
    },

    /** GET /v1/testing/sessions: the live sessions of a project (`projectId` omitted: the key's; a login token must name one). */
    async list(principal: Principal, projectId: string | undefined): Promise<{ sessions: SessionView[] }> {
      let id: string;
      if (projectId !== undefined) id = await projectOf(principal, projectId, projects);
      else if (principal.kind === "apiKey") id = principal.projectId;
      else throw validationError("Invalid request", [{ path: "query.projectId", message: "Required with a login token: the project's id or slug" }]);
      return { sessions: live.liveOf(id, clock.now()).map(view) };
    },

    /** GET /v1/testing/sessions/{id} */
    get: (principal: Principal, id: string): SessionView => view(requireSession(principal, id)),

    /** DELETE /v1/testing/sessions/{id}: its token is ignored from the next request on. */
    async delete(principal: Principal, id: string): Promise<void> {
      const session = requireSession(principal, id);
      await sessions.remove(session.id);
      live.remove(session.id);
    },

    /** PUT /v1/testing/sessions/{id}/overrides/{flagKey} (the key is checked by the route's schema). */
    async putOverride(principal: Principal, id: string, flagKey: string, value: Override): Promise<OverridesView> {
      const session = requireSession(principal, id);
      checkCap(session, [flagKey], "params.flagKey");
      await writeOverrides(session, [[flagKey, value]]);
      return overridesView(session);
    },

    /** PUT /v1/testing/sessions/{id}/overrides/batch (Pro): merged into the map, all or nothing. */
    async putOverrides(principal: Principal, id: string, overrides: Record<string, Override>): Promise<OverridesView> {
      const entries = Object.entries(overrides);
      const details: ErrorDetail[] = [];
      for (const [key] of entries) {
        if (key.length > FLAG_KEY_MAX || !FLAG_KEY.test(key)) {
          details.push({ path: `body.overrides.${key}`, message: "Must be a flag key: kebab-case (a-z, 0-9, single hyphens between), 1 to 128 characters" });
        }
      }
      if (details.length > 0) throw validationError("Invalid request", details);
      const session = requireSession(principal, id);
      checkCap(session, entries.map(([key]) => key), "body.overrides");
      await writeOverrides(session, entries);
      return overridesView(session);
    },

    /** DELETE /v1/testing/sessions/{id}/overrides/{flagKey}: 204 whether or not it was there. */
    async deleteOverride(principal: Principal, id: string, flagKey: string): Promise<void> {
      const session = requireSession(principal, id);
      if (!session.overrides.has(flagKey)) return;
      await sessions.removeOverride(session.id, flagKey);
      session.overrides.delete(flagKey);
    },

    /** Removes the sessions expired at the clock's now from the database (one node does it for all: the job is `oneNode`) and from this node's memory. */
    async sweep(): Promise<number> {
      const now = clock.now();
      const removed = await sessions.removeExpired(now);
      live.removeExpired(now);
      if (removed > 0) log.info("expired test sessions removed", { sessions: removed });
      return removed;
    },

    /** Drops the sessions expired at the clock's now from this node's memory (every node, each hour: another node may have swept the rows). */
    forgetExpired(): number {
      return live.removeExpired(clock.now());
    },
  };
}

/**
 * Start-up: one sweep now, then every hour on the hour: the database's rows by one node at a
 * time (Backend.exclusive), each node's memory by itself.
 */
export async function scheduleSessionSweep(scheduler: Scheduler, testing: Pick<TestingService, "sweep" | "forgetExpired">): Promise<void> {
  await testing.sweep();
  scheduler.every("test-sessions-sweep", "0 0 * * * *", () => testing.sweep().then(() => undefined), { oneNode: true });
  scheduler.every("test-sessions-forget", "0 0 * * * *", () => void testing.forgetExpired());
}
