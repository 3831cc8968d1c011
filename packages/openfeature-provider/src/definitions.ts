/**
 * The flags of one environment as the provider holds them: compiled once per change with the
 * server's own engine (src/evaluation/engine.ts), so that an evaluation is a map lookup and a
 * call into the engine. Applies the definitions stream's `put` (everything) and `patch` (some
 * flags changed or deleted) and says which keys actually changed. Pure: no I/O, no clock.
 */
import { compileFlag, compileSegment, compileState, type CompiledFlag, type CompiledSegment, type CompiledState } from "../../../src/evaluation/engine";
import { segmentKeysOf, type FlagDefinition, type FlagState, type SegmentDefinition } from "../../../src/evaluation/types";

/** One flag as `GET /v1/definitions` and the stream send it: its definition and its state here. */
export interface FlagRecord extends FlagDefinition {
  state: FlagState;
}

/** The payload of `GET /v1/definitions` and of the stream's `put`. */
export interface DefinitionsPayload {
  version: number;
  project: string;
  environment: string;
  flags: FlagRecord[];
  /** The segments the flags use (docs/streams.md); absent from an older server: none. */
  segments?: SegmentDefinition[];
}

/** The payload of the stream's `patch`: the flags changed (whole records) and the keys deleted. */
export interface PatchPayload {
  version: number;
  flags: FlagRecord[];
  deleted: string[];
  /** The segments the patch's flags use, current (a changed segment comes with every flag that uses it). */
  segments?: SegmentDefinition[];
}

/** A segment compiled, and its definition as text: how a change is told from a repeat. */
interface SegmentEntry {
  readonly compiled: CompiledSegment;
  readonly signature: string;
}

/** A flag ready to evaluate. */
export interface Entry {
  readonly flag: CompiledFlag;
  readonly state: CompiledState;
  /** The OpenFeature type of its value: a flag with variants serves a variant key. */
  readonly type: "boolean" | "string";
  /** Its definition and state as text: how a change is told from a repeat. */
  readonly signature: string;
}

export class Definitions {
  /** Flag key -> entry; replaced whole on a `put`, changed in place on a `patch`. */
  flags = new Map<string, Entry>();
  /** The version of the last payload applied; undefined before the first `put`. */
  version: number | undefined;
  project: string | undefined;
  environment: string | undefined;
  /** Segment key -> compiled segment: what flags' in_segment conditions compile against. */
  private segments = new Map<string, SegmentEntry>();
  /** The compiled segments by key, as `compileFlag` takes them (kept in step with `segments`). */
  private table = new Map<string, CompiledSegment>();

  get loaded(): boolean {
    return this.version !== undefined;
  }

  /** Replaces everything; returns the keys added, removed or changed (none on the first load: nothing was known). */
  put(payload: DefinitionsPayload): string[] {
    const first = !this.loaded;
    const before = this.flags;
    const after = new Map<string, Entry>();
    const changed: string[] = [];
    const segments = new Map<string, SegmentEntry>();
    for (const def of payload.segments ?? []) segments.set(def.key, this.segmentEntry(def));
    this.segments = segments;
    this.table = new Map([...segments].map(([k, s]) => [k, s.compiled]));
    for (const record of payload.flags) {
      const entry = this.reuseOrCompile(before.get(record.key), record);
      after.set(record.key, entry);
      if (before.get(record.key) !== entry) changed.push(record.key);
    }
    for (const key of before.keys()) if (!after.has(key)) changed.push(key);
    this.flags = after;
    this.version = payload.version;
    this.project = payload.project;
    this.environment = payload.environment;
    return first ? [] : this.withDependants(changed);
  }

  /** Applies a change; returns the keys whose definition or state changed, or that were deleted. */
  patch(payload: PatchPayload): string[] {
    if (!this.loaded) throw new Error("a patch before any put");
    const changed: string[] = [];
    for (const def of payload.segments ?? []) {
      const entry = this.segmentEntry(def);
      this.segments.set(def.key, entry);
      this.table.set(def.key, entry.compiled);
    }
    for (const record of payload.flags) {
      const old = this.flags.get(record.key);
      const entry = this.reuseOrCompile(old, record);
      if (entry !== old) {
        this.flags.set(record.key, entry);
        changed.push(record.key);
      }
    }
    for (const key of payload.deleted) {
      if (this.flags.delete(key) && !changed.includes(key)) changed.push(key);
    }
    this.version = Math.max(this.version!, payload.version);
    return this.withDependants(changed);
  }

  /**
   * The keys changed and the flags that have one of them as a prerequisite, directly or not:
   * what they evaluate to may have changed too (docs/targeting.md, Prerequisites). Walks the
   * flags only when some flag has prerequisites.
   */
  private withDependants(changed: string[]): string[] {
    if (changed.length === 0) return changed;
    const dependantsOf = new Map<string, string[]>();
    for (const [key, entry] of this.flags) {
      for (const p of entry.flag.prerequisites) {
        const list = dependantsOf.get(p.flagKey);
        if (list === undefined) dependantsOf.set(p.flagKey, [key]);
        else list.push(key);
      }
    }
    if (dependantsOf.size === 0) return changed;
    const out = new Set(changed);
    const queue = [...changed];
    while (queue.length > 0) {
      for (const dependant of dependantsOf.get(queue.pop()!) ?? []) {
        if (!out.has(dependant)) out.add(dependant), queue.push(dependant);
      }
    }
    return [...out];
  }

