/**
 * What evaluation reads: every flag of every environment, compiled, in memory (decisions §7).
 * Evaluating is two map lookups (environment, then flag key) and a call into the engine: no
 * database, no compilation. The change log's subscriber (modules/flags/snapshot.ts) updates it
 * after each commit and before the response is sent, so a client reads its own writes.
 * A flag's definition is compiled once and shared by its environments' entries.
 */
import { compileFlag, compileState, DISABLED_STATE, type CompiledFlag, type CompiledState } from "./engine";
import type { FlagDefinition, FlagState } from "./types";

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
}

interface ProjectEntry {
  environmentIds: readonly string[];
  /** Environment slug -> id (change-log entries name environments by slug). */
  environmentsBySlug: ReadonlyMap<string, string>;
  flags: Map<string, CompiledFlag>;
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
    const flags = new Map<string, CompiledFlag>();
    for (const def of data.flags) flags.set(def.key, compileFlag(def));
    const environmentsBySlug = new Map(data.environmentSlugs.map((slug, i) => [slug, data.environmentIds[i]!]));
    this.projects.set(projectId, { environmentIds: data.environmentIds, environmentsBySlug, flags });
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
    const flag = compileFlag(def);
    project.flags.set(def.key, flag);
    for (const environmentId of project.environmentIds) {
      const entries = this.environments.get(environmentId)!;
      entries.set(def.key, { flag, state: entries.get(def.key)?.state ?? DISABLED_STATE });
    }
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
    for (const environmentId of project.environmentIds) this.environments.get(environmentId)?.delete(flagKey);
  }
}
