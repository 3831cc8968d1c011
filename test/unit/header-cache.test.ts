import { describe, expect, test } from "bun:test";
import { HeaderCache } from "../../src/http/header-cache";

const entries = (h: Headers) => Object.fromEntries([...(h as unknown as Iterable<[string, string]>)]);
const constant = { "cache-control": "no-store", "x-content-type-options": "nosniff" };

describe("HeaderCache", () => {
  test("fill: the constants plus the record's values, as Headers", () => {
    const cache = new HeaderCache(constant, ["x-request-id", "x-ratelimit-remaining"]);
    const h = cache.fill({ "x-request-id": "a", "x-ratelimit-remaining": "9" })!;
    expect(entries(h)).toEqual({ ...constant, "x-request-id": "a", "x-ratelimit-remaining": "9" });
  });

  test("a Response keeps the values of its own fill; the next fill changes only the cache", () => {
    const cache = new HeaderCache(constant, ["x-request-id"]);
    const first = Response.json({}, { headers: cache.fill({ "x-request-id": "first" })! });
    const second = Response.json({}, { headers: cache.fill({ "x-request-id": "second" })! });
    expect(first.headers.get("x-request-id")).toBe("first");
    expect(second.headers.get("x-request-id")).toBe("second");
    expect(second.headers.get("cache-control")).toBe("no-store");
  });

  test("a number is set as its decimal text", () => {
    const cache = new HeaderCache(constant, ["x-request-id", "x-ratelimit-remaining"]);
    expect(entries(cache.fill({ "x-request-id": "a", "x-ratelimit-remaining": 499 })!)["x-ratelimit-remaining"]).toBe("499");
    expect(entries(cache.fill({ "x-request-id": "a", "x-ratelimit-remaining": 0 })!)["x-ratelimit-remaining"]).toBe("0");
  });

  test("other names, a missing one, or a value that is neither a string nor a number: null", () => {
    const cache = new HeaderCache(constant, ["x-request-id", "x-ratelimit-limit"]);
    expect(cache.fill({ "x-request-id": "a" })).toBeNull();
    expect(cache.fill({ "x-request-id": "a", "x-ratelimit-limit": "1", allow: "GET" })).toBeNull();
    expect(cache.fill({ "x-request-id": "a", "retry-after": "1" })).toBeNull();
    expect(cache.fill({ "x-request-id": "a", "x-ratelimit-limit": true })).toBeNull();
    expect(cache.fill({ "x-request-id": "a", "x-ratelimit-limit": undefined })).toBeNull();
    // A value a header cannot hold is refused, and the cache still answers correctly after it.
    expect(cache.fill({ "x-request-id": "a\r\nx-evil: 1", "x-ratelimit-limit": "1" })).toBeNull();
    expect(entries(cache.fill({ "x-request-id": "b", "x-ratelimit-limit": "2" })!)).toEqual({ ...constant, "x-request-id": "b", "x-ratelimit-limit": "2" });
  });

  test("answer: the cache's Headers when the record fits, else the record completed", () => {
    const cache = new HeaderCache(constant, ["x-request-id"]);
    const fits = cache.answer({ "x-request-id": "a" });
    expect(fits).toBeInstanceOf(Headers);
    expect(entries(fits as Headers)).toEqual({ ...constant, "x-request-id": "a" });
    const own = { "x-request-id": "b", allow: "GET" };
    expect(cache.answer(own)).toBe(own);
    expect(own).toEqual({ "x-request-id": "b", allow: "GET", ...constant });
  });

  test("complete: a number among the per-response names becomes its text", () => {
    const cache = new HeaderCache(constant, ["x-request-id", "x-ratelimit-remaining"]);
    const record = { "x-request-id": "a", "x-ratelimit-remaining": 0, "retry-after": "30" };
    expect(cache.answer(record)).toBe(record as never);
    expect(record).toEqual({ "x-request-id": "a", "x-ratelimit-remaining": "0", "retry-after": "30", ...constant } as never);
  });

  test("complete: adds the constants a record does not set, keeps the record's own", () => {
    const cache = new HeaderCache(constant, ["x-request-id"]);
    const record: Record<string, unknown> = { "x-request-id": "a", "cache-control": "public, max-age=60", allow: "GET" };
    cache.complete(record);
    expect(record).toEqual({ "x-request-id": "a", "cache-control": "public, max-age=60", allow: "GET", "x-content-type-options": "nosniff" });
  });
});
