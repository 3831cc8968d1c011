/**
 * Following `GET /v1/definitions/stream`: one connection at a time, read with fetch streaming
 * (Node 20+ and Bun alike) and parsed by `eventsource-parser`; reconnects with exponential
 * backoff and full jitter, resumes with `Last-Event-ID`, treats a connection that has said
 * nothing (not even the server's `: ping`) for `heartbeatTimeoutMs` as dead. 401 and 403 are
 * final: the key was refused, asking again changes nothing.
 *
 * What an event means is the owner's business (`StreamHandlers`): a handler that throws has
 * found the payload wrong, and the stream then reconnects without `Last-Event-ID` for a full
 * `put`.
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface StreamLogger {
  warn(...args: unknown[]): void;
  debug(...args: unknown[]): void;
}

export interface StreamOptions {
  /** The stream's absolute URL. */
  url: string;
  apiKey: string;
  fetch: typeof fetch;
  /** Backoff: the cap of the first delay (the server's `retry:` when this was not chosen), doubled per failure up to maxDelayMs. */
  initialDelayMs: number;
  /** Whether initialDelayMs was chosen by the user (else the server's `retry:` replaces it). */
  initialDelayChosen: boolean;
  maxDelayMs: number;
  /** No byte for this long: the connection is dead. */
  heartbeatTimeoutMs: number;
  logger: StreamLogger;
  /** For tests: [0, 1). */
  random?: () => number;
}

export interface StreamHandlers {
  /** The server answered 200 with an event stream. */
  onOpen(): void;
  /** An event (`put`, `patch`, or one this version does not know); throws when its payload is wrong. */
  onEvent(event: EventSourceMessage): void;
  /** The connection ended or could not be made; a new attempt follows after a delay. */
  onDisconnect(error: Error): void;
  /** The key was refused (401, 403): nothing more is tried. */
  onFatal(error: Error): void;
}

/** The server refused the key: no point in asking again. */
export class KeyRefusedError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "KeyRefusedError";
  }
}

/** How long a connection attempt may take to answer when the heartbeat allows longer. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Full jitter (the delay is uniform in [0, min(max, initial × 2^attempt)]). */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const cap = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * cap);
}

export class DefinitionsStream {
  /** The id of the last event applied: sent as `Last-Event-ID` on the next connection. */
  lastEventId: string | undefined;
  private closed = false;
  private attempt = 0;
  private controller: AbortController | undefined;
  private lastActivity = 0;
  private connected = false;
  private watchdog: ReturnType<typeof setInterval> | undefined;
  private wake: (() => void) | undefined;
  /** Set when the watchdog aborted the current connection. */
  private silence: Error | undefined;
  private running: Promise<void> | undefined;
  /** The backoff's first cap: the option, or the server's `retry:` when none was chosen. */
  private initialDelayMs: number;

  constructor(
    private readonly options: StreamOptions,
    private readonly handlers: StreamHandlers,
  ) {
    this.initialDelayMs = options.initialDelayMs;
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Ends the connection and every timer; resolves when the loop has stopped. */
  async close(): Promise<void> {
    this.closed = true;
    this.controller?.abort();
    this.wake?.();
    if (this.watchdog !== undefined) clearInterval(this.watchdog);
    this.watchdog = undefined;
    await this.running;
  }

  private async loop(): Promise<void> {
    const { options } = this;
    this.watchdog = setInterval(() => this.checkAlive(), Math.max(10, Math.min(1000, options.heartbeatTimeoutMs / 4)));
    unref(this.watchdog);
    while (!this.closed) {
      let healthy = false;
      let error: Error;
      try {
        healthy = await this.connectOnce();
        error = new Error("the stream ended");
      } catch (e) {
        if (this.closed) break;
        if (e instanceof KeyRefusedError) {
          this.closed = true;
          this.handlers.onFatal(e);
          break;
        }
        // An abort by the watchdog says why; the runtime's AbortError says less.
        error = this.silence ?? (e instanceof Error ? e : new Error(String(e)));
      }
      if (this.closed) break;
      this.connected = false;
      this.handlers.onDisconnect(error);
      if (healthy) this.attempt = 0;
      const delay = backoffDelay(this.attempt++, this.initialDelayMs, options.maxDelayMs, options.random);
      options.logger.debug(`flagsvc: definitions stream: ${error.message}; reconnecting in ${delay} ms`);
      await this.sleep(delay);
    }
    if (this.watchdog !== undefined) clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** One connection, read to its end; true when it delivered at least one event. */
  private async connectOnce(): Promise<boolean> {
    const { options } = this;
    const controller = new AbortController();
    this.controller = controller;
    this.silence = undefined;
    this.connected = false;
    this.lastActivity = Date.now();
    const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}`, accept: "text/event-stream", "cache-control": "no-cache" };
    if (this.lastEventId !== undefined) headers["last-event-id"] = this.lastEventId;

    const res = await options.fetch(options.url, { headers, signal: controller.signal });
    if (res.status === 401 || res.status === 403) {
      throw new KeyRefusedError(res.status, `flagsvc refused the API key (${res.status}${await errorMessage(res)})`);
    }
    if (res.status !== 200 || res.body === null) {
      const message = await errorMessage(res);
      throw new Error(`the definitions stream answered ${res.status}${message}`);
    }
    const type = res.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream")) {
      await res.body.cancel().catch(() => {});
      throw new Error(`the definitions stream answered ${type || "no content type"}, not text/event-stream`);
    }
    this.connected = true;
    this.lastActivity = Date.now();
    this.handlers.onOpen();

    let events = 0;
    let failure: Error | undefined;
    const parser = createParser({
      onEvent: (event) => {
        if (failure !== undefined) return;
        try {
          this.handlers.onEvent(event);
          events++;
          if (event.id !== undefined) this.lastEventId = event.id;
        } catch (e) {
          failure = e instanceof Error ? e : new Error(String(e));
        }
      },
      onRetry: (ms) => {
        if (!options.initialDelayChosen && ms > 0) this.initialDelayMs = ms;
      },
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.lastActivity = Date.now();
        parser.feed(decoder.decode(value, { stream: true }));
        if (failure !== undefined) {
          // The payload cannot be trusted: start again from a full state.
          this.lastEventId = undefined;
          throw failure;
        }
      }
    } finally {
      controller.abort();
      reader.releaseLock?.();
    }
    return events > 0;
  }

  /** Aborts a connection (or an attempt) that has been silent for too long. */
  private checkAlive(): void {
    const limit = this.connected ? this.options.heartbeatTimeoutMs : Math.min(this.options.heartbeatTimeoutMs, CONNECT_TIMEOUT_MS);
    const controller = this.controller;
    if (controller === undefined || controller.signal.aborted || this.wake !== undefined) return;
    if (Date.now() - this.lastActivity > limit) {
      this.options.logger.warn(`flagsvc: definitions stream silent for ${limit} ms: reconnecting`);
      this.silence = new Error(`no data for ${limit} ms`);
      controller.abort();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      this.wake = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    }).then(() => {
      this.wake = undefined;
    });
  }
}

/** ": message" of a JSON error answer, or "". */
async function errorMessage(res: Response): Promise<string> {
  try {
    const text = await res.text();
    const body = JSON.parse(text) as { message?: unknown };
    return typeof body.message === "string" ? `: ${body.message}` : "";
  } catch {
    return "";
  }
}

/** Timers that must not keep a process alive on their own (Node, Bun). */
export function unref(timer: unknown): void {
  (timer as { unref?: () => void }).unref?.();
}
