/**
 * The evaluation-record stream alone (src/modules/evaluation/records.ts), and fed by evaluation
 * through HTTP: batches of at most 500 or after a second, one JSON text shared by a project's
 * readers, nothing kept for a project nobody reads.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { EvaluationResult } from "../../src/evaluation/types";
import { busyGauge } from "../../src/lib/scheduling";
import { BUSY_INTERVAL_MS, EvaluationRecords, FLUSH_AFTER_MS, MAX_BATCH } from "../../src/modules/evaluation/records";
import { bearer, seedApiKey, testApp, type TestApp } from "../helpers";

const AT = "2026-11-22T10:00:00.000Z";
const result = (flagKey: string, enabled = true): EvaluationResult => ({ flagKey, enabled, variant: enabled ? "blue" : null, reason: "FLAG_ENABLED", ruleId: null, evaluatedAt: AT });

const streams: EvaluationRecords[] = [];
function stream(): EvaluationRecords {
  const s = new EvaluationRecords();
  streams.push(s);
  return s;
}
afterEach(() => {
  for (const s of streams.splice(0)) s.stop();
});

describe("the stream", () => {
  test("nothing is wanted or kept for a project without readers", async () => {
    const records = stream();
    const got: string[] = [];
    expect(records.wants("p1")).toBe(false);
    records.add("p1", "production", result("a"), "u1");
    const unsubscribe = records.subscribe("p1", (json) => got.push(json));
    expect(records.wants("p1")).toBe(true);
    expect(records.wants("p2")).toBe(false);
    unsubscribe();
    expect(records.wants("p1")).toBe(false);
    await Bun.sleep(FLUSH_AFTER_MS + 100);
    expect(got).toEqual([]);
  });

  test("a full batch is flushed at once as one JSON text, the same for every reader of the project", () => {
    const records = stream();
    const a: [string, number][] = [];
    const b: [string, number][] = [];
    const other: string[] = [];
    records.subscribe("p1", (json, count) => a.push([json, count]));
    records.subscribe("p1", (json, count) => b.push([json, count]));
    records.subscribe("p2", (json) => other.push(json));
    for (let i = 0; i < MAX_BATCH * 2 + 1; i++) records.add("p1", i % 2 ? "staging" : "production", result(`f${i}`, i % 3 !== 0), i % 5 ? `u${i}` : null);
    expect(a.map(([, count]) => count)).toEqual([500, 500]);
    expect(b[0]![0]).toBe(a[0]![0]);
    expect(other).toEqual([]);
    const batch = JSON.parse(a[0]![0]);
    expect(batch).toHaveLength(500);
    expect(batch[0]).toEqual({ flagKey: "f0", environment: "production", enabled: false, variant: null, reason: "FLAG_ENABLED", ruleId: null, userId: null, evaluatedAt: AT });
    expect(batch[1]).toEqual({ flagKey: "f1", environment: "staging", enabled: true, variant: "blue", reason: "FLAG_ENABLED", ruleId: null, userId: "u1", evaluatedAt: AT });
    expect(JSON.parse(a[1]![0])[0].flagKey).toBe("f500");
  });

  test("a partial batch is flushed about a second after its first record; a failing reader does not stop the others", async () => {
    const errors: unknown[] = [];
    const records = new EvaluationRecords((e) => errors.push(e));
    streams.push(records);
    const got: { at: number; count: number }[] = [];
    records.subscribe("p1", () => {
      throw new Error("reader bug");
    });
    records.subscribe("p1", (_, count) => got.push({ at: performance.now(), count }));
    const started = performance.now();
    records.add("p1", "production", result("a"), "u1");
    await Bun.sleep(300);
    records.add("p1", "production", result("b"), "u1");
    await Bun.sleep(FLUSH_AFTER_MS);
    expect(got).toHaveLength(1);
    expect(got[0]!.count).toBe(2);
    expect(got[0]!.at - started).toBeGreaterThanOrEqual(FLUSH_AFTER_MS - 5);
    expect(got[0]!.at - started).toBeLessThan(FLUSH_AFTER_MS + 250);
    expect(errors).toHaveLength(1);
  });

  test("a reader that is not ready is told the count instead; a batch nobody is ready for is not built", () => {
    const records = stream();
    let ready = true;
    const taken: number[] = [];
    const missed: number[] = [];
    const other: number[] = [];
    records.subscribe("p1", { ready: () => ready, take: (_json, count) => taken.push(count), missed: (count) => missed.push(count) });
    records.subscribe("p1", { ready: () => false, take: () => other.push(-1), missed: (count) => other.push(count) });
    const fill = () => {
      for (let i = 0; i < MAX_BATCH; i++) records.add("p1", "production", result(`f${i}`), "u1");
    };
    fill();
    ready = false;
    fill();
    fill();
    ready = true;
    fill();
    expect(taken).toEqual([500, 500]);
    expect(missed).toEqual([500, 500]);
    expect(other).toEqual([500, 500, 500, 500]);
  });

  test("while the request thread is busy each reader takes at most one batch a second, and is told the count of the others", async () => {
    let busy = true;
    const records = new EvaluationRecords(undefined, () => busy);
    streams.push(records);
    const taken: string[] = [];
    let missed = 0;
    records.subscribe("p1", { take: (json) => taken.push(json), missed: (count) => (missed += count) });
    const fill = (tag: string) => {
      for (let i = 0; i < MAX_BATCH; i++) records.add("p1", "production", result(`${tag}${i}`), "u1");
    };
    for (const tag of ["a", "b", "c", "d"]) fill(tag);
    expect(taken.map((json) => JSON.parse(json)[0].flagKey)).toEqual(["a0"]);
    expect(missed).toBe(3 * MAX_BATCH);
    await Bun.sleep(BUSY_INTERVAL_MS + 50);
    fill("e");
    fill("f");
    expect(taken.map((json) => JSON.parse(json)[0].flagKey)).toEqual(["a0", "e0"]);
    expect(missed).toBe(4 * MAX_BATCH);
    // No longer busy: every batch again.
    busy = false;
    fill("g");
    fill("h");
    expect(taken.map((json) => JSON.parse(json)[0].flagKey)).toEqual(["a0", "e0", "g0", "h0"]);
  });

  test("the busy gauge: a thread on the CPU for most of a window is busy, an idle one is not", async () => {
    const busy = busyGauge(0.8, 100);
    const spin = (ms: number) => {
      const until = performance.now() + ms;
      while (performance.now() < until);
    };
    // Spinning a window at a time until one reads busy (a loaded machine may keep this thread off the CPU for part of one).
    let seen = false;
    for (let i = 0; i < 20 && !seen; i++) {
      spin(120);
      seen = busy();
    }
    expect(seen).toBe(true);
    // Within the window: the last reading.
    expect(busy()).toBe(true);
    await Bun.sleep(150);
    expect(busy()).toBe(false);
  });

  test("the cost of a batch of 500", () => {
    const records = stream();
    let n = 0;
    records.subscribe("p1", () => n++);
    const results = Array.from({ length: MAX_BATCH }, (_, i) => result(`flag-${i}`));
    const started = performance.now();
    for (let round = 0; round < 200; round++) for (const r of results) records.add("p1", "production", r, "user-12345");
    const perBatch = (performance.now() - started) / 200;
    console.log(`evaluation records: ${perBatch.toFixed(3)} ms per batch of ${MAX_BATCH} (add x500 + JSON)`);
    expect(n).toBe(200);
    expect(perBatch).toBeLessThan(10);
  });
});

describe("fed by evaluation", () => {
  let t: TestApp;
  afterEach(() => t.close());

  test("single and batch evaluations of the project are recorded with the key's environment and the context's userId", async () => {
    t = await testApp();
    const { secret } = await seedApiKey(t.ctx, "eval");
    const projectId = (t.sqlite.query("SELECT id FROM projects WHERE slug = 'default'").get() as { id: string }).id;
    const batches: string[] = [];
    t.ctx.records.subscribe(projectId, (json) => batches.push(json));
    expect((await t.request("POST", "/v1/evaluate", { body: { flagKey: "nope", context: { userId: 42 } }, headers: bearer(secret) })).status).toBe(200);
    expect((await t.request("POST", "/v1/evaluate/batch", { body: { flags: ["x", "y", "x"], context: { userId: "u-1" } }, headers: bearer(secret) })).status).toBe(200);
    expect((await t.request("POST", "/v1/evaluate", { body: { flagKey: "z", context: { userId: true } }, headers: bearer(secret) })).status).toBe(200);
    await Bun.sleep(FLUSH_AFTER_MS + 200);
    expect(batches).toHaveLength(1);
    const records = JSON.parse(batches[0]!);
    expect(records.map((r: Record<string, unknown>) => [r.flagKey, r.environment, r.userId, r.reason])).toEqual([
      ["nope", "development", "42", "FLAG_NOT_FOUND"],
      ["x", "development", "u-1", "FLAG_NOT_FOUND"],
      ["y", "development", "u-1", "FLAG_NOT_FOUND"],
      ["z", "development", null, "FLAG_NOT_FOUND"],
    ]);
    expect(Object.keys(records[0]).sort()).toEqual(["enabled", "environment", "evaluatedAt", "flagKey", "reason", "ruleId", "userId", "variant"]);
  });
});
