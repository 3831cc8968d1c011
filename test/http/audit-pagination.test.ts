/**
 * The audit log's pages stay correct while writes go on (issue 21, point 4): 8 writers PATCH
 * flags and PUT states continuously through app.handle while a reader pages through
 * GET /v1/projects/{slug}/audit-log 7 entries at a time. The pages hold every entry that
 * existed when paging started, none twice, newest first; the only others are entries
 * appended between that moment and the first page (newer ones never shift the pages).
 * A second walk with a filter (resourceKey) holds the same.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { bearer, entriesAfter, json, seedAdminKey, testApp, tick, type TestApp, onPostgres } from "../helpers";

const WRITERS = 8;
const FLAGS = 16;
const ENVIRONMENTS = ["development", "staging", "production"];

let h: TestApp;
let admin: Record<string, string>;

beforeAll(async () => {
  h = await testApp({ SVC_RATE_LIMITS: "eval:100000,test:100000,mgmt:100000,full:100000,admin:1000000,user:100000,anonymous:100000" });
  admin = bearer(await seedAdminKey(h.ctx));
  for (let f = 0; f < FLAGS; f++) await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: `page-${f}`, name: `Page ${f}` } }), 201);
  // A history to page through before the writers start: 12 entries a flag (about 30 pages of the project's log).
  for (let f = 0; f < FLAGS; f++) {
    for (let n = 0; n < 12; n++) await json(await h.request("PATCH", `/v1/projects/default/flags/page-${f}`, { headers: admin, body: { name: `Page ${f} before ${n}` } }), 200);
  }
});
afterAll(() => h.close());

/** Writer `w` until `stopped()`: its own flags (w, w + 8), a rename or a state flip a time. */
async function writer(w: number, stopped: () => boolean): Promise<number> {
  const enabled = new Map<string, boolean>();
  let n = 0;
  for (; !stopped(); n++) {
    const key = `page-${w + WRITERS * (n % 2)}`;
    if (n % 2 === 0) {
      await json(await h.request("PATCH", `/v1/projects/default/flags/${key}`, { headers: admin, body: { name: `Writer ${w} write ${n}` } }), 200);
    } else {
      const at = `${key}/${ENVIRONMENTS[n % 3]}`;
      const next = !(enabled.get(at) ?? false);
      await json(await h.request("PUT", `/v1/projects/default/flags/${key}/states/${ENVIRONMENTS[n % 3]}`, { headers: admin, body: { enabled: next } }), 200);
      enabled.set(at, next);
    }
    // app.handle may answer without a macrotask: without this the writers would starve the reader's timers.
    await tick();
  }
  return n;
}

/** The positions of the project's entries (of one resource key, when given), newest first, read from the whole log. */
const positions = async (resourceKey?: string) =>
  (await entriesAfter(h.ctx, 0))
    .filter((r) => r.project_slug === "default" && (resourceKey === undefined || r.resource_key === resourceKey))
    .map((r) => r.position)
    .reverse();

/** Pages through the project's log (`query` added), 7 at a time, while the writers write; the entries in page order. */
async function walk(resourceKey?: string) {
  const query = resourceKey ? `&resourceKey=${resourceKey}` : "";
  let stop = false;
  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w, () => stop));
  await Bun.sleep(50); // the writers are under way
  const existing = await positions(resourceKey);
  const mark = existing[0]!;
  const seen: { id: string; position: number }[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await h.request("GET", `/v1/projects/default/audit-log?limit=7${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { headers: admin });
    const page = await json(res, 200);
    expect(page.entries.length).toBeLessThanOrEqual(7);
    seen.push(...(page.entries as { id: string; position: number }[]).map(({ id, position }) => ({ id, position })));
    cursor = page.nextCursor;
    pages++;
    await tick(); // the writers get a turn between every two pages
  } while (cursor !== null);
  stop = true;
  const written = (await Promise.all(writers)).reduce((a, b) => a + b, 0);
  return { existing, mark, seen, pages, written };
}

function check({ existing, mark, seen, written }: Awaited<ReturnType<typeof walk>>) {
  // None repeated, newest first.
  expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length);
  for (let i = 1; i < seen.length; i++) expect(seen[i]!.position).toBeLessThan(seen[i - 1]!.position);
  // Every entry that existed when paging started, none skipped.
  expect(seen.filter((e) => e.position <= mark).map((e) => e.position)).toEqual(existing);
  // The others: appended after that moment, before the first page was read (all at its head).
  const newer = seen.filter((e) => e.position > mark);
  expect(seen.slice(0, newer.length)).toEqual(newer);
  // The writers did write meanwhile.
  // (A commit costs ~10x more on PostgreSQL, and a loaded machine slows it more: there, that some were written is the point.)
  expect(written).toBeGreaterThan(onPostgres ? 0 : 50);
}

test("the project's log, 7 a page, while 8 writers write: every entry that existed, once, newest first", async () => {
  const result = await walk();
  expect(result.pages).toBeGreaterThan(25);
  check(result);
});

test("one flag's history (resourceKey: the flag and its states), 7 a page, while 8 writers write", async () => {
  const result = await walk("page-3");
  expect(result.pages).toBeGreaterThanOrEqual(2);
  check(result);
});
