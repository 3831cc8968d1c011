/**
 * The open streams of every environment, and where each environment stands in the change log.
 *
 * - OFREP change streams (`GET /ofrep/v1/events`): one `refetchEvaluation` message per commit
 *   that changes what the environment evaluates to (a flag of its project created, updated or
 *   deleted; a segment of its project changed, as a change of every flag that uses it; its own
 *   state of a flag), with the commit's last such position as id and etag.
 * - Definitions streams (`GET /v1/definitions/stream`): a `put` of the whole environment, then
 *   one `patch` per such commit with the current records of the flags it touched, read once per
 *   environment after the commit and fanned out to every stream of that environment.
 *
 * The hub hears each commit only once the evaluation snapshot holds it (it is the snapshot
 * subscriber's `after`: src/modules/flags/snapshot.ts), in commit order, so a client that
 * refetches right after a message evaluates the new state. A project or environment deleted
 * ends its streams; so does a key deleted or a secret rotated out (the credential registry's
 * reload), or a grace period run out (checked with every heartbeat, every 15 s).
 */
import type { ChangeEntry } from "../../changes/entry";
import type { ApiKeyPrincipal } from "../../http/access";
import type { StreamBinding } from "../../http/credentials";
import type { Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { encode, PING, SseStream } from "./sse";
import type { Definitions, DefinitionsStore, EnvironmentChange, FlagRecord, SegmentRecord } from "./store";

/** Every stream gets a `: ping` comment this often, and its credential is checked again. */
export const HEARTBEAT_MS = 15_000;
/** A resume that missed more entries touching the environment than this gets a `put` instead. */
export const RESUME_LIMIT = 1000;

/** What the hub asks of the credential registry. */
export interface StreamCredentials {
  streamPrincipal(binding: StreamBinding, now: number): ApiKeyPrincipal | undefined;
}

interface EnvironmentState extends EnvironmentChange {
  changes: Set<ChangeStream>;
  definitions: Set<DefinitionStream>;
}

/** A stream and the credential it was opened with (re-checked on every reload and heartbeat). */
interface OpenStream {
  sse: SseStream;
  binding: StreamBinding;
}

type ChangeStream = OpenStream;

interface DefinitionStream extends OpenStream {
  /** Until its first event is written, what comes is kept in `held`. */
  started: boolean;
  held: { position: number; chunk: Uint8Array }[];
  /** Events at or below this position are already in what was sent. */
  after: number;
}

export interface StreamHubDeps {
  store: DefinitionsStore;
  credentials: StreamCredentials;
  clock: Clock;
  log: Logger;
  /** Where every environment stands at start (the store's `lastChanges`). */
  initial: { position: number; environments: readonly EnvironmentChange[] };
  /** Default HEARTBEAT_MS; 0: no timer (tests call `heartbeat()`). */
  heartbeatMs?: number;
}

/** The `data` of an OFREP message (OFREP ADR 0008): etag `"<position>"`, lastModified in Unix seconds. */
export const refetchEvaluation = (position: number, at: number) =>
  `id: ${position}\nevent: message\ndata: ${JSON.stringify({ type: "refetchEvaluation", etag: `"${position}"`, lastModified: Math.floor(at / 1000) })}\n\n`;

export const putEvent = (d: Definitions) => `event: put\nid: ${d.version}\ndata: ${JSON.stringify(d)}\n\n`;

/** `segments`: those the patch's flags use (docs/streams.md); omitted when none. */
export const patchEvent = (version: number, flags: readonly FlagRecord[], deleted: readonly string[], segments: readonly SegmentRecord[] = []) =>
  `event: patch\nid: ${version}\ndata: ${JSON.stringify(segments.length > 0 ? { version, flags, deleted, segments } : { version, flags, deleted })}\n\n`;

/** A `Last-Event-ID` as a position: digits only, else null (a fresh start). */
export function positionOf(lastEventId: string | null | undefined): number | null {
  if (lastEventId == null || !/^\d{1,15}$/.test(lastEventId.trim())) return null;
  return Number(lastEventId.trim());
}

export class StreamHub {
  private readonly environments = new Map<string, EnvironmentState>();
  private readonly projects = new Map<string, Set<EnvironmentState>>();
  /** The last position the hub has heard (the snapshot holds everything up to it). */
  private seen: number;
  private waiters: { position: number; done: (reached: boolean) => void; timer: ReturnType<typeof setTimeout> }[] = [];
  /** Patches are read and sent one after another, in commit order. */
  private patches: Promise<void> = Promise.resolve();
  private readonly timer: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  private readonly store: DefinitionsStore;
  private readonly credentials: StreamCredentials;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(deps: StreamHubDeps) {
    ({ store: this.store, credentials: this.credentials, clock: this.clock, log: this.log } = deps);
    this.seen = deps.initial.position;
    for (const e of deps.initial.environments) this.addEnvironment(e);
    const every = deps.heartbeatMs ?? HEARTBEAT_MS;
    if (every > 0) {
      this.timer = setInterval(() => this.heartbeat(), every);
      this.timer.unref?.();
    }
  }

  // ---- where environments stand ------------------------------------------------------------------

  /**
   * The environment's last change that alters evaluation: its position in the change log and its
   * time (ms). `{ position: 0, at: 0 }` when none is known (an unknown environment, or its entries
   * all removed by retention). In memory, up to date with every commit the snapshot holds.
   */
  lastChange(environmentId: string): { position: number; at: number } {
    const e = this.environments.get(environmentId);
    return e ? { position: e.position, at: e.at } : { position: 0, at: 0 };
  }

  /**
   * Resolves true once the hub (and so the evaluation snapshot) has seen `position`, false after
   * `timeoutMs` or when the hub closes.
   */
  waitFor(position: number, timeoutMs: number): Promise<boolean> {
    if (position <= this.seen) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        position,
        done: (reached: boolean) => {
          clearTimeout(waiter.timer);
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(reached);
        },
        timer: setTimeout(() => waiter.done(false), timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** Open streams, for tests and diagnostics. */
  size(): { changes: number; definitions: number } {
    let changes = 0;
    let definitions = 0;
    for (const e of this.environments.values()) {
      changes += e.changes.size;
      definitions += e.definitions.size;
    }
    return { changes, definitions };
  }

  private addEnvironment(e: EnvironmentChange): EnvironmentState {
    const state: EnvironmentState = { ...e, changes: new Set(), definitions: new Set() };
    this.environments.set(e.id, state);
    let project = this.projects.get(e.projectId);
    if (project === undefined) this.projects.set(e.projectId, (project = new Set()));
    project.add(state);
    return state;
  }

  private removeEnvironment(state: EnvironmentState): void {
    this.environments.delete(state.id);
    this.projects.get(state.projectId)?.delete(state);
    for (const s of [...state.changes, ...state.definitions]) s.sse.close();
  }

  private environmentOf(principal: ApiKeyPrincipal): EnvironmentState {
    return (
      this.environments.get(principal.environmentId) ??
      this.addEnvironment({ id: principal.environmentId, projectId: principal.projectId, slug: principal.environmentSlug, position: 0, at: 0 })
    );
  }

  // ---- the commits -------------------------------------------------------------------------------

  /**
   * One commit's entries, once the snapshot holds them (its `after`), in commit order. Sends each
   * touched environment one OFREP message, schedules its definitions patch, ends the streams of
   * what was deleted.
   */
  readonly subscriber = (entries: readonly ChangeEntry[]): void => {
    const touched = new Map<EnvironmentState, { position: number; at: number; keys: Set<string>; segments: Set<string> }>();
    const touch = (env: EnvironmentState, e: ChangeEntry) => {
      let t = touched.get(env);
      if (t === undefined) touched.set(env, (t = { position: e.position, at: Date.parse(e.at), keys: new Set(), segments: new Set() }));
      t.position = e.position;
      t.at = Date.parse(e.at);
      // A segment's entry touches the flags that use it: found when the patch is read.
      (e.resource.type === "segment" ? t.segments : t.keys).add(e.resource.key!);
    };
    for (const e of entries) {
      if (e.position > this.seen) this.seen = e.position;
      if (e.project === null) continue;
      const projectId = e.project.id;
      switch (e.resource.type) {
        case "project":
          if (e.action === "created") for (const env of createdEnvironments(e)) this.addEnvironment(env);
          else if (e.action === "deleted") {
            for (const env of this.projects.get(projectId) ?? []) this.removeEnvironment(env);
            this.projects.delete(projectId);
          }
          break;
        case "environment":
          if (e.action === "created") {
            this.addEnvironment({ id: e.resource.id, projectId, slug: e.resource.key ?? e.environment!, position: e.position, at: Date.parse(e.at) });
          } else if (e.action === "deleted") {
            const env = this.environments.get(e.resource.id);
            if (env) this.removeEnvironment(env);
          }
          break;
        case "flag":
        case "segment":
          for (const env of this.projects.get(projectId) ?? []) touch(env, e);
          break;
        case "flag_state":
          for (const env of this.projects.get(projectId) ?? []) if (env.slug === e.environment) touch(env, e);
          break;
      }
    }
    for (const [env, t] of touched) {
      if (!this.environments.has(env.id)) continue; // deleted later in the same commit
      env.position = t.position;
      env.at = t.at;
      if (env.changes.size > 0) {
        const chunk = encode(refetchEvaluation(t.position, t.at));
        for (const s of env.changes) s.sse.write(chunk);
      }
      if (env.definitions.size > 0) this.schedulePatch(env, t.position, [...t.keys].sort(), [...t.segments]);
    }
    if (this.waiters.length > 0) for (const w of this.waiters.filter((w) => w.position <= this.seen)) w.done(true);
  };

  private schedulePatch(env: EnvironmentState, position: number, keys: string[], segments: string[]): void {
    this.patches = this.patches
      .then(async () => {
        if (env.definitions.size === 0) return;
        const records = await this.store.records(env.projectId, env.id, keys, segments);
        const present = new Set(records.flags.map((f) => f.key));
        const chunk = encode(patchEvent(position, records.flags, keys.filter((k) => !present.has(k)), records.segments));
        for (const s of env.definitions) deliver(s, position, chunk);
      })
      .catch((e) => this.log.error("definitions stream: a patch failed", { error: e instanceof Error ? e.message : String(e) }));
  }

  // ---- opening streams ---------------------------------------------------------------------------

  /**
   * An OFREP change stream of the principal's environment. With `Last-Event-ID`, a client that
   * missed a change (the environment's last change is not the id it last saw) is told at once.
   */
  openChanges(principal: ApiKeyPrincipal, lastEventId: string | null): ReadableStream<Uint8Array> {
    const env = this.environmentOf(principal);
    const sse = new SseStream(() => env.changes.delete(stream));
    const stream: ChangeStream = { sse, binding: bindingOf(principal) };
    if (this.closed) {
      sse.close();
      return sse.body;
    }
    env.changes.add(stream);
    if (lastEventId !== null && lastEventId.trim() !== String(env.position)) sse.write(encode(refetchEvaluation(env.position, env.at)));
    return sse.body;
  }

  /**
   * A definitions stream of the principal's environment: registered first (what comes meanwhile
   * is held), then the environment is read and sent as a `put` (or, with `Last-Event-ID`, what
   * was missed: nothing, one `patch`, or a `put`), then what was held and is newer.
   */
  openDefinitions(principal: ApiKeyPrincipal, lastEventId: string | null): ReadableStream<Uint8Array> {
    const env = this.environmentOf(principal);
    const sse = new SseStream(() => env.definitions.delete(stream));
    const stream: DefinitionStream = { sse, binding: bindingOf(principal), started: false, held: [], after: 0 };
    if (this.closed) {
      sse.close();
      return sse.body;
    }
    env.definitions.add(stream);
    void this.startDefinitions(stream, env.id, positionOf(lastEventId)).catch((e) => {
      this.log.error("definitions stream: the first read failed", { error: e instanceof Error ? e.message : String(e) });
      sse.close();
    });
    return sse.body;
  }

  private async startDefinitions(stream: DefinitionStream, environmentId: string, after: number | null): Promise<void> {
    let first: string | null;
    let position: number;
    if (after === null) {
      const definitions = await this.store.environment(environmentId);
      if (definitions === undefined) return stream.sse.close();
      first = putEvent(definitions);
      position = definitions.version;
    } else {
      const resume = await this.store.resume(environmentId, after, RESUME_LIMIT);
      if (resume === undefined) return stream.sse.close();
      position = resume.position;
      if (resume.kind === "full") first = putEvent(resume.definitions);
      else first = resume.last > 0 ? patchEvent(resume.last, resume.flags, resume.deleted, resume.segments) : null;
    }
    if (first !== null) stream.sse.write(encode(first));
    stream.after = position;
    stream.started = true;
    for (const { position: p, chunk } of stream.held.splice(0)) deliver(stream, p, chunk);
  }

  // ---- credentials and the heartbeat -------------------------------------------------------------

  /**
   * Ends every stream whose key or secret is no longer accepted: called after each credential
   * reload (a key deleted or rotated) and with each heartbeat (a grace period run out).
   */
  revalidate(now = this.clock.now()): void {
    for (const env of this.environments.values()) {
      for (const s of [...env.changes, ...env.definitions]) if (this.credentials.streamPrincipal(s.binding, now) === undefined) s.sse.close();
    }
  }

  /** Every stream gets a `: ping`, after its credential is checked again. */
  heartbeat(): void {
    this.revalidate();
    for (const env of this.environments.values()) {
      for (const s of env.changes) s.sse.write(PING);
      for (const s of env.definitions) s.sse.write(PING);
    }
  }

  /** Ends every stream and refuses new ones (shutdown: before the server drains). */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    for (const env of this.environments.values()) for (const s of [...env.changes, ...env.definitions]) s.sse.close();
    for (const w of [...this.waiters]) w.done(false);
  }
}

/** An event to one definitions stream: held until it starts, then written if newer than what it has. */
function deliver(stream: DefinitionStream, position: number, chunk: Uint8Array): void {
  if (!stream.started) stream.held.push({ position, chunk });
  else if (position > stream.after) {
    stream.after = position;
    stream.sse.write(chunk);
  }
}

const bindingOf = (p: ApiKeyPrincipal): StreamBinding => ({ keyId: p.id, projectId: p.projectId, environmentId: p.environmentId, secretTag: p.secretTag });

/** The environments of a created project, from its entry (`changes.environments.after`: the whole project). */
function createdEnvironments(e: ChangeEntry): EnvironmentChange[] {
  const envs = e.changes.environments?.after;
  if (!Array.isArray(envs)) return [];
  const at = Date.parse(e.at);
  return envs
    .filter((x): x is { id: string; slug: string } => typeof x?.id === "string" && typeof x?.slug === "string")
    .map((x) => ({ id: x.id, projectId: e.project!.id, slug: x.slug, position: e.position, at }));
}
