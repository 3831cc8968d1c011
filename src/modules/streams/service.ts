/**
 * The streams' rules: who may open which stream, what the definitions answer and its ETag are.
 * The streams themselves live in the hub (hub.ts); the flags in the store (store.ts).
 */
import { createHash } from "node:crypto";
import { decide, type ApiKeyPrincipal, type Principal } from "../../http/access";
import { ApiError, notFound } from "../../http/errors";
import type { Clock } from "../../lib/clock";
import type { StreamHub, StreamCredentials } from "./hub";
import type { Definitions, DefinitionsStore } from "./store";
import type { StreamTokens } from "./tokens";

/** The 401 of a missing, malformed, expired or revoked stream token (never echoing it). */
export const TOKEN_REFUSED = "Invalid or expired stream token: take the current one from POST /ofrep/v1/evaluate/flags (eventStreams)";

export interface StreamsServiceDeps {
  hub: StreamHub;
  tokens: StreamTokens;
  credentials: StreamCredentials;
  definitions: DefinitionsStore;
  clock: Clock;
}

export type StreamsService = ReturnType<typeof streamsService>;

/** The strong ETag of a definitions answer: a hash of its flags (two reads of the same flags agree whatever the version). */
export const etagOf = (d: Definitions): string =>
  `"${createHash("sha256").update(JSON.stringify(d.segments.length > 0 ? [d.flags, d.segments] : d.flags)).digest("base64url")}"`;


/** The access group admits API keys only. */
const keyOf = (principal: Principal): ApiKeyPrincipal => {
  if (principal.kind !== "apiKey") throw new Error("streams: not an API key");
  return principal;
};

export function streamsService({ hub, tokens, credentials, definitions, clock }: StreamsServiceDeps) {
  return {
    /** GET /v1/definitions: the key's environment, and its ETag. */
    async definitions(principal: Principal): Promise<{ body: Definitions; etag: string }> {
      const key = keyOf(principal);
      const body = await definitions.environment(key.environmentId);
      if (body === undefined) throw notFound(`Environment ${key.environmentSlug}`); // deleted since admission
      return { body, etag: etagOf(body) };
    },

    /** GET /v1/definitions/stream: the key's environment as a stream (resumed after `Last-Event-ID`). */
    definitionStream(principal: Principal, lastEventId: string | null): ReadableStream<Uint8Array> {
      return hub.openDefinitions(keyOf(principal), lastEventId);
    },

    /**
     * The key a stream token stands for: the token valid (this instance's, unexpired) and its key
     * and secret still accepted; else 401. A key that may not evaluate gets evaluation's 403.
     */
    streamKey(token: string | undefined): ApiKeyPrincipal {
      const now = clock.now();
      const grant = token === undefined ? null : tokens.verify(token, now);
      const principal = grant === null ? undefined : credentials.streamPrincipal(grant, now);
      if (principal === undefined) throw new ApiError(401, "UNAUTHORIZED", TOKEN_REFUSED);
      const d = decide(principal, "evaluate", "GET");
      if (!d.allow) throw new ApiError(d.status, d.status === 401 ? "UNAUTHORIZED" : "FORBIDDEN", d.message);
      return principal;
    },

    /** GET /ofrep/v1/events: the change stream of the token's environment (told at once what it missed after `Last-Event-ID`). */
    changeStream(token: string | undefined, lastEventId: string | null): ReadableStream<Uint8Array> {
      return hub.openChanges(this.streamKey(token), lastEventId);
    },
  };
}
