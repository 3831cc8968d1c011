/**
 * What evaluation reads: every flag of every environment, compiled, in memory (decisions §7).
 * Evaluating is two map lookups (environment, then flag key) and a call into the engine: no
 * database, no compilation. The change log's subscriber (modules/flags/snapshot.ts) updates it
 * after each commit and before the response is sent, so a client reads its own writes.
 * A flag's definition is compiled once and shared by its environments' entries.
 *
 * Each entry also carries its flag's evaluation counter there (src/evaluation/counts.ts): one
 * object per flag and environment, kept while the flag and the environment exist, whatever
 * their definition and state become; `counters()` lists them with their labels.
 */
import { FlagCounter } from "./counts";
import { compileFlag, compileSegment, compileState, DISABLED_STATE, type CompiledFlag, type CompiledSegment, type CompiledState } from "./engine";
import { segmentKeysOf, type FlagDefinition, type FlagState, type SegmentDefinition } from "./types";

export interface SnapshotEntry {
  readonly flag: CompiledFlag;
  readonly state: CompiledState;
  /** The flag's evaluation counts in this environment. */
  readonly counter: FlagCounter;
}

/** A counter with the names its series are labelled by. */
export interface LabelledCounter {
  counter: FlagCounter;
  projectSlug: string;
  environmentSlug: string;
}

/** One project as stored: its environments, flags, and the state rows that exist. */
export interface ProjectData {
  /** The project's slug (immutable): the label of its metrics. */
  slug: string;
  environmentIds: readonly string[];
  /** The slug of each environment of `environmentIds`, in the same order. */
  environmentSlugs: readonly string[];
  flags: readonly FlagDefinition[];
  states: readonly { flagKey: string; environmentId: string; state: FlagState }[];
  /** The project's segments (docs/targeting.md, Segments); absent: none. */
  segments?: readonly SegmentDefinition[];
}

interface ProjectEntry {
  id: string;
  slug: string;
  environmentIds: readonly string[];
  /** Environment id -> slug. */
  environmentSlugs: ReadonlyMap<string, string>;
  /** Environment slug -> id (change-log entries name environments by slug). */
  environmentsBySlug: ReadonlyMap<string, string>;
  flags: Map<string, CompiledFlag>;
  /** Segment key -> compiled segment: what flags' in_segment conditions hold. */
  segments: Map<string, CompiledSegment>;
  /** The definitions of the flags that use segments, by key: recompiled when one of their segments changes. */
  segmentUsers: Map<string, FlagDefinition>;
}

export class Snapshot {
  /** environment id -> flag key -> entry. */
  private readonly environments = new Map<string, Map<string, SnapshotEntry>>();
  private readonly projects = new Map<string, ProjectEntry>();
  /** environment id -> flag key -> counter: outlives the entries, which are replaced on every change. */
  private readonly counters = new Map<string, Map<string, FlagCounter>>();

  /** The hot path: the flags of one environment (undefined: none, or no such environment). */
  environment(environmentId: string): ReadonlyMap<string, SnapshotEntry> | undefined {
    return this.environments.get(environmentId);
  }

  /** Flags held, over all projects. */
  flagCount(): number {
    let count = 0;
    for (const project of this.projects.values()) count += project.flags.size;
    return count;
  }

  /** Replaces everything known of a project (start-up, environments added or removed). */
  setProject(projectId: string, data: ProjectData): void {
    const before = this.projects.get(projectId);
    this.dropEntries(projectId);
    const segments = new Map<string, CompiledSegment>();
    for (const def of data.segments ?? []) segments.set(def.key, compileSegment(def));
    const segmentUsers = new Map<string, FlagDefinition>();
    const flags = new Map<string, CompiledFlag>();
    for (const def of data.flags) {
      flags.set(def.key, compileFlag(def, segments));
      if (segmentKeysOf(def.rules).length > 0) segmentUsers.set(def.key, def);
    }
    const environmentsBySlug = new Map(data.environmentSlugs.map((slug, i) => [slug, data.environmentIds[i]!]));
    const environmentSlugs = new Map(data.environmentIds.map((id, i) => [id, data.environmentSlugs[i]!]));
    this.projects.set(projectId, { id: projectId, slug: data.slug, environmentIds: data.environmentIds, environmentSlugs, environmentsBySlug, flags, segments, segmentUsers });
    // Counters of environments and flags that are gone go with them; the others are kept.
    for (const environmentId of before?.environmentIds ?? []) if (!environmentSlugs.has(environmentId)) this.counters.delete(environmentId);
    for (const environmentId of data.environmentIds) {
      const counters = this.countersOf(environmentId);
      for (const key of counters.keys()) if (!flags.has(key)) counters.delete(key);
      const entries = new Map<string, SnapshotEntry>();
      for (const [key, flag] of flags) entries.set(key, { flag, state: DISABLED_STATE, counter: this.counterOf(projectId, environmentId, key) });
      this.environments.set(environmentId, entries);
    }
    for (const { flagKey, environmentId, state } of data.states) {
      const entry = this.environments.get(environmentId)?.get(flagKey);
      if (entry) this.environments.get(environmentId)!.set(flagKey, { ...entry, state: compileState(state) });
    }
  }

