/**
 * Evaluation insights and stale flags (docs/insights.md). Insights read the flushed counts
 * (store.ts) and add what the flag's counter holds but has not flushed yet, so an evaluation
 * shows at once (read-your-evaluations). Stale detection (a background job, on the injected
 * clock) compares each flag's staleness with what is stored and records the changes through
 * the change log: a flag turning stale emits `flag.stale` from its entry (../webhooks/events.ts).
 */
import { SYSTEM } from "../../changes/entry";
import type { CountCell } from "../../evaluation/counts";
import type { Snapshot } from "../../evaluation/snapshot";
import type { FlagState, Prerequisite, Rule, Variant } from "../../evaluation/types";
import { notFound, validationError, type ErrorDetail } from "../../http/errors";
import { SLUG_PATTERN } from "../../http/schema";
import { iso, type Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import type { FlagStore } from "../flags/store";
import { requireEnvironment, requireProject } from "../projects/service";
import type { ProjectReader } from "../projects/store";
import type { InsightsFlusher } from "./flusher";
import { DAY_MS, HOUR_MS, type BucketCount, type InsightsStore, type Stale, type StaleCandidate, type StaleChange } from "./store";

export type { Stale } from "./store";

/** Hourly buckets are kept this long, then rolled into daily ones. */
export const HOURLY_RETENTION_DAYS = 30;
/** Daily buckets are kept this long. */
export const DAILY_RETENTION_DAYS = 365;
/** The longest range one request may ask for, by interval. */
export const MAX_RANGE_DAYS = { hour: HOURLY_RETENTION_DAYS, day: DAILY_RETENTION_DAYS + 1 } as const;
/** The range asked for when `from` is omitted. */
const DEFAULT_RANGE_MS = { hour: DAY_MS, day: HOURLY_RETENTION_DAYS * DAY_MS } as const;
const BUCKET_MS = { hour: HOUR_MS, day: DAY_MS } as const;
/** Evaluations of test sessions: listed in byReason, never counted as production traffic. */
const TEST_OVERRIDE = "TEST_OVERRIDE";
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/;

export type Interval = "hour" | "day";

export interface InsightsQuery {
  environment: string;
  from?: string;
  to?: string;
  interval?: Interval;
}

/** GET /v1/projects/{slug}/insights: `flags` comma-separated, `days` as the query's text. */
export interface DailyQuery {
  flags: string;
  days?: string;
  environment?: string;
}

export interface DailyInsights {
  environment: string | null;
  from: string;
  days: number;
  flags: { flagKey: string; total: number; days: number[] }[];
}

/** The daily totals of a page of flags: at most this many flags, the last DEFAULT_DAYS days unless asked. */
export const MAX_FLAGS = 100;
export const DEFAULT_DAYS = 7;
export const MAX_DAYS = 90;
const FLAG_KEY = new RegExp(SLUG_PATTERN);
const FLAG_KEY_MAX = 128;

export interface InsightsPoint {
  start: string;
  total: number;
  byVariant: Record<string, number>;
  byReason: Record<string, number>;
}

export interface Insights {
  flagKey: string;
  environment: string;
  interval: Interval;
  points: InsightsPoint[];
  lastEvaluatedAt: string | null;
}

/** What the flag service reads of insights: each state's last evaluation, each flag's staleness. */
export interface FlagInsights {
  /** Environment id -> last production evaluation (ISO) of the flag, flushed or not; absent: never. */
  lastEvaluated(flagId: string, flagKey: string, environmentIds: readonly string[]): Promise<Map<string, string>>;
  /** The same for many flags at once (one query): flag id -> environment id -> ISO. */
  lastEvaluatedOf(flags: readonly { id: string; key: string }[], environmentIds: readonly string[]): Promise<Map<string, Map<string, string>>>;
  /** One flag's staleness (null: not stale). */
  staleOf(flagId: string): Promise<Stale | null>;
}

/**
 * Whether a flag serves one value to everyone in an environment, from its stored definition and
 * state alone (decisions: "Stale flags"): disabled there; or enabled with no prerequisite (which
 * could fail for some), where the first enabled rule has no condition (it matches everyone) or
 * there is no enabled rule and the rollout is everyone (null or 100), and the variant served then
 * is one: a rule's own variant, a boolean flag's `on`, or, by the variants, the first one when no
 * variant has a weight, or the first one when it weighs 100 (a context without the bucketing
 * attribute gets the first variant).
 */
export function servesOneValue(def: { variants: readonly Variant[]; rules: readonly Rule[]; prerequisites: readonly Prerequisite[] | null }, state: FlagState): boolean {
  if (!state.enabled) return true;
  if ((def.prerequisites ?? []).length > 0) return false;
  const rule = def.rules.find((r) => r.enabled);
  if (rule !== undefined) {
    if (rule.conditions.length > 0) return false;
    if (rule.variant !== null) return true;
  } else if (state.rolloutPercentage !== null && state.rolloutPercentage < 100) return false;
  const weighted = def.variants.some((v) => v.weight !== undefined);
  return def.variants.length === 0 || !weighted || def.variants[0]!.weight === 100;
}

/**
 * A flag's staleness at `now` (ms), or null. Never stale before it is `staleAfterDays` old.
 * `not_evaluated`: no production evaluation in any environment for N days, counted from the
 * last one, or (never evaluated) from its creation or `observedSince`, whichever is later.
 * `fully_rolled_out`: in every environment, one value to everyone (`servesOneValue`), with no
 * change to the flag (its updatedAt) or to a state for N days. `since`: when that became true.
 */
export function stalenessOf(c: StaleCandidate, now: number, observedSince: number): Stale | null {
  const n = c.staleAfterDays * DAY_MS;
  const created = Date.parse(c.createdAt);
  if (now - created < n) return null;
  const quietFrom = c.lastEvaluatedAt ?? Math.max(created, observedSince);
  if (now - quietFrom >= n) return { reason: "not_evaluated", since: iso(quietFrom + n) };
  if (c.states.every((s) => servesOneValue(c, s))) {
    const changed = Math.max(Date.parse(c.updatedAt), c.lastStateChange === null ? 0 : Date.parse(c.lastStateChange));
    if (now - changed >= n) return { reason: "fully_rolled_out", since: iso(changed + n) };
  }
  return null;
}

export interface InsightsServiceDeps {
  store: InsightsStore;
  projects: ProjectReader;
  flags: Pick<FlagStore, "find">;
  snapshot: Pick<Snapshot, "environment">;
  flusher: Pick<InsightsFlusher, "flushLogged" | "pending">;
  clock: Clock;
  log: Logger;
}

export type InsightsService = ReturnType<typeof insightsService>;

/** A time of the query, in ms, or a problem at `query.{field}`. */
function timeOf(field: string, value: string | undefined, details: ErrorDetail[]): number | undefined {
  if (value === undefined) return undefined;
  const ms = ISO_TIME.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(ms)) details.push({ path: `query.${field}`, message: "Must be an ISO 8601 date-time with a zone, e.g. 2026-11-22T10:00:00Z" });
  return ms;
}

