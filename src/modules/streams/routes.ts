/**
 * The streams' routes (docs/streams.md): the OFREP change stream (its URL carries a stream token:
 * a browser's EventSource sends no headers) and the definitions API for local evaluation
 * (server-side keys only: rules may hold e-mail lists; never offered to browsers).
 *
 * A stream's request is told not to time out (Bun closes a connection idle for 10 s): its
 * heartbeat comes every 15 s. A stream token is never logged: the access log has the path only,
 * and no error repeats it.
 */
import { VARY, type Cors } from "../../http/cors";
import type { Server } from "bun";
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { HEARTBEAT_MS, RESUME_LIMIT } from "./hub";
import { Definitions, EventsQuery, StreamHeaders } from "./model";
import { noneMatch } from "../../http/etag";
import type { StreamsService } from "./service";
import { SSE_HEADERS } from "./sse";

const TAGS = ["Streams"];
const HEARTBEAT = `A comment line \`: ping\` comes every ${HEARTBEAT_MS / 1000} s (and the stream's credential is checked again); the stream begins with \`retry: 1000\`. Headers: \`Content-Type: text/event-stream\`, \`Cache-Control: no-store\`, \`X-Accel-Buffering: no\` (no buffering in nginx).`;
const DEFINITIONS_WHO = `API keys of scope eval, test, mgmt or full, as \`Authorization: Bearer\`; project and environment come from the key. A client key (the one a web page may carry) gets 403 "This key scope does not have access to this endpoint" (rules may hold e-mail lists); admin keys and login tokens get 403 "The definitions API takes a project API key of scope eval, test, mgmt or full". No CORS: these routes are never offered to browsers.`;
const RECORD = "Each flag is `{ key, variants, rules, bucketBy?, prerequisites?, state: { enabled, rolloutPercentage } }`: variants and rules exactly as stored (rules in order, disabled ones included), `bucketBy` only when the flag buckets by an attribute other than userId, `prerequisites` (`[{ flagKey, variant? }]`, evaluated against the other records: docs/targeting.md) only when the flag has some, the state in the key's environment (never set there: `{ enabled: false, rolloutPercentage: null }`).";

export const sseResponse = (description: string) => ({
  200: { description, content: { "text/event-stream": { schema: { type: "string" as const, description: "Server-Sent Events" } } } },
});

/** A stream's answer: the events as they come, on a request that never times out. */
export function stream(body: ReadableStream<Uint8Array>, request: Request, server: Server<unknown> | null): Response {
  server?.timeout(request, 0);
  return new Response(body, { headers: SSE_HEADERS });
}

