/**
 * Response headers without building them for every response.
 *
 * Bun turns a plain-object `headers` init into a native header list one entry at a time
 * (~130 ns a header in a tight loop, several times that inside a busy server): the eight
 * headers of an answer (the three X-RateLimit-* of decisions §13 among them) cost more than
 * the rest of a trivial route. A `Headers` instance given to `new Response` / `Response.json`
 * is copied whole instead, in a fraction of that. So each place that answers keeps one
 * `Headers` holding its constant headers, and per response sets only the values that changed
 * since the previous one (the request id and the remaining count, usually). The Response
 * copies it at once, so reusing it for the next response is safe: what `fill` returns must go
 * to a Response constructor before anything else runs (no `await` in between).
 */
export class HeaderCache {
  private readonly headers: Headers;
  private readonly constantNames: string[];
  /** What `headers` holds now, by the index of `names`: compared in JS, set natively only on change. */
  private readonly values: (string | number)[];

  /**
   * `constant`: headers every response gets (a response's own value for one of them wins);
   * `names`: the per-response ones, all of them on every response this cache serves. Lower case.
   */
  constructor(
    private readonly constant: Readonly<Record<string, string>>,
    private readonly names: readonly string[],
  ) {
    this.constantNames = Object.keys(constant);
    this.values = names.map(() => "");
    this.headers = new Headers([...Object.entries(constant), ...names.map((name) => [name, ""] as [string, string])]);
  }

  /**
   * The constant headers plus `record`, as a `Headers` valid until the next call; null when
   * `record` has other names than `names` (an error's `Allow` or `Retry-After`, a route's own
   * header, a rate limit that was never counted) or a value that is neither a string nor a
   * number: then `complete` the record and give it to the Response.
   */
  fill(record: Record<string, unknown>): Headers | null {
    const { names, values, headers } = this;
    let count = 0;
    for (const _ in record) count++;
    if (count !== names.length) return null;
    for (let i = 0; i < names.length; i++) {
      const value = record[names[i]!];
      if (typeof value !== "string" && typeof value !== "number") return null;
      if (value !== values[i]) {
        try {
          headers.set(names[i]!, value as string); // a number becomes its decimal text
        } catch {
          return null; // not a valid header value: the Response refuses the record alike
        }
        values[i] = value;
      }
    }
    return headers;
  }

  /** `fill(record)`, or else `record` completed: the headers for a Response made right now. */
  answer(record: Record<string, unknown>): Headers | Record<string, string> {
    const headers = this.fill(record);
    if (headers !== null) return headers;
    this.complete(record);
    return record as Record<string, string>;
  }

  /**
   * Adds the constant headers `record` does not set itself; a number among `names` (the remaining
   * count) becomes its text.
   */
  complete(record: Record<string, unknown>): void {
    for (const name of this.constantNames) if (record[name] === undefined) record[name] = this.constant[name];
    for (const name of this.names) if (typeof record[name] === "number") record[name] = String(record[name]);
  }
}
