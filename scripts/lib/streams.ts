/**
 * Streams of a running binary, from outside: the OFREP change stream's URL for a key (the token
 * made as the server makes it, from the SVC_JWT_SECRET the binary was started with; the bulk
 * evaluation that hands it out is another route's), and reading Server-Sent Events off a
 * connection. For e2e tests and bench:streams.
 */
import { secretTag } from "../../src/http/credentials";
import { sha256Hex } from "../../src/lib/secrets";
import { StreamTokens } from "../../src/modules/streams/tokens";

/** An API key as the API created it, with its project's and environment's ids. */
export interface StreamKey {
  id: string;
  secret: string;
  projectId: string;
  environmentId: string;
}

/**
 * `/ofrep/v1/events?token=...` of `key` at `now`: what POST /ofrep/v1/evaluate/flags puts in
 * `eventStreams` for it, computed with the server's JWT secret.
 */
export function eventsPath(jwtSecret: string, key: StreamKey, now = Date.now()): string {
  const token = new StreamTokens(jwtSecret).issue(
    { kind: "apiKey", id: key.id, name: "", scope: "eval", projectId: key.projectId, projectSlug: "", environmentId: key.environmentId, environmentSlug: "", secretTag: secretTag(sha256Hex(key.secret)) },
    now,
  );
  return `/ofrep/v1/events?token=${token}`;
}

/**
 * Calls `onEvent(block)` for every event block (the text between blank lines) of a stream's
 * body as it arrives; resolves when the stream ends (or fails: a reset connection).
 */
export async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (block: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        onEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch {
    // the connection was reset: the stream ended
  }
}

/** The `id:` field of an event block, as a number (NaN without one). */
export const eventId = (block: string): number => Number(/^id: (\d+)$/m.exec(block)?.[1] ?? NaN);
