/** The insights flusher with an asynchronous store (PostgreSQL's `writeNow` returns its promise). */
import { expect, test } from "bun:test";
import { FlagCounter } from "../../src/evaluation/counts";
import type { EvaluationResult } from "../../src/evaluation/types";
import { createLogger } from "../../src/lib/log";
import { InsightsFlusher } from "../../src/modules/insights/flusher";
import type { CounterBatch } from "../../src/modules/insights/store";
import { TestClock } from "../helpers";

const result: EvaluationResult = { flagKey: "a", enabled: true, variant: null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: "" };

test("an asynchronous write that fails gives the counts back (the next flush has them) and is logged; one that succeeds does not", async () => {
  const counter = new FlagCounter("p1", "e1", "a");
  let logged = "";
  const writes: CounterBatch[][] = [];
  let fail = true;
  const flusher = new InsightsFlusher({
    snapshot: { labelledCounters: function* () { yield { counter, projectSlug: "alpha", environmentSlug: "dev" }; } },
    store: { writeNow: async (_bucket, batch) => { writes.push(batch.map((b) => ({ ...b }))); if (fail) throw new Error("connection lost"); } },
    clock: new TestClock(),
    log: createLogger({ level: "error", format: "json", write: (chunk) => (logged += chunk) }),
  });
  counter.add(result, 1);
  counter.add(result, 2);
  expect(flusher.flush()).toBe(1);
  await Bun.sleep(0);
  expect(logged).toContain("connection lost");
  fail = false;
  counter.add(result, 3);
  expect(flusher.flush()).toBe(1);
  await Bun.sleep(0);
  expect(writes.map((w) => w[0]!.cells)).toEqual([[{ variant: "on", reason: "FLAG_ENABLED", count: 2 }], [{ variant: "on", reason: "FLAG_ENABLED", count: 3 }]]);
  expect(flusher.flush()).toBe(0);
});