function addCells(point: InsightsPoint, cells: Iterable<{ variant: string; reason: string; count: number }>): void {
  for (const { variant, reason, count } of cells) {
    point.byReason[reason] = (point.byReason[reason] ?? 0) + count;
    if (reason === TEST_OVERRIDE) continue;
    point.total += count;
    point.byVariant[variant] = (point.byVariant[variant] ?? 0) + count;
  }
}

export function insightsService({ store, projects, flags, snapshot, flusher, clock, log }: InsightsServiceDeps) {
  const observedSince = Date.parse(store.observedSinceNow(iso(clock.now())));
  /**
   * Stored plus not flushed is every count, except while a flush's write is under way (PostgreSQL:
   * its counts left the counters and are not stored yet): the reads wait for it first.
   */
  const flushed = () => flusher.pending;
  /** What the flag's counter holds and has not flushed, and its last production evaluation (ms; 0: none since start). */
  const unflushed = (environmentId: string, flagKey: string): { cells: CountCell[]; lastAt: number } => {
    const counter = snapshot.environment(environmentId)?.get(flagKey)?.counter;
    return counter === undefined ? { cells: [], lastAt: 0 } : { cells: counter.pending(), lastAt: counter.lastAt };
  };

  const flagInsights: FlagInsights = {
    async lastEvaluated(flagId, flagKey, environmentIds) {
      return (await flagInsights.lastEvaluatedOf([{ id: flagId, key: flagKey }], environmentIds)).get(flagId)!;
    },
    async lastEvaluatedOf(flags, environmentIds) {
      await flushed();
      const stored = new Map<string, number>();
      for (const r of await store.lastEvaluated(flags.map((f) => f.id))) stored.set(`${r.flagId} ${r.environmentId}`, r.at);
      const out = new Map<string, Map<string, string>>();
      for (const flag of flags) {
        const byEnv = new Map<string, string>();
        for (const id of environmentIds) {
          const at = Math.max(stored.get(`${flag.id} ${id}`) ?? 0, unflushed(id, flag.key).lastAt);
          if (at > 0) byEnv.set(id, iso(at));
        }
        out.set(flag.id, byEnv);
      }
      return out;
    },
    staleOf: (flagId) => store.staleOf(flagId),
  };

  return {
    flagInsights,

    /** GET .../flags/{key}/insights. */
    async query(slug: string, key: string, q: InsightsQuery): Promise<Insights> {
      const now = clock.now();
      const interval = q.interval ?? "hour";
      const step = BUCKET_MS[interval];
      const details: ErrorDetail[] = [];
      const toAsked = timeOf("to", q.to, details);
      const fromAsked = timeOf("from", q.from, details);
      if (details.length > 0) throw validationError("Invalid request", details);
      // Default: up to the end of the current bucket, which is the last point.
      const to = toAsked ?? now - (now % step) + step;
      const from = fromAsked ?? to - DEFAULT_RANGE_MS[interval];
      if (from >= to) details.push({ path: fromAsked === undefined ? "query.to" : "query.from", message: "from must be before to" });
      else if (to - from > MAX_RANGE_DAYS[interval] * DAY_MS) {
        details.push({ path: "query.from", message: `At most ${MAX_RANGE_DAYS[interval]} days of ${interval === "hour" ? "hourly" : "daily"} points at once` });
      } else if (interval === "hour" && from < now - HOURLY_RETENTION_DAYS * DAY_MS) {
        details.push({ path: "query.from", message: `Hourly counts are kept ${HOURLY_RETENTION_DAYS} days: use interval=day for older ones` });
      }
      if (details.length > 0) throw validationError("Invalid request", details);

      const project = await requireProject(projects, slug);
      const env = requireEnvironment(project, q.environment);
      const flag = await flags.find(project.id, key);
      if (!flag) throw notFound(`Flag ${key} in project ${project.slug}`);

      const first = from - (from % step);
      const points: InsightsPoint[] = [];
      const byStart = new Map<number, InsightsPoint>();
      for (let start = first; start < to; start += step) {
        const point = { start: iso(start), total: 0, byVariant: {}, byReason: {} };
        points.push(point);
        byStart.set(start, point);
      }
      await flushed();
      const rows: BucketCount[] = await store.counts(flag.id, env.id, interval, first, to);
      for (const row of rows) {
        const point = byStart.get(row.bucket);
        if (point) addCells(point, [row]);
      }
      // Not flushed yet: counted in the bucket the flush will add them to (this hour's, or this day's).
      const current = byStart.get(now - (now % step));
      if (current) addCells(current, unflushed(env.id, flag.key).cells);
      const lastEvaluatedAt = (await flagInsights.lastEvaluated(flag.id, flag.key, [env.id])).get(env.id) ?? null;
      return { flagKey: flag.key, environment: env.slug, interval, points, lastEvaluatedAt };
    },

    /**
     * GET /v1/projects/{slug}/insights: the daily production totals of a page of flags, over
     * every environment or one, the last `days` days (today's included, with what is not
     * flushed yet). Keys that name no flag are left out.
     */
    async daily(slug: string, q: DailyQuery): Promise<DailyInsights> {
      const keys = [...new Set(q.flags.split(","))];
      const bad = keys.filter((k) => k.length > FLAG_KEY_MAX || !FLAG_KEY.test(k));
      if (bad.length > 0) throw validationError("Invalid request", [{ path: "query.flags", message: `Not flag keys: ${bad.join(", ")}` }]);
      if (keys.length > MAX_FLAGS) throw validationError("Invalid request", [{ path: "query.flags", message: `At most ${MAX_FLAGS} flags a request` }]);
      const project = await requireProject(projects, slug);
      const envs = q.environment === undefined ? project.environments : [requireEnvironment(project, q.environment)];
      const days = q.days === undefined ? DEFAULT_DAYS : Number(q.days);
      const now = clock.now();
      const today = now - (now % DAY_MS);
      const from = today - (days - 1) * DAY_MS;
      const byKey = new Map<string, number[]>();
      await flushed();
      for (const row of await store.dailyTotals(project.id, keys, q.environment === undefined ? null : envs[0]!.id, from, today + DAY_MS)) {
        let totals = byKey.get(row.flagKey);
        if (totals === undefined) byKey.set(row.flagKey, (totals = new Array<number>(days).fill(0)));
        if (row.bucket !== null) totals[(row.bucket - from) / DAY_MS]! += row.count;
      }
      const flags: DailyInsights["flags"] = [];
      for (const key of keys) {
        const totals = byKey.get(key);
        if (totals === undefined) continue;
        // Not flushed yet: today's.
        for (const env of envs) for (const c of unflushed(env.id, key).cells) if (c.reason !== TEST_OVERRIDE) totals[days - 1]! += c.count;
        flags.push({ flagKey: key, total: totals.reduce((a, b) => a + b, 0), days: totals });
      }
      return { environment: q.environment ?? null, from: iso(from), days, flags };
    },

    /** The hourly rollup and the retention (a background job); what they moved and removed. */
    rollup(): Promise<{ rolled: number; deleted: number }> {
      const now = clock.now();
      const today = now - (now % DAY_MS);
      return store.rollup(today - HOURLY_RETENTION_DAYS * DAY_MS, today - DAILY_RETENTION_DAYS * DAY_MS);
    },

    /**
     * Stale detection (a background job): flushes the counts first (a flag evaluated a moment
     * ago is not stale), then records every flag whose staleness changed. The changes made.
     */
    async detectStale(): Promise<StaleChange[]> {
      flusher.flushLogged();
      // PostgreSQL writes the counts asynchronously: the candidates are read once they are stored.
      await flushed();
      const now = clock.now();
      const changes: StaleChange[] = [];
      for (const c of await store.staleCandidates()) {
        const next = stalenessOf(c, now, observedSince);
        // A change of reason is recorded too; `flag.stale` goes out only when a flag turns stale (events.ts).
        const same = c.stale === null ? next === null : next !== null && next.reason === c.stale.reason;
        if (same) continue;
        changes.push({ project: { id: c.projectId, slug: c.projectSlug }, flagId: c.flagId, key: c.key, before: c.stale, after: next });
      }
      if (changes.length > 0) {
        await store.setStale(SYSTEM, changes);
        log.info("stale flags", { turnedStale: changes.filter((c) => c.before === null).length, noLongerStale: changes.filter((c) => c.after === null).length });
      }
      return changes;
    },
  };
}
