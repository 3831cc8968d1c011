/**
 * The plugin host (decisions §11): runs each active plugin in a worker thread of its own
 * (worker.ts: its QuickJS sandbox, at the lowest CPU priority), feeds it its project's events and evaluation
 * records, and settles its status. The main thread never runs plugin code, never waits on a
 * plugin and never throws into a request because of one:
 *  - `activate` succeeded: `active`; it failed (threw, or the plugin died in it): `error`
 *    (`activate failed: …`);
 *  - the plugin's death (memory cap, CPU slice, stack overflow, crash), the worker thread ending,
 *    three failing hook calls in a row (a throw, or over the wall limit; a success resets the
 *    count), or a worker that does not answer within the wall limit + 5 s (the watchdog): `error`
 *    with the reason, the worker terminated and its instance freed.
 * Status writes come only from the run that is current for its plugin: a stop or restart in
 * between wins. Events are handed over at least once: a plugin's position in its project's
 * queue (`plugins.event_position`) moves when a batch is through, so events of a batch cut short
 * (a crash, a restart) are handed again. An event whose `onEvent` failed is not retried.
 *
 * Several nodes (docs/scaling.md): a plugin runs only on the node that holds its lease
 * `plugin:<id>` (src/modules/leases/). `start` makes this node want it: the worker starts once
 * the lease is granted (at once on SQLite, and when no other node holds it); otherwise the node
 * tries again at each of the keeper's ticks and takes the plugin over when the holder's lease
 * lapses (it died) or is released (it stopped). A lease lost (another node has it now) stops
 * the worker here without a status write: the new holder settles it. `stop` releases it.
 */
import { workerUrl } from "../lib/worker-url";
import { iso, type Clock } from "../lib/clock";
import type { Logger } from "../lib/log";
import type { EvaluationRecords } from "../modules/evaluation/records";
import { runnableTimer } from "../lib/scheduling";
import { secretMask } from "../lib/secret-text";
import type { LeaseKeeper } from "../modules/leases/keeper";
import type { FromPluginWorker, ToPluginWorker } from "./protocol";
import type { RunStatus, RuntimeStore } from "./runtime-store";
import { wasmModule, type SandboxLimits } from "./sandbox";

export type { RunStatus, RuntimeStore } from "./runtime-store";

const WORKER_URL = workerUrl(import.meta.url, "plugins/worker.ts");
/** The watchdog: a worker that owes an answer and says nothing for the wall limit plus this is terminated. */
const WATCHDOG_GRACE_MS = 5000;
/** `stop`: `deactivate` has its wall limit, then the worker goes whatever it does. */
const STOP_GRACE_MS = 1000;
const EVENTS_PER_BATCH = 100;
const FAILURES_IN_A_ROW = 3;
const KEEP_LOG_LINES = 100;
const FLUSH_DROPS_EVERY_MS = 5000;

/** One activation of one installed plugin. */
export interface PluginRun {
  id: string;
  projectId: string;
  projectSlug: string;
  packageName: string;
  version: string;
  /** The entry module's text. */
  source: string;
  /** Real values (secrets in clear). */
  config: Record<string, unknown>;
  /** The forms of the secret config values (`secretForms`, lib/secret-text.ts), derived once: masked as "********" in every log line and error message. */
  secrets: readonly string[];
}


export interface PluginHostDeps {
  store: RuntimeStore;
  records: EvaluationRecords;
  log: Logger;
  clock: Clock;
  /** memoryMb from SVC_PLUGIN_MEMORY_MB. */
  limits: SandboxLimits;
  outboundAllowedHosts: readonly string[];
  /** Which plugins this node runs: those whose lease it holds. */
  leases: Pick<LeaseKeeper, "want" | "drop">;
}

/** The lease a plugin runs under. */
export const pluginLease = (id: string) => `plugin:${id}`;

/** Whether two runs of a plugin are the same code with the same configuration. */
const sameRun = (a: PluginRun, b: PluginRun) => a.version === b.version && a.source === b.source && JSON.stringify(a.config) === JSON.stringify(b.config);

export interface LogLine {
  timestamp: string;
  level: string;
  message: string;
}

