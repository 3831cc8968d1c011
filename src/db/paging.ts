/**
 * Paging in the stores (docs/architecture.md, Storage): a list's store returns one page and the
 * number of rows over all pages; the SQL does LIMIT, OFFSET and COUNT.
 */
import { foldCase } from "../lib/fold";

/** `limit` rows after skipping `offset`. */
export interface PageRequest {
  limit: number;
  offset: number;
}

/** A page's rows and how many match over all pages. */
export interface Paged<T> {
  rows: T[];
  total: number;
}

/** The API's 1-based `page` and `perPage` as a store's page. */
export function pageRequest(page: number, perPage: number): PageRequest {
  return { limit: perPage, offset: (page - 1) * perPage };
}

/**
 * A text search's page: `q` in the key or the case-folded name (`foldCase`). SQLite has no
 * Unicode case folding, so its stores read the rows the other filters leave, in order, and
 * page the matches here (the filters without `q` are paged by the SQL).
 */
export function searchPage<T extends { key: string; name: string }>(rows: readonly T[], q: string, page: PageRequest): Paged<T> {
  const folded = foldCase(q);
  const matches = rows.filter((r) => r.key.includes(folded) || foldCase(r.name).includes(folded));
  return { rows: matches.slice(page.offset, page.offset + page.limit), total: matches.length };
}
