/**
 * Throughput of the pure evaluation engine, in-process, on one core.
 *
 * Usage: bun scripts/bench/engine.ts [--seconds N]     (also `scripts/bench/engine`)
 *
 * Scenarios and contexts: scripts/lib/engine-scenarios.ts ("rules + rollout", "weighted
 * variants"; 10,000 prebuilt contexts). Each scenario warms up, then runs N seconds in
 * 1-second rounds and reports the median round. A figure, not a test: the exit code is 0 whether or
 * not the target is met.
 *
 * Then, side by side in the same run, one rule of one condition on `email` (then a 50 % rollout)
 * with `starts_with` and with `matches` (RE2, docs/targeting.md): what a pattern costs over a
 * plain string operator. Not counted towards the target.
 *
 * Then prerequisites (docs/targeting.md), side by side in the same run: "rules + rollout" alone
 * against the same flag at the top of a 3-deep prerequisite chain (it -> p1 -> p2 -> p3, each an
 * enabled flag, so every link is evaluated and met), in paired 1-second rounds alternating which
 * goes first; the figure is the median of the rounds' ratios (target: the chain at least 30 % of
 * the flag alone).
 *
 * Then segments (docs/targeting.md, Segments), the same way: a rule `in_segment` over a segment of
 * 10,000 user ids against a rule `in` with 10 values (the same 10 users of the contexts match
 * both), each before a 50 % rollout (target: the segment at least 80 % of `in`).
 */
import {
  type CompiledFlag,
  type CompiledState,
  compileFlag,
  compileSegment,
  compileState,
  evaluate,
  type PrerequisiteLookup,
} from "../../src/evaluation/engine";
import type { Condition, FlagDefinition } from "../../src/evaluation/types";
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

/** One rule of one condition, then a 50 % rollout. */
const single = (key: string, condition: Condition): FlagDefinition => ({
  key,
  variants: [],
  rules: [{ id: "rule_1", name: "", enabled: true, variant: null, conditions: [condition] }],
});
const COMPARISONS: [string, FlagDefinition][] = [
  ["starts_with", single("op-starts-with", { attribute: "email", operator: "starts_with", value: "someone1" })],
  ["matches ^prefix", single("op-matches-prefix", { attribute: "email", operator: "matches", value: "^someone1" })],
  ["matches suffix", single("op-matches-suffix", { attribute: "email", operator: "matches", value: "@example\\.(com|org)$" })],
  ["matches (a+)+$", single("op-matches-redos", { attribute: "email", operator: "matches", value: "(a+)+$" })],
];
console.log("operators side by side (one condition on email, then a 50 % rollout):");
const half = compileState({ enabled: true, rolloutPercentage: 50 });
for (const [name, def] of COMPARISONS) {
  const flag = compileFlag(def);
  run(flag, half, 1000);
  const rounds: number[] = [];
  for (let r = 0; r < SECONDS; r++) rounds.push(run(flag, half, 1000));
  rounds.sort((a, b) => a - b);
  console.log(`  ${name.padEnd(18)} ${Math.round(rounds[Math.floor(rounds.length / 2)]!).toLocaleString("en-US").padStart(12)} evaluations/s`);
}

/**
 * `subject` against `reference`, in paired 1-second rounds alternating which goes first; prints
 * both medians and the median of the rounds' ratios against `target`.
 */
function paired(names: [string, string], subject: () => number, reference: () => number, target: number): void {
  subject();
  reference();
  const ratios: number[] = [];
  const subjectRates: number[] = [];
  const referenceRates: number[] = [];
  for (let r = 0; r < SECONDS * 2; r++) {
    const first = r % 2 === 0;
    const a = first ? reference() : 0;
    const c = subject();
    const b = first ? a : reference();
    ratios.push(c / b);
    subjectRates.push(c);
    referenceRates.push(b);
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const ratio = median(ratios);
  console.log(`${names[1].padEnd(18)} ${Math.round(median(referenceRates)).toLocaleString("en-US").padStart(12)} evaluations/s`);
  console.log(`${names[0].padEnd(18)} ${Math.round(median(subjectRates)).toLocaleString("en-US").padStart(12)} evaluations/s`);
  console.log(`${names[0]} / ${names[1]}: ${(ratio * 100).toFixed(1)} % (median of ${ratios.length} paired rounds; target at least ${target * 100} %: ${ratio >= target ? "met" : "NOT met"})`);
}

// ---- prerequisites: a 3-deep chain against the flag alone ---------------------------------------
{
  const base = SCENARIOS[0]!;
  const alone = compileFlag(base.flag);
  const state = compileState(base.state);
  const on = compileState({ enabled: true, rolloutPercentage: null });
  const entries = new Map<string, { flag: CompiledFlag; state: CompiledState }>();
  const top = compileFlag({ ...base.flag, prerequisites: [{ flagKey: "p1" }] });
  entries.set(top.key, { flag: top, state });
  entries.set("p1", { flag: compileFlag({ key: "p1", variants: [], rules: [], prerequisites: [{ flagKey: "p2" }] }), state: on });
  entries.set("p2", { flag: compileFlag({ key: "p2", variants: [], rules: [], prerequisites: [{ flagKey: "p3" }] }), state: on });
  entries.set("p3", { flag: compileFlag({ key: "p3", variants: [], rules: [] }), state: on });
  paired(["3-deep chain", "one flag"], () => run(top, state, 1000, entries), () => run(alone, state, 1000), 0.3);
}

// ---- segments: in_segment over 10,000 ids against in with 10 values -----------------------------
// The segment holds the same 10 users of the contexts as the `in` list, and 9,990 others: both
// rules match the same contexts, so the two differ only by the condition.
{
  const ids = [...contexts.slice(0, 10).map((c) => String(c.userId)), ...Array.from({ length: 9_990 }, (_, i) => `user-x${i}`)];
  const segments = new Map([["big", compileSegment({ key: "big", conditions: [], included: ids, excluded: [] })]]);
  const bySegment = compileFlag(single("by-segment", { attribute: "userId", operator: "in_segment", value: "big" }), segments);
  const byList = compileFlag(single("by-list", { attribute: "userId", operator: "in", value: ids.slice(0, 10) }));
  paired(["in_segment 10,000", "in 10 values"], () => run(bySegment, half, 1000), () => run(byList, half, 1000), 0.8);
}
// Printed so that the work feeding it cannot be optimised away.
console.log(`(checksum ${sink})`);

/** Evaluates over the contexts for about `ms` milliseconds; returns evaluations per second. */
function run(flag: CompiledFlag, state: CompiledState, ms: number, entries?: PrerequisiteLookup): number {
  const evaluatedAt = new Date().toISOString();
  let count = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let i = 0; i < contexts.length; i++) {
      const result = evaluate(flag, flag.key, state, contexts[i]!, evaluatedAt, undefined, undefined, entries);
      sink += (result.enabled ? 1 : 0) + (result.ruleId === null ? 0 : 2) + (result.variant === null ? 0 : result.variant.length);
    }
    count += contexts.length;
    elapsed = performance.now() - start;
  }
  return (count * 1000) / elapsed;
}
