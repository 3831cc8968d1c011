/**
 * Scheduled changes of a flag's state (docs/targeting.md, "Scheduled changes"). Creating and
 * cancelling are changes of a `schedule` resource, with their entries. Applying one is the
 * flag service's own `putState`, authored by the schedule's creator with the schedule's id as
 * the request id: its entry, webhooks, streams, plugins and integrations all follow from that
 * write, and the store's participant marks the schedule applied in its transaction.
 */
import { SYSTEM, whole, type Author, type ChangeDraft } from "../../changes/entry";
import { ApiError, conflict, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { FlagService } from "../flags/service";
import { hasAtMost3Decimals } from "../flags/service";
import type { FlagStore } from "../flags/store";
import { requireEnvironment, requireProject, type Project } from "../projects/service";
import type { ProjectStore } from "../projects/store";
import type { Schedule, ScheduledState, ScheduleStatus, ScheduleStore } from "./store";

/** A schedule as the API shows it. */
export type ScheduleView = Omit<Schedule, "projectId" | "flagId" | "environmentId">;

export interface NewScheduleInput {
  environment: string;
  at?: string;
  state?: ScheduledState;
  steps?: { at: string; state: ScheduledState }[];
}

/** Due schedules taken in one go; the next run takes the rest. */
const DUE_BATCH = 500;

export function viewOf({ projectId: _p, flagId: _f, environmentId: _e, ...view }: Schedule): ScheduleView {
  return view;
}

function scheduleChange(project: Project, s: Schedule, action: ChangeDraft["action"], changes: ChangeDraft["changes"]): ChangeDraft {
  return { project: { id: project.id, slug: project.slug }, environment: s.environment, resource: { type: "schedule", id: s.id, key: s.flagKey }, action, changes };
}

/** `state` as stored: the fields sent, in a fixed order. */
function stateOf(state: ScheduledState): ScheduledState {
  return {
    ...(state.enabled !== undefined ? { enabled: state.enabled } : {}),
    ...(state.rolloutPercentage !== undefined ? { rolloutPercentage: state.rolloutPercentage } : {}),
  };
}

/** Whether the day of an ISO 8601 time exists (Date.parse takes February 30 for March 2). */
function realDay(at: string): boolean {
  const [y, m, d] = at.slice(0, 10).split("-").map(Number) as [number, number, number];
  return m >= 1 && m <= 12 && d >= 1 && d <= new Date(Date.UTC(y, m, 0)).getUTCDate();
}

/** Problems of one `{ at, state }` at `path` (`body` or `body.steps[i]`); the time in ms when valid. */
function checkStep(step: { at?: string; state?: ScheduledState }, path: string, now: number, details: ErrorDetail[]): number {
  const prefix = path === "body" ? "body." : `${path}.`;
  let ms = NaN;
  if (step.at === undefined) details.push({ path: `${prefix}at`, message: "Required" });
  else {
    ms = realDay(step.at) ? Date.parse(step.at) : NaN;
    if (Number.isNaN(ms)) details.push({ path: `${prefix}at`, message: "Not a valid time" });
    else if (ms <= now) details.push({ path: `${prefix}at`, message: `Must be in the future (now: ${iso(now)})` });
  }
  if (step.state === undefined) details.push({ path: `${prefix}state`, message: "Required" });
  else {
    if (step.state.enabled === undefined && step.state.rolloutPercentage === undefined) {
      details.push({ path: `${prefix}state`, message: "Must set at least one of enabled, rolloutPercentage" });
    }
    const p = step.state.rolloutPercentage;
    if (p != null && !hasAtMost3Decimals(p)) details.push({ path: `${prefix}state.rolloutPercentage`, message: "At most 3 decimal places" });
  }
  return ms;
}

export interface ScheduleServiceDeps {
  schedules: ScheduleStore;
  flags: FlagStore;
  projects: ProjectStore;
  /** The flag service: a schedule applies through its `putState`, as a request would. */
  flagService: Pick<FlagService, "putState">;
  clock: Clock;
  log: Logger;
}

export type ScheduleService = ReturnType<typeof scheduleService>;

export function scheduleService({ schedules, flags, projects, flagService, clock, log }: ScheduleServiceDeps) {
  let running: Promise<number> | undefined;

  const fail = async (s: Schedule, project: Project | undefined, error: string) => {
    log.warn("scheduled change failed", { schedule: s.id, flag: s.flagKey, environment: s.environment, error });
    const author: Author = { actor: SYSTEM.actor, requestId: s.id };
    await schedules.update(author, s.projectId, s.id, (current) => {
      if (!current || current.status !== "pending") return { result: current ?? s, changes: [] };
      const next: Schedule = { ...current, status: "failed", error };
      const changes = { status: { before: "pending", after: "failed" }, error: { before: null, after: error } };
      return { result: next, changes: project ? [scheduleChange(project, next, "updated", changes)] : [] };
    });
  };

  const applyOne = async (s: Schedule): Promise<void> => {
    const project = (await projects.list(s.projectId))[0];
    if (!project) return; // its project is gone, and its schedules with it
    const env = project.environments.find((e) => e.id === s.environmentId);
    if (!env) return fail(s, project, `Environment ${s.environment} no longer exists`);
    const flag = await flags.find(project.id, s.flagKey);
    if (!flag || flag.id !== s.flagId) return fail(s, project, `Flag ${s.flagKey} no longer exists`);
    try {
      await flagService.putState({ actor: s.createdBy, requestId: s.id }, project.slug, s.flagKey, env.slug, s.state);
    } catch (e) {
      if (e instanceof ApiError) return fail(s, project, e.message);
      throw e;
    }
    // A write that changed nothing has no entry to mark it: marked here (a no-op when its entry did).
    await schedules.markApplied(s.id, iso(clock.now()));
  };

  const applyDue = async (): Promise<number> => {
    let applied = 0;
    // One attempt each per run: one that stays pending (its failure could not be recorded) waits for the next run.
    const tried = new Set<string>();
    for (;;) {
      const due = (await schedules.due(iso(clock.now()), DUE_BATCH + tried.size)).filter((s) => !tried.has(s.id));
      if (due.length === 0) return applied;
      for (const s of due) {
        tried.add(s.id);
        try {
          await applyOne(s);
        } catch (e) {
          const error = e instanceof Error ? e.message : String(e);
          log.error("scheduled change could not be applied", { schedule: s.id, error });
          await fail(s, (await projects.list(s.projectId))[0], `Internal error: ${error}`).catch((e2) =>
            log.error("scheduled change: its failure could not be recorded", { schedule: s.id, error: e2 instanceof Error ? e2.message : String(e2) }),
          );
        }
        applied++;
      }
    }
  };

  return {
    async create(author: Author, slug: string, key: string, input: NewScheduleInput): Promise<ScheduleView | { schedules: ScheduleView[] }> {
      const project = await requireProject(projects, slug);
      const now = clock.now();
      const details: ErrorDetail[] = [];
      const ramp = input.steps !== undefined;
      if (ramp && (input.at !== undefined || input.state !== undefined)) {
        details.push({ path: "body.steps", message: "Send either at and state (one schedule) or steps (a ramp), not both" });
      }
      const steps = ramp ? input.steps! : [{ at: input.at, state: input.state }];
      const times = steps.map((step, i) => checkStep(step, ramp ? `body.steps[${i}]` : "body", now, details));
      if (details.length > 0) throw validationError("Invalid schedule", details);
      const env = requireEnvironment(project, input.environment);
      const flag = await flags.find(project.id, key);
      if (!flag) throw notFound(`Flag ${key} in project ${project.slug}`);
      const createdAt = iso(now);
      const rows: Schedule[] = steps.map((step, i) => ({
        id: newId("sch"),
        projectId: project.id,
        flagId: flag.id,
        flagKey: flag.key,
        environmentId: env.id,
        environment: env.slug,
        at: iso(times[i]!),
        state: stateOf(step.state!),
        status: "pending",
        createdBy: author.actor,
        createdAt,
        appliedAt: null,
        error: null,
      }));
      await schedules.create(
        author,
        rows,
        rows.map((s) => scheduleChange(project, s, "created", whole({ ...viewOf(s), appliedAt: undefined, error: undefined }, "created"))),
      );
      const views = rows.map(viewOf);
      return ramp ? { schedules: views } : views[0]!;
    },

    async list(slug: string, filter: { key?: string; status?: ScheduleStatus }): Promise<{ schedules: ScheduleView[] }> {
      const project = await requireProject(projects, slug);
      let flagId: string | undefined;
      if (filter.key !== undefined) {
        const flag = await flags.find(project.id, filter.key);
        if (!flag) throw notFound(`Flag ${filter.key} in project ${project.slug}`);
        flagId = flag.id;
      }
      return { schedules: (await schedules.list(project.id, { flagId, status: filter.status })).map(viewOf) };
    },

    /** Cancels a pending schedule of this flag key (the flag itself may be gone); 409 when it is not pending. */
    async cancel(author: Author, slug: string, key: string, id: string): Promise<ScheduleView> {
      const project = await requireProject(projects, slug);
      const done = await schedules.update(author, project.id, id, (current) => {
        if (!current || current.flagKey !== key) throw notFound(`Schedule ${id} of flag ${key} in project ${project.slug}`);
        if (current.status !== "pending") throw conflict(`Schedule ${id} is ${current.status}: only a pending schedule can be cancelled`);
        const next: Schedule = { ...current, status: "cancelled" };
        return { result: next, changes: [scheduleChange(project, next, "updated", { status: { before: "pending", after: "cancelled" } })] };
      });
      return viewOf(done);
    },

    /** Applies every pending schedule whose time has come, by `at` then id; how many it took. Runs never overlap. */
    applyDue(): Promise<number> {
      const run = (running ?? Promise.resolve(0)).catch(() => 0).then(() => applyDue());
      running = run;
      const clear = () => {
        if (running === run) running = undefined;
      };
      run.then(clear, clear);
      return run;
    },

    /** Pending schedules whose time has come (at start: those missed while stopped). */
    countDue(): Promise<number> {
      return schedules.countPending(iso(clock.now()));
    },

    /** Every pending schedule (the metric to come). */
    countPending(): Promise<number> {
      return schedules.countPending();
    },
  };
}
