/**
 * The flags and contexts the in-process evaluation benches measure (bench:engine, and
 * bench:provider, which creates the same flags through the API): "rules + rollout" (5 rules of
 * 3 conditions, where most rules pass their first conditions and fail a later one so that every
 * condition kind runs, only the last rule matches a few contexts; then a 50 % rollout: one hash)
 * and "weighted variants" (3 weighted variants behind an 80 % rollout: two hashes for included
 * users). 10,000 contexts, userId varying.
 */
import type { Condition, EvalContext, FlagDefinition, FlagState } from "../../src/evaluation/types";

export interface Scenario {
  name: string;
  flag: FlagDefinition;
  state: FlagState;
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: "rules + rollout",
    flag: {
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
    },
    state: { enabled: true, rolloutPercentage: 50 },
  },
  {
    name: "weighted variants",
    flag: {
      key: "pricing-page",
      variants: [
        { key: "red", weight: 20 },
        { key: "green", weight: 30.5 },
        { key: "blue", weight: 49.5 },
      ],
      rules: [],
    },
    state: { enabled: true, rolloutPercentage: 80 },
  },
];

const COUNTRIES = ["FR", "DE", "US", "JP", "BR"];

/** The contexts, as /v1/evaluate and the engine take them (`userId`). */
export const CONTEXTS: readonly EvalContext[] = Array.from({ length: 10_000 }, (_, i) => ({
  userId: `user-${i * 7919}`,
  email: `someone${i}@example.com`,
  country: COUNTRIES[i % COUNTRIES.length]!,
  plan: i % 3 === 0 ? "pro" : "team",
  age: 18 + (i % 40),
  beta: true,
  appVersion: "4.2.1",
  groups: ["users", "readers"],
}));

function rule(id: string, conditions: Condition[]) {
  return { id, name: id, enabled: true, variant: null, conditions };
}
