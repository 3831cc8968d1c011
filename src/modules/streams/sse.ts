/**
 * One Server-Sent Events response: a byte stream the hub writes whole events to. The runtime
 * reads it as the socket takes data; a client that stops reading lets chunks queue up here, and
 * past MAX_QUEUED_CHUNKS the stream is ended (it reconnects, and is told what it missed). A
 * client that goes away cancels the stream: `onEnd` runs once, whichever side ended it.
 */

/** Chunks a stream may hold unread before it is ended (each an event or a ping). */
export const MAX_QUEUED_CHUNKS = 1000;

const encoder = new TextEncoder();

/** An event's bytes, to hand the same chunk to every stream it goes to. */
export const encode = (text: string): Uint8Array => encoder.encode(text);

/** The first line of every stream: reconnect after one second. */
export const RETRY = encode("retry: 1000\n\n");
/** The heartbeat: an SSE comment, which clients ignore. */
export const PING = encode(": ping\n\n");

/** The headers of every stream's 200 (with the pipeline's own: request id, rate limit, HSTS, nosniff). */
export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-store",
  "x-accel-buffering": "no",
} as const;

export class SseStream {
  readonly body: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private ended = false;
  /** Who waits for the client to have read what was queued (`drained`). */
  private waiting: (() => void) | undefined;

  constructor(private readonly onEnd: (stream: SseStream) => void) {
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.controller = controller;
        controller.enqueue(RETRY);
      },
      // The runtime asks for more once the client has read what was queued.
      pull: () => this.wake(),
      cancel: () => this.finish(),
    });
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Writes a whole event; false (and the stream ended) when it is closed or its client does not read. */
  write(chunk: Uint8Array): boolean {
    if (this.ended) return false;
    if ((this.controller.desiredSize ?? 0) < -MAX_QUEUED_CHUNKS) {
      this.close();
      return false;
    }
    try {
      this.controller.enqueue(chunk);
      return true;
    } catch {
      this.finish(); // the runtime closed it (the connection is gone)
      return false;
    }
  }

  /**
   * Resolves once the client has read what was queued, or the stream ended: a writer of many
   * events (a resume's backlog) waits for it between batches rather than queue them all.
   */
  drained(): Promise<void> {
    if (this.ended || (this.controller.desiredSize ?? 0) > 0) return Promise.resolve();
    return new Promise((resolve) => {
      const before = this.waiting;
      this.waiting = () => {
        before?.();
        resolve();
      };
    });
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.();
  }

  /** Ends the response (what was written is still sent). */
  close(): void {
    if (this.ended) return;
    try {
      this.controller.close();
    } catch {}
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.wake();
    this.onEnd(this);
  }
}
