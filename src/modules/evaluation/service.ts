/**
 * Evaluation for an API key (decisions §7): the key's project and environment, the in-memory
 * snapshot, the engine. No database, no compilation: two map lookups and the engine per flag.
 * Test-session overrides (resolution step 1) come from an `OverrideSource`: the Testing API's
 * live sessions (src/modules/testing/live.ts), given by the composition root (server.ts).
 * Every call hands the engine the environment's entries and the session's overrides: a flag
 * with prerequisites evaluates them there (docs/targeting.md, Prerequisites); each flag of a
 * batch or bulk evaluation is evaluated on its own. Each result of a flag that exists is
 * counted on the entry's counter (src/evaluation/counts.ts: /metrics and insights). The
 * `preview` methods answer the same for an environment a reader names (preview.ts), uncounted.
 */
import { DISABLED_STATE, evaluate, type CompiledFlag } from "../../evaluation/engine";
import type { Snapshot } from "../../evaluation/snapshot";
import type { EvalContext, EvaluationResult, OverrideSource } from "../../evaluation/types";
import type { Principal } from "../../http/access";
import { iso, type Clock } from "../../lib/clock";
import type { BatchRequest, EvaluateRequest } from "./model";
import type { EvaluationRecords } from "./records";

/** The request header that carries a test-session token. */
export const SESSION_HEADER = "x-service-session";

/** Where an evaluation runs: an API key's project and environment, or the ones a path names. */
export interface EvaluationTarget {
  projectId: string;
  environmentId: string;
  environmentSlug: string;
}

export interface BatchResult {
  results: Record<string, EvaluationResult>;
  evaluatedAt: string;
}

const EMPTY_CONTEXT: EvalContext = Object.freeze({});

/** A result and the compiled flag it came from (undefined: no such flag). */
export interface Evaluated {
  result: EvaluationResult;
  flag: CompiledFlag | undefined;
}

export interface EvaluationServiceDeps {
  /** Every flag of every environment, compiled. */
  snapshot: Snapshot;
  clock: Clock;
  /** The test sessions' overrides. */
  overrides: OverrideSource;
  /** The evaluation-record stream (plugins' onEvaluations, integrations): each result is pushed when its project has readers. */
  records: EvaluationRecords;
}

export class EvaluationService {
  /** Read on every request; tests swap it to see which path asked. */
  overrides: OverrideSource;
  private readonly snapshot: Snapshot;
  private readonly clock: Clock;
  private readonly records: EvaluationRecords;
  /** `evaluatedAt` of the last millisecond seen, formatted once. */
  private stampMs = Number.NaN;
  private stampText = "";

  constructor({ snapshot, clock, overrides, records }: EvaluationServiceDeps) {
    this.snapshot = snapshot;
    this.records = records;
    this.clock = clock;
    this.overrides = overrides;
  }

  evaluateOne(principal: Principal, body: EvaluateRequest, sessionToken: string | null): EvaluationResult {
    return this.one(apiKeyOf(principal), body, sessionToken, true);
  }

  /** One result per distinct key, all with the same `evaluatedAt`. */
  evaluateBatch(principal: Principal, body: BatchRequest, sessionToken: string | null): BatchResult {
    return this.batch(apiKeyOf(principal), body, sessionToken, true);
  }

  /**
   * What `evaluateOne` answers in a project's environment named by its caller (a reader of the
   * flags: the console's playground), neither counted nor recorded: it is not an application's
   * traffic (docs/decisions.md, Evaluate as a reader).
   */
  previewOne(target: EvaluationTarget, body: EvaluateRequest, sessionToken: string | null): EvaluationResult {
    return this.one(target, body, sessionToken, false);
  }

  /** What `evaluateBatch` answers, as `previewOne`: neither counted nor recorded. */
  previewBatch(target: EvaluationTarget, body: BatchRequest, sessionToken: string | null): BatchResult {
    return this.batch(target, body, sessionToken, false);
  }

  /** `live`: an application's evaluation, counted (insights, /metrics) and recorded (plugins, integrations). */
  private one(target: EvaluationTarget, body: EvaluateRequest, sessionToken: string | null, live: boolean): EvaluationResult {
    const now = this.clock.now();
    const overrides = sessionToken ? this.overrides.overridesFor(sessionToken, target.projectId, now) : undefined;
    const flagKey = body.flagKey;
    const entries = this.snapshot.environment(target.environmentId);
    const entry = entries?.get(flagKey);
    const context = body.context ?? EMPTY_CONTEXT;
    const result = evaluate(entry?.flag, flagKey, entry?.state ?? DISABLED_STATE, context, this.stamp(now), overrides?.get(flagKey), undefined, entries, overrides);
    if (!live) return result;
    entry?.counter.add(result, now);
    if (this.records.wants(target.projectId)) this.records.add(target.projectId, target.environmentSlug, result, userIdOf(context));
    return result;
  }

