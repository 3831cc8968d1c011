/** Identifiers (decisions §2): prefix, at least 128 random bits, URL-safe; events and deliveries sort by time. */
import { expect, test } from "bun:test";
import { ID_RANDOM_LENGTH, newId, sortableId } from "../../src/lib/ids";

test("newId: the prefix, then 22 base62 characters (131 bits)", () => {
  expect(newId("flag")).toMatch(/^flag_[0-9A-Za-z]{22}$/);
  expect(ID_RANDOM_LENGTH * Math.log2(62)).toBeGreaterThanOrEqual(128);
});

test("sortableId: 8 characters of time, then the same 22 random ones; later ids sort after earlier ones", () => {
  const id = sortableId("del", Date.parse("2026-11-22T10:00:00.000Z"));
  expect(id).toMatch(/^del_[0-9A-Za-z]{30}$/);
  const times = [0, 1, 61, 62, 3843, 1_700_000_000_000, Date.parse("2026-11-22T10:00:00.001Z"), Date.parse("9999-12-31T23:59:59.999Z")];
  const ids = times.map((t) => sortableId("evt", t));
  // Plain string order (SQLite's BINARY collation too) is time order.
  expect([...ids].sort()).toEqual(ids);
  expect(ids.map((i) => i.slice(4, 12))).toEqual(["00000000", "00000001", "0000000z", "00000010", "000000zz", expect.any(String), expect.any(String), expect.any(String)]);
  // The random part differs between ids of the same millisecond.
  const made = Array.from({ length: 1000 }, () => sortableId("evt", 5));
  expect(new Set(made).size).toBe(1000);
  // ... and ids of the same millisecond sort in the order they were made.
  expect([...made].sort()).toEqual(made);
});
