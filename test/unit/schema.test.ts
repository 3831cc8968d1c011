/** Shared schema helpers: the query-number patterns say exactly what their messages say. */
import { expect, test } from "bun:test";
import { ONE_OR_MORE, ONE_TO_100 } from "../../src/http/schema";
import { PER_PAGE_MAX } from "../../src/modules/flags/model";
import { DELIVERY_LIMIT_MAX } from "../../src/modules/webhooks/model";

test("ONE_TO_100 takes exactly 1..100 in plain decimal, the bound of perPage and limit", () => {
  expect([PER_PAGE_MAX, DELIVERY_LIMIT_MAX]).toEqual([100, 100]);
  const re = new RegExp(ONE_TO_100);
  for (let n = -5; n <= 1000; n++) expect({ n, ok: re.test(String(n)) }).toEqual({ n, ok: n >= 1 && n <= 100 });
  for (const s of ["01", "1.0", "0x10", "1e2", "+1", " 5", "5 ", "-0", "", "١"]) expect({ s, ok: re.test(s) }).toEqual({ s, ok: false });
});

test("ONE_OR_MORE takes 1..999999999 in plain decimal", () => {
  const re = new RegExp(ONE_OR_MORE);
  for (const s of ["1", "9", "10", "999999999"]) expect({ s, ok: re.test(s) }).toEqual({ s, ok: true });
  for (const s of ["0", "01", "1000000000", "1e21", "0x10", "+1", " 1", "-1", "1.5", ""]) expect({ s, ok: re.test(s) }).toEqual({ s, ok: false });
});
