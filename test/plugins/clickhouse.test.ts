/** @flagsvc/clickhouse against a receiver checking ClickHouse's HTTP interface (INSERT ... FORMAT JSONEachRow). */
import { afterAll, expect, test } from "bun:test";
import { evaluation, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const FOLDER = "clickhouse-1.0.0";
const { receiver: clickhouse, baseUrl } = vendor();
afterAll(() => clickhouse.stop());

test("activate refuses a table or database that is no identifier (it goes into the SQL) and a bad baseUrl", async () => {
  for (const bad of [{ table: "evals; DROP TABLE users" }, { database: "1db" }, { table: "a.b" }, { baseUrl: "localhost:8123" }, { asyncInsert: "yes" }]) {
    expect(schemaAccepts(FOLDER, bad)).toBe(false);
    const { sandbox } = await loadUnchecked(FOLDER, bad);
    await expect(sandbox.call("activate")).rejects.toThrow(/config\.(table|database|baseUrl|asyncInsert) must be/);
  }
  const { sandbox, logs } = await loadPackage(FOLDER, {});
  await sandbox.call("activate");
  expect(logs).toEqual([["info", "inserting evaluations into default.flag_evaluations at http://localhost:8123"]]);
});

test("onEvaluations inserts every record as a JSONEachRow line, with the user and key headers", async () => {
  const { sandbox } = await loadPackage(FOLDER, { baseUrl, username: "flagsvc", password: "s3cret", database: "analytics", table: "shop_evaluations" });
  const batch = [
    evaluation(),
    evaluation(), // a warehouse keeps every evaluation
    evaluation({ flagKey: "new-nav", enabled: false, variant: null, reason: "FLAG_DISABLED", ruleId: null, userId: null, evaluatedAt: "2026-11-20T10:00:00.120Z" }),
  ];
  await sandbox.call("onEvaluations", batch);
  const [insert] = await clickhouse.waitFor(1);
  expect(insert!.method).toBe("POST");
  expect(insert!.path).toBe("/");
  expect(insert!.query.get("query")).toBe("INSERT INTO shop_evaluations FORMAT JSONEachRow");
  expect(insert!.query.get("database")).toBe("analytics");
  expect(insert!.query.has("async_insert")).toBe(false);
  expect(insert!.headers.get("x-clickhouse-user")).toBe("flagsvc");
  expect(insert!.headers.get("x-clickhouse-key")).toBe("s3cret");
  expect(insert!.text.endsWith("\n")).toBe(true);
  const rows = insert!.text.trimEnd().split("\n").map((line) => JSON.parse(line));
  const first = { evaluated_at: "2026-11-20 10:00:00.000", flag_key: "checkout-v2", environment: "production", enabled: true, variant: "blue", reason: "TARGETING_RULE_MATCH", rule_id: "rule_1", user_id: "user-42" };
  expect(rows).toEqual([
    first,
    first,
    { evaluated_at: "2026-11-20 10:00:00.120", flag_key: "new-nav", environment: "production", enabled: false, variant: null, reason: "FLAG_DISABLED", rule_id: null, user_id: null },
  ]);
});

test("asyncInsert adds ClickHouse's async insert settings to the query string", async () => {
  const { sandbox } = await loadPackage(FOLDER, { baseUrl, asyncInsert: true });
  const before = clickhouse.received.length;
  await sandbox.call("onEvaluations", [evaluation()]);
  const insert = clickhouse.received[before]!;
  expect(insert.query.get("async_insert")).toBe("1");
  expect(insert.query.get("wait_for_async_insert")).toBe("1");
  expect(insert.query.get("query")).toBe("INSERT INTO flag_evaluations FORMAT JSONEachRow");
  expect(insert.headers.get("x-clickhouse-user")).toBe("default");
  expect(insert.headers.get("x-clickhouse-key")).toBe("");
});

test("ClickHouse's error answer fails the hook with the status and its text", async () => {
  const { sandbox, logs } = await loadPackage(FOLDER, { baseUrl });
  clickhouse.answer = () => new Response("Code: 60. DB::Exception: Table default.flag_evaluations does not exist.", { status: 404 });
  try {
    await expect(sandbox.call("onEvaluations", [evaluation()])).rejects.toThrow("ClickHouse answered 404: Code: 60. DB::Exception: Table default.flag_evaluations does not exist.");
  } finally {
    clickhouse.answer = () => new Response("");
  }
  expect(logs.at(-1)?.[0]).toBe("warn");
});
