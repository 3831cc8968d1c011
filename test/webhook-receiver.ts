/**
 * A real HTTP receiver for webhook tests: Bun.serve on 127.0.0.1 that keeps every request it
 * gets (headers and the exact body bytes) and answers as the test says.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export interface Received {
  headers: Headers;
  /** The body bytes exactly as received. */
  bytes: Uint8Array;
  /** The body as UTF-8 text. */
  text: string;
  /** The body parsed as JSON; null when it is not JSON (e.g. newline-delimited rows). */
  json: any;
  method: string;
  path: string;
  /** The query string's parameters. */
  query: URLSearchParams;
  /** performance.now() when it arrived. */
  at: number;
}

export type Answer = (request: Request, n: number) => Response | Promise<Response>;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** How the next requests are answered (default 200 "ok"). */
  answer: Answer;
  /**
   * Deliveries (`x-service-delivery`) that arrived while a request of the same delivery was still
   * being answered: one entry per such arrival. Empty when no delivery was ever in flight twice at once.
   */
  overlaps: string[];
  /** Resolves once `n` requests have arrived; throws after `timeoutMs`. */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  stop(): void;
}

export function startReceiver(opts: { port?: number; answer?: Answer } = {}): Receiver {
  const received: Received[] = [];
  const inFlight = new Map<string, number>();
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: "",
    port: 0,
    received,
    answer: opts.answer ?? (() => new Response("ok")),
    overlaps: [],
    waitFor(n, timeoutMs = 5_000) {
      return new Promise((done, fail) => {
        const check = () => {
          if (received.length < n) return;
          clearTimeout(timer);
          waiters.delete(check);
          done(received);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          fail(new Error(`expected ${n} webhook requests within ${timeoutMs} ms, got ${received.length}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    stop: () => server.stop(true),
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: opts.port ?? 0,
    idleTimeout: 30,
    async fetch(request) {
      const bytes = new Uint8Array(await request.arrayBuffer());
      const text = new TextDecoder().decode(bytes);
      const url = new URL(request.url);
      received.push({ headers: request.headers, bytes, text, json: parseJson(text), method: request.method, path: url.pathname, query: url.searchParams, at: performance.now() });
      for (const w of [...waiters]) w();
      const delivery = request.headers.get("x-service-delivery");
      if (delivery === null) return receiver.answer(request, received.length);
      const n = inFlight.get(delivery) ?? 0;
      if (n > 0) receiver.overlaps.push(delivery);
      inFlight.set(delivery, n + 1);
      try {
        return await receiver.answer(request, received.length);
      } finally {
        if (inFlight.get(delivery) === 1) inFlight.delete(delivery);
        else inFlight.set(delivery, inFlight.get(delivery)! - 1);
      }
    },
  });
  receiver.port = server.port!;
  receiver.url = `http://127.0.0.1:${server.port}/hook`;
  return receiver;
}

function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** What a receiver does: recompute the signature over the exact bytes and compare in constant time. */
export function signatureMatches(secret: string, bytes: Uint8Array, header: string | null): boolean {
  const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(bytes).digest("hex")}`);
  const given = Buffer.from(header ?? "");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