  private segmentEntry(def: SegmentDefinition): SegmentEntry {
    const signature = JSON.stringify([def.conditions, def.included, def.excluded]);
    const old = this.segments.get(def.key);
    return old !== undefined && old.signature === signature ? old : { compiled: compileSegment(def), signature };
  }

  /** The entry as it was when nothing of the record (or of the segments it uses) changed, else the record compiled. */
  private reuseOrCompile(old: Entry | undefined, record: FlagRecord): Entry {
    const used = segmentKeysOf(record.rules).map((k) => this.segments.get(k)?.signature ?? null);
    const signature = JSON.stringify([record.variants, record.rules, record.state.enabled, record.state.rolloutPercentage, record.bucketBy ?? null, record.prerequisites ?? null, ...(used.length > 0 ? [used] : [])]);
    if (old !== undefined && old.signature === signature) return old;
    return {
      flag: compileFlag(record, this.table),
      state: compileState(record.state),
      type: record.variants.length > 0 ? "string" : "boolean",
      signature,
    };
  }
}

/**
 * The payload of a `put` or `GET /v1/definitions`, checked for the shape the engine relies on
 * (the server wrote it, but a proxy or a version skew could send anything): else a message.
 */
export function parseDefinitions(text: string): DefinitionsPayload | string {
  const value = parseJson(text);
  if (!isObject(value)) return "definitions: not a JSON object";
  if (!isVersion(value.version)) return "definitions: version must be a non-negative integer";
  if (typeof value.project !== "string" || typeof value.environment !== "string") return "definitions: project and environment must be strings";
  const flags = parseRecords(value.flags);
  if (typeof flags === "string") return `definitions: ${flags}`;
  const segments = parseSegments(value.segments ?? []);
  if (typeof segments === "string") return `definitions: ${segments}`;
  return { version: value.version, project: value.project, environment: value.environment, flags, ...(value.segments !== undefined ? { segments } : {}) };
}

/** The payload of a `patch`, checked likewise. */
export function parsePatch(text: string): PatchPayload | string {
  const value = parseJson(text);
  if (!isObject(value)) return "patch: not a JSON object";
  if (!isVersion(value.version)) return "patch: version must be a non-negative integer";
  const flags = parseRecords(value.flags ?? []);
  if (typeof flags === "string") return `patch: ${flags}`;
  const deleted = value.deleted ?? [];
  if (!Array.isArray(deleted) || !deleted.every((k) => typeof k === "string")) return "patch: deleted must be an array of flag keys";
  const segments = parseSegments(value.segments ?? []);
  if (typeof segments === "string") return `patch: ${segments}`;
  return { version: value.version, flags, deleted: deleted as string[], ...(value.segments !== undefined ? { segments } : {}) };
}

function parseSegments(value: unknown): SegmentDefinition[] | string {
  if (!Array.isArray(value)) return "segments must be an array";
  const ids = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === "string");
  for (const [i, s] of value.entries()) {
    if (!isObject(s) || typeof s.key !== "string" || !Array.isArray(s.conditions) || !ids(s.included) || !ids(s.excluded)) {
      return `segments[${i}] must have a key, conditions, included and excluded`;
    }
  }
  return value as SegmentDefinition[];
}

function parseRecords(value: unknown): FlagRecord[] | string {
  if (!Array.isArray(value)) return "flags must be an array";
  for (const [i, f] of value.entries()) {
    if (!isObject(f) || typeof f.key !== "string" || !Array.isArray(f.variants) || !Array.isArray(f.rules)) {
      return `flags[${i}] must have a key, variants and rules`;
    }
    if (!f.variants.every((v) => isObject(v) && typeof v.key === "string")) return `flags[${i}].variants must be variants with a key`;
    if (!f.rules.every((r) => isObject(r) && typeof r.id === "string" && Array.isArray(r.conditions))) return `flags[${i}].rules must be rules with an id and conditions`;
    if (f.bucketBy !== undefined && f.bucketBy !== null && (typeof f.bucketBy !== "string" || f.bucketBy === "")) return `flags[${i}].bucketBy must be an attribute name`;
    const prerequisites = f.prerequisites;
    if (
      prerequisites !== undefined &&
      prerequisites !== null &&
      !(Array.isArray(prerequisites) && prerequisites.every((p) => isObject(p) && typeof p.flagKey === "string" && (p.variant === undefined || typeof p.variant === "string")))
    ) {
      return `flags[${i}].prerequisites must be an array of { flagKey, variant? }`;
    }
    const state = f.state;
    if (!isObject(state) || typeof state.enabled !== "boolean" || !(state.rolloutPercentage === null || typeof state.rolloutPercentage === "number")) {
      return `flags[${i}].state must be { enabled, rolloutPercentage }`;
    }
  }
  return value as FlagRecord[];
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isVersion = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