interface Running {
  run: PluginRun;
  /** Masks the run's secrets in a text (built once from `run.secrets`). */
  mask: (text: string) => string;
  worker: Worker;
  state: "starting" | "active" | "stopping" | "ended";
  startedAt: number;
  hooks: ReadonlySet<string>;
  logs: LogLine[];
  failures: number;
  /** Where the plugin is in its project's event queue (as handed to it). */
  position: number;
  /** The event batch in flight, and how far the worker got through it. */
  events: { last: number; handled: number; errors: number } | null;
  evaluationsBusy: boolean;
  /** The batch (JSON text) that goes when the one in flight is through. */
  evaluationsWaiting: string | null;
  /** Records dropped and not yet added to the stored count. */
  dropped: number;
  /** The stored count of dropped records (read at launch, then kept with each flush). */
  storedDropped: number;
  /** Events are being read from the store; `feedAgain`: new ones were committed meanwhile. */
  feeding: boolean;
  feedAgain: boolean;
  /** Work posted that the worker has not answered yet (the watchdog runs while there is some). */
  owed: number;
  /** Cancels the watchdog's timer (none while nothing is owed). */
  watchdog: (() => void) | undefined;
  /** The worker thread's kernel id: the watchdog does not count the time it waited for a CPU. */
  tid: number | null;
  /** The CPU priority the worker thread got (scheduling.ts): idle, nice 19, or normal. */
  priority: string;
  unsubscribe: (() => void) | undefined;
  onStopped: (() => void) | undefined;
}

export class PluginHost {
  private readonly runs = new Map<string, Running>();
  /** Every plugin this node is to run (its latest run), whether it holds the lease yet or not. */
  private readonly assigned = new Map<string, PluginRun>();
  private readonly dropsTimer: ReturnType<typeof setInterval>;
  private statusWrites: Promise<void> = Promise.resolve();

  constructor(private readonly deps: PluginHostDeps) {
    this.dropsTimer = setInterval(() => this.flushDrops(), FLUSH_DROPS_EVERY_MS);
    this.dropsTimer.unref();
  }

  /** Plugins running now, each in its worker (the health detail). */
  get workers(): number {
    return this.runs.size;
  }

  /**
   * The plugin is to run on this node when it holds its lease (at once if it does already). The
   * same run as the one active here changes nothing (every node calls this on each change of
   * the plugin: the bus); another one restarts it. Never throws, never blocks.
   */
  start(run: PluginRun): void {
    this.assigned.set(run.id, run);
    this.deps.leases.want(pluginLease(run.id), { gained: () => void this.gained(run.id), lost: () => void this.halt(run.id) });
  }

  /**
   * The lease is this node's: the latest run assigned starts, unless the stored row says it is
   * not to run (a plugin that ended in `error` on the node that held it before stays stopped
   * until an API write revives it).
   */
  private async gained(id: string): Promise<void> {
    const run = this.assigned.get(id);
    if (!run) return;
    const running = this.runs.get(id);
    if (running && this.current(running) && sameRun(running.run, run)) return;
    let runnable: boolean;
    try {
      runnable = await this.deps.store.runnable(id);
    } catch (e) {
      // The lease let go and wanted again: tried at the keeper's next tick.
      this.deps.log.error("plugin: reading whether it is to run failed", { pluginId: id, error: e instanceof Error ? e.message : String(e) });
      await this.deps.leases.drop(pluginLease(id));
      const again = this.assigned.get(id);
      if (again) this.start(again);
      return;
    }
    const latest = this.assigned.get(id);
    if (runnable && latest) this.launchRun(latest);
  }

