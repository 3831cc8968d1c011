/**
 * Throughput of the pure evaluation engine, in-process, on one core.
 *
 * Usage: bun scripts/bench/engine.ts [--seconds N]     (also `scripts/bench/engine`)
 *
 * Scenarios: "rules + rollout" (5 rules of 3 conditions, where most rules pass their first
 * conditions and fail a later one so that every condition kind runs, only the last rule
 * matches a few contexts; then a 50 % rollout: one hash) and "weighted variants" (3 weighted
 * variants behind an 80 % rollout: two hashes for included users). Contexts are prebuilt
 * (10,000 of them, userId varying); each scenario warms up, then runs N seconds in 1-second
 * rounds and reports the median round. A figure, not a test: the exit code is 0 whether or
 * not the target is met.
 */
import { type CompiledFlag, type CompiledState, compileFlag, compileState, evaluate } from "../../src/evaluation/engine";
import type { EvalContext } from "../../src/evaluation/types";
import { pinServer } from "../lib/wrk";

const TARGET = 2_000_000;
const secondsAt = process.argv.indexOf("--seconds");
const SECONDS = secondsAt > 0 ? Number(process.argv[secondsAt + 1]) : 5;
if (!Number.isInteger(SECONDS) || SECONDS < 1) {
  console.error("engine: --seconds needs a positive whole number");
  process.exit(2);
}

const rulesFlag = compileFlag({
  key: "new-checkout",
  variants: [],
  rules: [
    rule("rule_1", [
      { attribute: "country", operator: "in", value: ["FR", "DE", "NL", "BE"] },
      { attribute: "plan", operator: "equals", value: "enterprise" },
      { attribute: "beta", operator: "is_true" },
    ]),
    rule("rule_2", [
      { attribute: "email", operator: "contains", value: "@example" },
      { attribute: "age", operator: "greater_than", value: 65 },
      { attribute: "plan", operator: "not_equals", value: "free" },
    ]),
    rule("rule_3", [
      { attribute: "appVersion", operator: "starts_with", value: "4." },
      { attribute: "beta", operator: "is_false" },
      { attribute: "country", operator: "not_in", value: ["FR", "DE"] },
    ]),
    rule("rule_4", [
      { attribute: "age", operator: "less_than", value: 99 },
      { attribute: "groups", operator: "contains", value: "staff" },
      { attribute: "plan", operator: "equals", value: "pro" },
    ]),
    rule("rule_5", [
      { attribute: "country", operator: "equals", value: "FR" },
      { attribute: "plan", operator: "in", value: ["pro", "team"] },
      { attribute: "age", operator: "greater_than", value: 17 },
    ]),
  ],
});

const variantsFlag = compileFlag({
  key: "pricing-page",
  variants: [
    { key: "red", weight: 20 },
    { key: "green", weight: 30.5 },
    { key: "blue", weight: 49.5 },
  ],
  rules: [],
});

const COUNTRIES = ["FR", "DE", "US", "JP", "BR"];
const contexts: EvalContext[] = Array.from({ length: 10_000 }, (_, i) => ({
  userId: `user-${i * 7919}`,
  email: `someone${i}@example.com`,
  country: COUNTRIES[i % COUNTRIES.length]!,
  plan: i % 3 === 0 ? "pro" : "team",
  age: 18 + (i % 40),
  beta: true,
  appVersion: "4.2.1",
  groups: ["users", "readers"],
}));

const cpu = pinServer();
console.log(`engine bench: ${contexts.length} contexts, ${SECONDS} s a scenario${cpu === undefined ? "" : ", pinned to CPU 0"}`);

let sink = 0;
const results: number[] = [];
for (const [name, flag, state] of [
  ["rules + rollout", rulesFlag, compileState({ enabled: true, rolloutPercentage: 50 })],
  ["weighted variants", variantsFlag, compileState({ enabled: true, rolloutPercentage: 80 })],
] as const) {
  run(flag, state, 1000);
  const rounds: number[] = [];
  for (let r = 0; r < SECONDS; r++) rounds.push(run(flag, state, 1000));
  rounds.sort((a, b) => a - b);
  const median = rounds[Math.floor(rounds.length / 2)]!;
  results.push(median);
  console.log(`${name.padEnd(18)} ${Math.round(median).toLocaleString("en-US").padStart(12)} evaluations/s`);
}
console.log(`target: at least ${TARGET.toLocaleString("en-US")}/s: ${results.every((r) => r >= TARGET) ? "met" : "NOT met"}`);
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

function rule(id: string, conditions: Parameters<typeof compileFlag>[0]["rules"][number]["conditions"]) {
  return { id, name: id, enabled: true, variant: null, conditions };
}
