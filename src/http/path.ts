/**
 * The path of a request URL, without the query and a trailing slash (the app's routes take
 * `/v1/evaluate/` as `/v1/evaluate`); no URL object: this runs for every request the app gets.
 */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  const query = url.indexOf("?", start);
  const hash = url.indexOf("#", start);
  let end = query === -1 ? (hash === -1 ? url.length : hash) : query;
  if (end - start > 1 && url.charCodeAt(end - 1) === 47) end--;
  return url.slice(start, end);
}