  /** Starts (or restarts) a plugin here: worker, sandbox, activate; then feeds it. Settles its status. */
  private launchRun(run: PluginRun): void {
    const running = this.runs.get(run.id);
    if (running && this.current(running) && sameRun(running.run, run)) return;
    if (running) void this.halt(run.id);
    let worker: Worker;
    try {
      worker = new Worker(WORKER_URL, { smol: true });
    } catch (e) {
      this.settle(run.id, { status: "error", errorMessage: `could not start a worker thread: ${e instanceof Error ? e.message : String(e)}` });
      return;
    }
    const r: Running = {
      run,
      mask: secretMask(run.secrets),
      worker,
      state: "starting",
      startedAt: performance.now(),
      hooks: new Set(),
      logs: [],
      failures: 0,
      position: 0,
      events: null,
      evaluationsBusy: false,
      evaluationsWaiting: null,
      dropped: 0,
      storedDropped: 0,
      feeding: false,
      feedAgain: false,
      owed: 0,
      watchdog: undefined,
      tid: null,
      priority: "normal",
      unsubscribe: undefined,
      onStopped: undefined,
    };
    this.runs.set(run.id, r);
    // A start after a restart: the stored status says what the last run was until this one settles.
    this.settle(run.id, { status: "installing" }, r);
    worker.onmessage = (event: MessageEvent<FromPluginWorker>) => {
      try {
        this.receive(r, event.data);
      } catch (e) {
        // A store write failed (the database is closing): the plugin cannot go on reliably.
        this.fail(r, `host error: ${e instanceof Error ? e.message : String(e)}`);
      }
    };
    worker.addEventListener("error", (event) => this.fail(r, `worker thread failed: ${(event as ErrorEvent).message}`));
    worker.addEventListener("close", () => this.fail(r, "worker thread ended unexpectedly"));
    void this.launch(r);
  }

  /** Not to run here any longer: `deactivate` (its wall limit at most), the worker terminated, the lease released; no status written. */
  async stop(id: string): Promise<void> {
    this.assigned.delete(id);
    await this.halt(id);
    await this.deps.leases.drop(pluginLease(id));
  }

