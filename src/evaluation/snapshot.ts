/**
 * What evaluation reads: every flag of every environment, compiled, in memory (decisions §7).
 * Evaluating is two map lookups (environment, then flag key) and a call into the engine: no
 * database, no compilation. The change log's subscriber (modules/flags/snapshot.ts) updates it
 * after each commit and before the response is sent, so a client reads its own writes.
 * A flag's definition is compiled once and shared by its environments' entries.
 */
import { compileFlag, compileSegment, compileState, DISABLED_STATE, type CompiledFlag, type CompiledSegment, type CompiledState } from "./engine";
import { segmentKeysOf, type FlagDefinition, type FlagState, type SegmentDefinition } from "./types";

export interface SnapshotEntry {
  readonly flag: CompiledFlag;
  readonly state: CompiledState;
}

/** One project as stored: its environments, flags, and the state rows that exist. */
export interface ProjectData {
  environmentIds: readonly string[];
  /** The slug of each environment of `environmentIds`, in the same order. */
  environmentSlugs: readonly string[];
  flags: readonly FlagDefinition[];
  states: readonly { flagKey: string; environmentId: string; state: FlagState }[];
  /** The project's segments (docs/targeting.md, Segments); absent: none. */
  segments?: readonly SegmentDefinition[];
}

interface ProjectEntry {
  environmentIds: readonly string[];
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
    this.removeProject(projectId);
    const segments = new Map<string, CompiledSegment>();
    for (const def of data.segments ?? []) segments.set(def.key, compileSegment(def));
    const segmentUsers = new Map<string, FlagDefinition>();
    const flags = new Map<string, CompiledFlag>();
    for (const def of data.flags) {
      flags.set(def.key, compileFlag(def, segments));
      if (segmentKeysOf(def.rules).length > 0) segmentUsers.set(def.key, def);
    }
    const environmentsBySlug = new Map(data.environmentSlugs.map((slug, i) => [slug, data.environmentIds[i]!]));
    this.projects.set(projectId, { environmentIds: data.environmentIds, environmentsBySlug, flags, segments, segmentUsers });
    for (const environmentId of data.environmentIds) {
      const entries = new Map<string, SnapshotEntry>();
      for (const [key, flag] of flags) entries.set(key, { flag, state: DISABLED_STATE });
      this.environments.set(environmentId, entries);
    }
    for (const { flagKey, environmentId, state } of data.states) {
      const entries = this.environments.get(environmentId);
      const flag = flags.get(flagKey);
      if (entries && flag) entries.set(flagKey, { flag, state: compileState(state) });
    }
  }

  removeProject(projectId: string): void {
    const project = this.projects.get(projectId);
    if (!project) return;
    for (const environmentId of project.environmentIds) this.environments.delete(environmentId);
    this.projects.delete(projectId);
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
      entries.set(flag.key, { flag, state: entries.get(flag.key)?.state ?? DISABLED_STATE });
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
    const flag = this.projects.get(projectId)?.flags.get(flagKey);
    const entries = this.environments.get(environmentId);
    if (!flag || !entries) throw new Error(`snapshot: unknown flag ${flagKey} or environment ${environmentId}`);
    entries.set(flagKey, { flag, state: compileState(state) });
  }

  removeFlag(projectId: string, flagKey: string): void {
    const project = this.projects.get(projectId);
    if (!project) return;
    project.flags.delete(flagKey);
    project.segmentUsers.delete(flagKey);
    for (const environmentId of project.environmentIds) this.environments.get(environmentId)?.delete(flagKey);
  }
}