  private batch(target: EvaluationTarget, body: BatchRequest, sessionToken: string | null, live: boolean): BatchResult {
    const now = this.clock.now();
    const overrides = sessionToken ? this.overrides.overridesFor(sessionToken, target.projectId, now) : undefined;
    const entries = this.snapshot.environment(target.environmentId);
    const context = body.context ?? EMPTY_CONTEXT;
    const evaluatedAt = this.stamp(now);
    // No prototype: a flag key such as "__proto__" is an ordinary entry.
    const results: Record<string, EvaluationResult> = Object.create(null);
    const flags = body.flags;
    for (let i = 0; i < flags.length; i++) {
      const flagKey = flags[i]!;
      if (results[flagKey] !== undefined) continue;
      const entry = entries?.get(flagKey);
      const result = evaluate(entry?.flag, flagKey, entry?.state ?? DISABLED_STATE, context, evaluatedAt, overrides?.get(flagKey), undefined, entries, overrides);
      if (live) entry?.counter.add(result, now);
      results[flagKey] = result;
    }
    if (live && this.records.wants(target.projectId)) {
      const userId = userIdOf(context);
      for (const flagKey in results) this.records.add(target.projectId, target.environmentSlug, results[flagKey]!, userId);
    }
    return { results, evaluatedAt };
  }

  /**
   * One flag for OpenFeature (src/modules/ofrep/): the result as `evaluateOne` computes and
   * records it, with the compiled flag it came from (undefined: no such flag).
   */
  evaluateWith(principal: Principal, flagKey: string, context: EvalContext, sessionToken: string | null): Evaluated {
    const key = apiKeyOf(principal);
    const now = this.clock.now();
    const overrides = sessionToken ? this.overrides.overridesFor(sessionToken, key.projectId, now) : undefined;
    const entries = this.snapshot.environment(key.environmentId);
    const entry = entries?.get(flagKey);
    const result = evaluate(entry?.flag, flagKey, entry?.state ?? DISABLED_STATE, context, this.stamp(now), overrides?.get(flagKey), undefined, entries, overrides);
    entry?.counter.add(result, now);
    if (this.records.wants(key.projectId)) this.records.add(key.projectId, key.environmentSlug, result, userIdOf(context));
    return { result, flag: entry?.flag };
  }

  /** Every flag of the key's environment, by key, for OpenFeature's bulk evaluation; recorded as a batch is. */
  evaluateAll(principal: Principal, context: EvalContext, sessionToken: string | null): Evaluated[] {
    const key = apiKeyOf(principal);
    const now = this.clock.now();
    const overrides = sessionToken ? this.overrides.overridesFor(sessionToken, key.projectId, now) : undefined;
    const entries = this.snapshot.environment(key.environmentId);
    if (entries === undefined) return [];
    const evaluatedAt = this.stamp(now);
    const out: Evaluated[] = [];
    for (const flagKey of [...entries.keys()].sort()) {
      const { flag, state, counter } = entries.get(flagKey)!;
      const result = evaluate(flag, flagKey, state, context, evaluatedAt, overrides?.get(flagKey), undefined, entries, overrides);
      counter.add(result, now);
      out.push({ result, flag });
    }
    if (this.records.wants(key.projectId)) {
      const userId = userIdOf(context);
      for (const { result } of out) this.records.add(key.projectId, key.environmentSlug, result, userId);
    }
    return out;
  }

  private stamp(now: number): string {
    if (now !== this.stampMs) {
      this.stampMs = now;
      this.stampText = iso(now);
    }
    return this.stampText;
  }
}

/** The record's `userId`: the context's, as a string (a number in its decimal form, as rollouts read it); else null. */
function userIdOf(context: EvalContext): string | null {
  const id = context.userId;
  return typeof id === "string" ? id : typeof id === "number" ? String(id) : null;
}

/** The access table admits only API keys to evaluation; anything else is a bug. */
export function apiKeyOf(principal: Principal): Extract<Principal, { kind: "apiKey" }> {
  if (principal.kind !== "apiKey") throw new Error(`evaluation reached with a ${principal.kind} principal`);
  return principal;
}