/** `cors`: the web origins that may open the OFREP change stream (never the definitions). */
export const streamsRoutes = (service: StreamsService, cors: Cors) =>
  new Elysia({ name: "flagsvc/streams" })
    .use(accessGuard())
    .get(
      "/ofrep/v1/events",
      ({ query, request, server }) => {
        // HEAD opens nothing: the token is judged, the headers answered.
        if (request.method === "HEAD") return service.streamKey(query.token) && new Response(null, { headers: SSE_HEADERS });
        return stream(service.changeStream(query.token, request.headers.get("last-event-id")), request, server);
      },
      {
        // Before the query is judged: a page of an allowed origin reads its refusals too.
        transform: ({ request, set }) => {
          if (!cors.enabled) return;
          Object.assign(set.headers, VARY);
          cors.apply(request, set.headers);
        },
        query: EventsQuery,
        headers: StreamHeaders("The `id` of the last message received (EventSource sends it when reconnecting)"),
        detail: {
          tags: TAGS,
          summary: "OFREP change stream (SSE)",
          description: `Server-Sent Events telling an OpenFeature (OFREP) provider when to fetch its bulk evaluation again (OFREP ADR 0008). The URL comes from the bulk evaluation's answer (\`eventStreams[0].endpoint.requestUri\` of POST /ofrep/v1/evaluate/flags): its \`token\` stands for the API key without being it (an EventSource cannot send headers). A token is bound to the key, its project and environment and the key's current secret; it is the same for every bulk evaluation in a 12-hour window and valid 12 to 24 hours. Missing, malformed, expired, of a deleted key or of a secret rotated out (after its grace period): 401 "Invalid or expired stream token...". Never logged.

Each commit that changes what the environment evaluates to (a flag of the project created, updated or deleted; the flag's state in this environment) sends one message, \`id\` its change-log position: \`event: message\` with \`data: {"type":"refetchEvaluation","etag":"\\"<position>\\"","lastModified":<Unix seconds>}\`, sent once the change is visible to evaluation. Reconnecting with \`Last-Event-ID\` that is not the environment's last change gets one such message at once. The stream ends when its project or environment is deleted, its key deleted or rotated out (at once) or past a rotation's grace period (at the next heartbeat), and when the server stops. ${HEARTBEAT}`,
          responses: sseResponse("The stream: `retry: 1000`, then messages and heartbeats"),
        },
      },
    )
    .get(
      "/v1/definitions",
      async ({ principal, request, set }) => {
        const { body, etag } = await service.definitions(principal);
        set.headers.etag = etag;
        // A Response of its own (no body, the headers set here added by the pipeline): no schema describes "nothing".
        if (noneMatch(request.headers.get("if-none-match"), etag)) return new Response(null, { status: 304 }) as never;
        return body;
      },
      {
        access: "definitions",
        response: { 200: Definitions },
        detail: {
          tags: TAGS,
          summary: "Flag definitions for local evaluation",
          description: `Every flag of the key's project with its state in the key's environment, ordered by key, for an SDK that evaluates locally (the same rules and bucketing as the server: decisions §7). \`version\` is the change log's last position, read in the same read as the flags. ${RECORD} A strong \`ETag\` (a hash of \`flags\`: two answers with the same flags have the same ETag whatever their version) comes with it; \`If-None-Match\` naming it is answered 304 with no body. ${DEFINITIONS_WHO}`,
          parameters: [{ in: "header", name: "If-None-Match", required: false, description: "An ETag of an earlier answer (or a list, or `*`): 304 when the flags are the same", schema: { type: "string" } }],
          responses: { 304: { description: "The flags are those of the ETag sent; no body" } },
        },
      },
    )
    .get(
      "/v1/definitions/stream",
      ({ principal, request, server }) => {
        if (request.method === "HEAD") return new Response(null, { headers: SSE_HEADERS });
        return stream(service.definitionStream(principal, request.headers.get("last-event-id")), request, server);
      },
      {
        access: "definitions",
        headers: StreamHeaders("The `id` of the last event received: resume after it"),
        detail: {
          tags: TAGS,
          summary: "Flag definitions as a stream (SSE)",
          description: `Server-Sent Events keeping a local evaluator's flags current. First \`event: put\`, \`id: <version>\`, \`data:\` the answer of GET /v1/definitions; then, for each later commit that touches the environment's flags, \`event: patch\`, \`id: <position>\`, \`data: {"version": <position>, "flags": [<the current record of each flag created or changed, or whose state changed>], "deleted": ["<key>", ...]}\` (apply: replace or add each record by key, remove each deleted key). Patches are read after their commit, in commit order, once per environment for all its streams. ${RECORD}

Resume: with \`Last-Event-ID: N\` (the last \`id\` received): nothing is sent but heartbeats when nothing touched the environment after N; one \`patch\` (\`id\` the last position that touched it) with the current records of the flags touched after N and the keys deleted, when the change log still holds every entry after N and at most ${RESUME_LIMIT} of them touch the environment; else (entries removed by audit retention, N ahead of the log, more than ${RESUME_LIMIT}) a \`put\`. An event at or below what a stream already has is never sent: nothing is lost or repeated while writes go on. The stream ends when the key's environment or project is deleted, the key deleted or rotated out (at once, or at the next heartbeat after a rotation's grace period), and when the server stops. ${HEARTBEAT} ${DEFINITIONS_WHO}`,
          responses: sseResponse("The stream: `retry: 1000`, a `put` (or what a resume missed), then patches and heartbeats"),
        },
      },
    );
