/**
 * A Server-Sent Events reader for tests: parses a streaming Response's body (from app.handle or
 * a real connection) into events, as an EventSource would (fields `id`, `event`, `data`, `retry`;
 * comment lines kept as `comment`), and a client model of the definitions stream that applies
 * `put` and `patch` events.
 */

export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  /** A comment line (`: ping`), without its colon. */
  comment?: string;
}

export class SseReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private buffer = "";
  private queue: SseEvent[] = [];
  ended = false;
  /** Every event read so far, in order. */
  readonly seen: SseEvent[] = [];

  constructor(readonly response: Response) {
    this.reader = response.body!.getReader();
  }

  /** The next event (or block of comments), or "end" when the stream ended; throws after `timeoutMs`. */
  async next(timeoutMs = 5_000): Promise<SseEvent | "end"> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length === 0) {
      if (this.ended) return "end";
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms (seen: ${JSON.stringify(this.seen)})`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<"timeout">((r) => (timer = setTimeout(r, left, "timeout")));
      const read = await Promise.race([this.reader.read(), timeout]);
      clearTimeout(timer);
      if (read === "timeout") continue;
      if (read.done) {
        this.ended = true;
        continue;
      }
      this.buffer += this.decoder.decode(read.value, { stream: true });
      let end: number;
      while ((end = this.buffer.indexOf("\n\n")) >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        this.queue.push(parse(block));
      }
    }
    const event = this.queue.shift()!;
    this.seen.push(event);
    return event;
  }

  /** The next event that is not a comment (pings skipped). */
  async nextEvent(timeoutMs = 5_000): Promise<SseEvent | "end"> {
    for (;;) {
      const e = await this.next(timeoutMs);
      if (e === "end" || e.comment === undefined) return e;
    }
  }

  /** Resolves once the stream has ended (events before it are read and kept in `seen`). */
  async end(timeoutMs = 5_000): Promise<void> {
    while ((await this.next(timeoutMs)) !== "end");
  }

  /** Hangs up, as a client that goes away. */
  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => {});
    this.ended = true;
  }
}

function parse(block: string): SseEvent {
  const event: SseEvent = {};
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) {
      event.comment = line.slice(1).trim();
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") event.data = event.data === undefined ? value : `${event.data}\n${value}`;
    else if (field === "id" || field === "event" || field === "retry") event[field] = value;
  }
  return event;
}

/** A flag record of the definitions API. */
export interface FlagRecord {
  key: string;
  variants: unknown[];
  rules: unknown[];
  state: { enabled: boolean; rolloutPercentage: number | null };
}

/**
 * What a local evaluator holds: the flags by key after every `put` and `patch` applied, and the
 * last event id (what it sends as `Last-Event-ID` when it reconnects).
 */
export class DefinitionsModel {
  flags = new Map<string, FlagRecord>();
  lastId: string | null = null;
  puts = 0;
  patches = 0;

  apply(e: SseEvent): void {
    if (e.event === "put") {
      const d = JSON.parse(e.data!) as { version: number; flags: FlagRecord[] };
      expectEqual(String(d.version), e.id, "a put's id is its version");
      this.flags = new Map(d.flags.map((f) => [f.key, f]));
      this.puts++;
    } else if (e.event === "patch") {
      const p = JSON.parse(e.data!) as { version: number; flags: FlagRecord[]; deleted: string[] };
      expectEqual(String(p.version), e.id, "a patch's id is its version");
      if (this.lastId !== null && Number(e.id) <= Number(this.lastId)) throw new Error(`patch ${e.id} after ${this.lastId}: not newer`);
      for (const f of p.flags) this.flags.set(f.key, f);
      for (const k of p.deleted) this.flags.delete(k);
      this.patches++;
    } else return;
    this.lastId = e.id!;
  }

  /** The flags, ordered by key (as GET /v1/definitions answers them). */
  list(): FlagRecord[] {
    return [...this.flags.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  }
}

function expectEqual(a: unknown, b: unknown, what: string): void {
  if (a !== b) throw new Error(`${what}: ${String(a)} !== ${String(b)}`);
}
