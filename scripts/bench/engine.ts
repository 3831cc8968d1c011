/**
 * Throughput of the pure evaluation engine, in-process, on one core.
 *
 * Usage: bun scripts/bench/engine.ts [--seconds N]     (also `scripts/bench/engine`)
 *
 * Scenarios and contexts: scripts/lib/engine-scenarios.ts ("rules + rollout", "weighted
 * variants"; 10,000 prebuilt contexts). Each scenario warms up, then runs N seconds in
 * 1-second rounds and reports the median round. Then segments side by side (docs/targeting.md,
 * Segments): a rule `in_segment` over a segment of 10,000 user ids against a rule `in` with 10
 * values (the same 10 users of the contexts match both), rounds alternating, each before a 50 %
 * rollout; target: the segment at least 80 % of `in`. A figure, not a test: the exit code is 0 whether or not the targets are met.
 */
import { type CompiledFlag, type CompiledState, compileFlag, compileSegment, compileState, evaluate } from "../../src/evaluation/engine";
import type { FlagDefinition } from "../../src/evaluation/types";
import { CONTEXTS as contexts, SCENARIOS } from "../lib/engine-scenarios";
import { pinServer } from "../lib/wrk";

const TARGET = 2_000_000;
const secondsAt = process.argv.indexOf("--seconds");
const SECONDS = secondsAt > 0 ? Number(process.argv[secondsAt + 1]) : 5;
if (!Number.isInteger(SECONDS) || SECONDS < 1) {
  console.error("engine: --seconds needs a positive whole number");
  process.exit(2);
}

const cpu = pinServer();
console.log(`engine bench: ${contexts.length} contexts, ${SECONDS} s a scenario${cpu === undefined ? "" : ", pinned to CPU 0"}`);

let sink = 0;
const results: number[] = [];
for (const scenario of SCENARIOS) {
  const [name, flag, state] = [scenario.name, compileFlag(scenario.flag), compileState(scenario.state)];
  run(flag, state, 1000);
  const rounds: number[] = [];
  for (let r = 0; r < SECONDS; r++) rounds.push(run(flag, state, 1000));
  rounds.sort((a, b) => a - b);
  const median = rounds[Math.floor(rounds.length / 2)]!;
  results.push(median);
  console.log(`${name.padEnd(18)} ${Math.round(median).toLocaleString("en-US").padStart(12)} evaluations/s`);
}
console.log(`target: at least ${TARGET.toLocaleString("en-US")}/s: ${results.every((r) => r >= TARGET) ? "met" : "NOT met"}`);

// Segments: 10,000 ids, of which the same 10 users of the contexts as the `in` list: both rules
// match the same contexts, so the two differ only by the condition (the rest is the same rollout).
const SEGMENT_TARGET = 0.8;
const ids = [...contexts.slice(0, 10).map((c) => String(c.userId)), ...Array.from({ length: 9_990 }, (_, i) => `user-x${i}`)];
const segments = new Map([["big", compileSegment({ key: "big", conditions: [], included: ids, excluded: [] })]]);
const ruled = (key: string, condition: FlagDefinition["rules"][number]["conditions"][number]): FlagDefinition => ({
  key,
  variants: [],
  rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [condition] }],
});
const bySegment = compileFlag(ruled("by-segment", { attribute: "userId", operator: "in_segment", value: "big" }), segments);
const byList = compileFlag(ruled("by-list", { attribute: "userId", operator: "in", value: ids.slice(0, 10) }));
const half = compileState({ enabled: true, rolloutPercentage: 50 });
run(bySegment, half, 1000);
run(byList, half, 1000);
const segmentRounds: number[] = [];
const listRounds: number[] = [];
for (let r = 0; r < SECONDS; r++) {
  segmentRounds.push(run(bySegment, half, 1000));
  listRounds.push(run(byList, half, 1000));
}
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const [segment, list] = [median(segmentRounds), median(listRounds)];
console.log(`${"in_segment 10,000".padEnd(18)} ${Math.round(segment).toLocaleString("en-US").padStart(12)} evaluations/s`);
console.log(`${"in 10 values".padEnd(18)} ${Math.round(list).toLocaleString("en-US").padStart(12)} evaluations/s`);
console.log(`segment target: at least ${SEGMENT_TARGET * 100} % of in: ${((segment / list) * 100).toFixed(1)} %, ${segment >= SEGMENT_TARGET * list ? "met" : "NOT met"}`);
// Printed so that the work feeding it cannot be optimised away.
console.log(`(checksum ${sink})`);

/** Evaluates over the contexts for about `ms` milliseconds; returns evaluations per second. */
function run(flag: CompiledFlag, state: CompiledState, ms: number): number {
  const evaluatedAt = new Date().toISOString();
  let count = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let i = 0; i < contexts.length; i++) {
      const result = evaluate(flag, flag.key, state, contexts[i]!, evaluatedAt);
      sink += (result.enabled ? 1 : 0) + (result.ruleId === null ? 0 : 2) + (result.variant === null ? 0 : result.variant.length);
    }
    count += contexts.length;
    elapsed = performance.now() - start;
  }
  return (count * 1000) / elapsed;
}