  /** `deactivate` (its wall limit at most), then the worker terminated; no status written. Resolves when it is gone. */
  private async halt(id: string): Promise<void> {
    const r = this.runs.get(id);
    if (!r) return;
    this.runs.delete(id);
    if (r.state === "ended") return;
    r.state = "stopping";
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      r.onStopped = resolve;
      timer = setTimeout(resolve, this.deps.limits.wallMs + STOP_GRACE_MS);
      this.post(r, { kind: "stop" });
    });
    clearTimeout(timer);
    await this.end(r);
  }

  /** New rows in the change-event queue for this project (after a commit): its running plugins pull them. */
  eventsCommitted(projectId: string): void {
    for (const r of this.runs.values()) if (r.run.projectId === projectId && r.state === "active") this.feed(r);
  }

  /** What GET .../status shows live: the last 100 log lines and the records dropped (stored + not yet stored). */
  live(id: string): { logs: LogLine[]; evaluationsDropped: number } | undefined {
    const r = this.runs.get(id);
    if (!r) return undefined;
    return { logs: [...r.logs], evaluationsDropped: r.storedDropped + r.dropped };
  }

  /** A deleted project's plugins (their rows went with it): stopped. */
  stopProject(projectId: string): void {
    for (const [id, run] of this.assigned) if (run.projectId === projectId) void this.stop(id);
  }

  /** A graceful stop of every plugin (`deactivate` each), before the database closes. */
  async stopAll(): Promise<void> {
    clearInterval(this.dropsTimer);
    await Promise.all([...new Set([...this.runs.keys(), ...this.assigned.keys()])].map((id) => this.stop(id)));
  }

  /**
   * At once: every worker terminated, what each got through stored (the database is about to
   * close; the SQLite store has written it when this returns, the promise is for the others).
   */
  close(): Promise<void> {
    clearInterval(this.dropsTimer);
    this.assigned.clear();
    const writes = [...this.runs.values()].map((r) => this.end(r));
    this.runs.clear();
    return Promise.all(writes).then(() => undefined);
  }

  private async launch(r: Running): Promise<void> {
    // Compiled once on this thread and handed to every worker; a worker compiles it if this fails.
    const wasm = await wasmModule().catch(() => null);
    if (r.state !== "starting") return;
    try {
      [r.position, r.storedDropped] = await Promise.all([this.deps.store.positionOf(r.run.id), this.deps.store.droppedOf(r.run.id)]);
    } catch (e) {
      this.fail(r, `host error: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    if (r.state !== "starting") return;
    const { source, config } = r.run;
    this.post(r, {
      kind: "start",
      wasm,
      source,
      config,
      secrets: r.run.secrets,
      limits: this.deps.limits,
      outboundAllowedHosts: this.deps.outboundAllowedHosts,
    });
  }

  private receive(r: Running, m: FromPluginWorker): void {
    if (m.kind === "log") return this.keep(r, m.level, m.message);
    if (m.kind === "thread") {
      r.tid = m.tid;
      r.priority = m.priority;
      return;
    }
    if (m.kind === "stopped") return r.onStopped?.();
    if (r.state === "ended") return;
    switch (m.kind) {
      case "active": {
        this.answered(r);
        if (r.state !== "starting") return;
        r.state = "active";
        r.hooks = new Set(m.hooks);
        this.settle(r.run.id, { status: "active" }, r);
        this.deps.log.info("plugin active", { pluginId: r.run.id, packageName: r.run.packageName, version: r.run.version, ms: Math.round(performance.now() - r.startedAt), priority: r.priority });
        if (r.hooks.has("onEvaluations")) {
          r.unsubscribe = this.deps.records.subscribe(r.run.projectId, {
            // One batch in flight and one waiting; a batch beyond that is dropped and counted (and not built for this plugin).
            ready: () => r.state === "active" && (!r.evaluationsBusy || r.evaluationsWaiting === null),
            take: (json) => {
              if (r.evaluationsBusy) r.evaluationsWaiting = json;
              else this.sendEvaluations(r, json);
            },
            missed: (count) => (r.dropped += count),
          });
        }
        this.feed(r);
        return;
      }
      case "dead":
        this.fail(r, m.message);
        return;
      case "hook":
        this.refresh(r);
        if (r.events) {
          r.events.last = m.position;
          if (m.error === null) r.events.handled++;
          else r.events.errors++;
        }
        this.hookEnded(r, "onEvent", m.error);
        return;
      case "done":
        this.answered(r);
        if (m.batch === "events") {
          this.recordEvents(r).catch((e) => this.fail(r, `host error: ${e instanceof Error ? e.message : String(e)}`));
          if (r.state === "active") this.feed(r);
          return;
        }
        this.hookEnded(r, "onEvaluations", m.error);
        r.evaluationsBusy = false;
        const waiting = r.evaluationsWaiting;
        r.evaluationsWaiting = null;
        if (waiting !== null && r.state === "active") this.sendEvaluations(r, waiting);
        return;
    }
  }

  /** A hook call's outcome: a success resets the failure count; the third failure in a row ends the run. */
  private hookEnded(r: Running, hook: string, error: string | null): void {
    if (error === null) {
      r.failures = 0;
      return;
    }
    this.keep(r, "error", `${hook} failed: ${error}`);
    if (++r.failures >= FAILURES_IN_A_ROW && r.state === "active") this.fail(r, `${FAILURES_IN_A_ROW} hook calls failed in a row; last: ${hook}: ${error}`);
  }

  /** Hands the plugin the next events of its project, one batch in flight at a time (one read at a time). */
  private feed(r: Running): void {
    if (r.events || !this.current(r)) return;
    if (r.feeding) {
      r.feedAgain = true;
      return;
    }
    r.feeding = true;
    r.feedAgain = false;
    this.pull(r).then(
      () => {
        r.feeding = false;
        if (r.feedAgain) this.feed(r);
      },
      (e) => {
        r.feeding = false;
        this.fail(r, `host error: ${e instanceof Error ? e.message : String(e)}`);
      },
    );
  }

  private async pull(r: Running): Promise<void> {
    const { store } = this.deps;
    if (!r.hooks.has("onEvent")) {
      // Nothing to hand: the position follows the queue, so that the events can be pruned.
      for (;;) {
        const rows = await store.eventsAfter(r.run.projectId, r.position, EVENTS_PER_BATCH);
        if (rows.length === 0 || !this.current(r)) return;
        r.position = rows[rows.length - 1]!.position;
        await store.handed(r.run.id, r.position, { handled: 0, errors: 0, lastEventAt: null });
      }
    }
    const events = await store.eventsAfter(r.run.projectId, r.position, EVENTS_PER_BATCH);
    if (events.length === 0 || r.events || !this.current(r)) return;
    r.events = { last: r.position, handled: 0, errors: 0 };
    this.post(r, { kind: "events", events });
  }

  /** The batch in flight, as far as the worker got: its position and counters stored. */
  private recordEvents(r: Running): Promise<void> {
    const batch = r.events;
    r.events = null;
    if (!batch || batch.last <= r.position) return Promise.resolve();
    r.position = batch.last;
    const lastEventAt = batch.handled + batch.errors > 0 ? iso(this.deps.clock.now()) : null;
    return this.deps.store.handed(r.run.id, batch.last, { handled: batch.handled, errors: batch.errors, lastEventAt });
  }

  private sendEvaluations(r: Running, batch: string): void {
    r.evaluationsBusy = true;
    this.post(r, { kind: "evaluations", batch });
  }

  /** Posts to the worker; `owed`: the worker must answer it (the watchdog runs meanwhile). */
  private post(r: Running, message: ToPluginWorker, owed = message.kind !== "stop"): void {
    if (owed) {
      r.owed++;
      this.refresh(r);
    }
    r.worker.postMessage(message);
  }

  /** A sign of progress: the watchdog starts over (or stops when nothing is owed). */
  private refresh(r: Running): void {
    r.watchdog?.();
    r.watchdog = undefined;
    if (r.owed === 0 || r.state === "ended") return;
    const ms = this.deps.limits.wallMs + WATCHDOG_GRACE_MS;
    r.watchdog = runnableTimer(ms, () => this.fail(r, `did not answer within ${ms} ms`), r.tid);
  }

  private answered(r: Running): void {
    r.owed = Math.max(0, r.owed - 1);
    this.refresh(r);
  }

  private current(r: Running): boolean {
    return this.runs.get(r.run.id) === r && r.state !== "ended" && r.state !== "stopping";
  }

  /** The run's end in `error` (only while it is current); its logs stay readable until the plugin is stopped or started again. */
  private fail(r: Running, reason: string): void {
    if (!this.current(r)) return;
    const errorMessage = r.mask(reason);
    this.end(r);
    this.keep(r, "error", errorMessage);
    this.settle(r.run.id, { status: "error", errorMessage }, r);
    this.deps.log.warn("plugin error", { pluginId: r.run.id, packageName: r.run.packageName, version: r.run.version, error: errorMessage });
  }

  /** Stores the status; status writes are stored in the order they were settled. */
  private settle(id: string, status: RunStatus, r?: Running): void {
    if (r && this.runs.get(id) !== r) return;
    this.statusWrites = this.statusWrites
      .then(() => this.deps.store.setStatus(id, status))
      .catch((e) => this.deps.log.error("plugin status not stored", { pluginId: id, error: e instanceof Error ? e.message : String(e) }));
  }

  /** Terminates the worker and frees what the run holds; what it got through is stored (the promise settles then). */
  private end(r: Running): Promise<void> {
    if (r.state === "ended") return Promise.resolve();
    r.state = "ended";
    r.watchdog?.();
    r.unsubscribe?.();
    r.worker.terminate();
    return Promise.all([this.recordEvents(r), this.flushDropsOf(r)]).then(
      () => undefined,
      (e) => this.deps.log.error("plugin counters not stored", { pluginId: r.run.id, error: e instanceof Error ? e.message : String(e) }),
    );
  }

  private keep(r: Running, level: string, message: string): void {
    r.logs.push({ timestamp: iso(this.deps.clock.now()), level, message });
    if (r.logs.length > KEEP_LOG_LINES) r.logs.shift();
  }

  private flushDrops(): void {
    Promise.all([...this.runs.values()].map((r) => this.flushDropsOf(r))).catch((e) =>
      this.deps.log.error("dropped evaluation counts not stored", { error: e instanceof Error ? e.message : String(e) }),
    );
  }

  private async flushDropsOf(r: Running): Promise<void> {
    if (r.dropped === 0) return;
    const count = r.dropped;
    r.dropped = 0;
    r.storedDropped += count;
    await this.deps.store.addDropped(r.run.id, count);
  }
}