  removeProject(projectId: string): void {
    for (const environmentId of this.projects.get(projectId)?.environmentIds ?? []) this.counters.delete(environmentId);
    this.dropEntries(projectId);
  }

  private dropEntries(projectId: string): void {
    const project = this.projects.get(projectId);
    if (!project) return;
    for (const environmentId of project.environmentIds) this.environments.delete(environmentId);
    this.projects.delete(projectId);
  }

  private countersOf(environmentId: string): Map<string, FlagCounter> {
    let counters = this.counters.get(environmentId);
    if (counters === undefined) this.counters.set(environmentId, (counters = new Map()));
    return counters;
  }

  private counterOf(projectId: string, environmentId: string, flagKey: string): FlagCounter {
    const counters = this.countersOf(environmentId);
    let counter = counters.get(flagKey);
    if (counter === undefined) counters.set(flagKey, (counter = new FlagCounter(projectId, environmentId, flagKey)));
    return counter;
  }

  /** Every flag's counter in every environment, with its labels (for /metrics and the insights flush). */
  *labelledCounters(): Generator<LabelledCounter> {
    for (const project of this.projects.values()) {
      for (const environmentId of project.environmentIds) {
        const environmentSlug = project.environmentSlugs.get(environmentId)!;
        for (const counter of this.counters.get(environmentId)?.values() ?? []) yield { counter, projectSlug: project.slug, environmentSlug };
      }
    }
  }

  /** A created or changed flag: compiled once, each environment keeps its current state. */
  putFlag(projectId: string, def: FlagDefinition): void {
    const project = this.projects.get(projectId);
    if (!project) throw new Error(`snapshot: unknown project ${projectId}`);
    if (segmentKeysOf(def.rules).length > 0) project.segmentUsers.set(def.key, def);
    else project.segmentUsers.delete(def.key);
    this.install(project, compileFlag(def, project.segments));
  }

  private install(project: ProjectEntry, flag: CompiledFlag): void {
    project.flags.set(flag.key, flag);
    for (const environmentId of project.environmentIds) {
      const entries = this.environments.get(environmentId)!;
      const entry = entries.get(flag.key);
      entries.set(flag.key, { flag, state: entry?.state ?? DISABLED_STATE, counter: entry?.counter ?? this.counterOf(project.id, environmentId, flag.key) });
    }
  }

  /**
   * A created or changed segment: compiled once, and every flag of the project that uses it
   * compiled again (each environment keeps its state). The keys of those flags.
   */
  putSegment(projectId: string, def: SegmentDefinition): string[] {
    const project = this.projects.get(projectId);
    if (!project) throw new Error(`snapshot: unknown project ${projectId}`);
    project.segments.set(def.key, compileSegment(def));
    const recompiled: string[] = [];
    for (const [key, flagDef] of project.segmentUsers) {
      if (!segmentKeysOf(flagDef.rules).includes(def.key)) continue;
      this.install(project, compileFlag(flagDef, project.segments));
      recompiled.push(key);
    }
    return recompiled;
  }

  /** A deleted segment (no flag uses it: the delete is refused otherwise). */
  removeSegment(projectId: string, key: string): void {
    this.projects.get(projectId)?.segments.delete(key);
  }

  /** The id of the project's environment of this slug, if the snapshot holds it. */
  environmentId(projectId: string, slug: string): string | undefined {
    return this.projects.get(projectId)?.environmentsBySlug.get(slug);
  }

  /**
   * A flag's state in an environment as stored (`null`: no state row there, i.e. disabled), or
   * undefined when the snapshot does not hold the flag there.
   */
  stateOf(environmentId: string, flagKey: string): FlagState | null | undefined {
    const state = this.environments.get(environmentId)?.get(flagKey)?.state;
    if (state === undefined) return undefined;
    return state === DISABLED_STATE ? null : { enabled: state.enabled, rolloutPercentage: state.threshold === null ? null : state.threshold / 1000 };
  }

  setState(projectId: string, flagKey: string, environmentId: string, state: FlagState | null): void {
    const entries = this.environments.get(environmentId);
    const entry = entries?.get(flagKey);
    if (!entry || !this.projects.get(projectId)?.flags.has(flagKey)) throw new Error(`snapshot: unknown flag ${flagKey} or environment ${environmentId}`);
    entries!.set(flagKey, { ...entry, state: compileState(state) });
  }

  removeFlag(projectId: string, flagKey: string): void {
    const project = this.projects.get(projectId);
    if (!project) return;
    project.flags.delete(flagKey);
    project.segmentUsers.delete(flagKey);
    for (const environmentId of project.environmentIds) {
      this.environments.get(environmentId)?.delete(flagKey);
      this.counters.get(environmentId)?.delete(flagKey);
    }
  }
}
