/** The audit log: routes (docs/audit.md). */
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { queryInt } from "../../http/schema";
import { ProjectParams } from "../projects/model";
import { AuditList, AuditQuery, AuditStreamQuery, LIMIT_DEFAULT, LIMIT_MAX } from "./model";
import { sseResponse, stream } from "../streams/routes";
import { MAX_QUEUED_CHUNKS, SSE_HEADERS } from "../streams/sse";
import { HEARTBEAT_MS } from "../streams/hub";
import { StreamHeaders } from "../streams/model";
import { EXPORT_BATCH, type AuditEntryView, type AuditQueryInput, type AuditService, type AuditStreamInput } from "./service";
import type { Principal } from "../../http/access";
import { SCAN_WINDOW } from "./store";

const TAGS = ["Audit log"];
const NDJSON = "application/x-ndjson";
const RECORDED =
  "One entry per resource a successful write changed, appended in the write's own transaction: projects, environments, flags (created, updated, deleted: a flag's states are in its deleted entry), flag states (enabled, disabled, updated), API keys (created, rotated, deleted), admin keys, users, webhooks. Test sessions and overrides are not recorded. A write that changes nothing appends nothing. Secrets (password and key hashes, webhook secrets) show as \"********\" with `changed: true`.";
const READING = `Newest first (by \`position\`, the order of commit). Filters, combined with AND: \`resourceType\`, \`resourceKey\` (a flag key gives the flag's whole history, its state changes in every environment included), \`actorId\` (an actor's id, as entries show it in \`actor.id\`: \`usr_...\`, \`key_...\`, \`cli:<user>\`, \`system\`; or a user's e-mail address, in any case: the entries of the user with that address, also one deleted since), \`action\`, \`since\` (inclusive) and \`until\` (exclusive), ISO 8601 with a zone. \`limit\` 1 to ${LIMIT_MAX} (default ${LIMIT_DEFAULT}). \`nextCursor\` (null on the last page) passed as \`cursor\` gives the next, older page (a filter other than \`resourceKey\` searches at most ${SCAN_WINDOW.toLocaleString("en")} entries a request: a page may then hold fewer than \`limit\`, even none, with a \`nextCursor\`; follow it until null): entries appended meanwhile never shift it, so no entry is skipped or repeated while writes go on. A cursor is bound to no filter: it means "older than this entry". With \`Accept: ${NDJSON}\` the answer is every matching entry, one JSON object a line, newest first, streamed (from \`cursor\` when given; \`limit\` does not apply): an export for a SIEM. Unknown query parameters, values out of their range and malformed cursors are 400 VALIDATION_ERROR with \`details\` at \`query.<name>\`. Entries older than SVC_AUDIT_RETENTION_DAYS (default 365; 0 keeps everything) are removed daily.`;

const LIVE = `Server-Sent Events: each change-log entry passing the filters, as it commits (after the write's transaction, in commit order), as \`id: <position>\`, \`event: change\`, \`data: <the entry, exactly as an item of the list>\`. Filters: \`resourceType\`, \`resourceKey\`, \`actorId\`, \`action\`, as the list takes them. Resume: \`Last-Event-ID: <position>\` (EventSource sends the last \`id\` when it reconnects), or \`?since=<position>\` (on the stream a position, not a time; Last-Event-ID wins when both are sent): the entries after that position that pass the filters are sent first, oldest first, then the live ones, with no gap and no repeat at the seam (entries removed by retention are not sent; a position ahead of the log counts as its end). Without either, the stream starts with the next commit. A comment \`: ping\` comes every ${HEARTBEAT_MS / 1000} s, when the caller is checked again (a deleted key, a revoked or expired token, a changed role or password end the stream); the stream begins with \`retry: 1000\`. A client that leaves more than ${MAX_QUEUED_CHUNKS} events unread is disconnected (it reconnects with Last-Event-ID and misses nothing). Headers: \`Content-Type: text/event-stream\`, \`Cache-Control: no-store\`, \`X-Accel-Buffering: no\`. A login token is taken as \`Authorization: Bearer\` (or, from the same origin, as the session cookie of the sign-in by cookie, which an EventSource sends).`;

/** Whether the client asked for NDJSON: the media type named in Accept, with no `q=0`. */
function wantsNdjson(accept: string | null): boolean {
  if (accept === null || !accept.includes(NDJSON)) return false;
  return accept.split(",").some((range) => {
    const [type, ...params] = range.split(";").map((s) => s.trim().toLowerCase());
    return type === NDJSON && !params.some((p) => /^q=0(\.0*)?$/.test(p));
  });
}

/** The entries as NDJSON, EXPORT_BATCH lines a chunk, read as the client takes them (back-pressure). */
function ndjson(entries: AsyncGenerator<AuditEntryView>): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk = "";
      for (let i = 0; i < EXPORT_BATCH; i++) {
        const next = await entries.next();
        if (next.done) {
          if (chunk !== "") controller.enqueue(encoder.encode(chunk));
          controller.close();
          return;
        }
        chunk += `${JSON.stringify(next.value)}\n`;
      }
      controller.enqueue(encoder.encode(chunk));
    },
    async cancel() {
      await entries.return(undefined);
    },
  });
  return new Response(body, { headers: { "content-type": NDJSON } });
}

/** A page of JSON, or the NDJSON export when asked for. */
const answer = (audit: AuditService, request: Request, slug: string | null, query: Omit<AuditQueryInput, "limit"> & { limit?: string }) => {
  const q = { ...query, limit: queryInt(query.limit) };
  return wantsNdjson(request.headers.get("accept")) ? audit.export(slug, q).then(ndjson) : audit.list(slug, q);
};

/** A live stream's answer; to HEAD, once the caller, the query and the project are judged, the headers alone (the stream opened is ended at once). */
const live = async (audit: AuditService, request: Request, server: Parameters<typeof stream>[2], principal: Principal, slug: string | null, query: AuditStreamInput) => {
  const body = await audit.stream(principal, slug, query, request.headers.get("last-event-id"));
  if (request.method !== "HEAD") return stream(body, request, server);
  void body.cancel();
  return new Response(null, { headers: SSE_HEADERS });
};

export const auditRoutes = (audit: AuditService) =>
  new Elysia({ name: "flagsvc/audit" })
    .use(accessGuard())
    .get("/v1/audit-log/stream", ({ request, server, principal, query }) => live(audit, request, server, principal, null, query), {
      access: "auditInstance",
      query: AuditStreamQuery,
      headers: StreamHeaders("The `id` of the last event received: the entries after it are sent first"),
      detail: {
        tags: TAGS,
        summary: "The instance's audit log, live (SSE)",
        description: `${LIVE} Every entry of the instance, as GET /v1/audit-log. Who: as GET /v1/audit-log: admin keys and login JWTs of role admin (a project's stream is for every other reader).`,
        responses: sseResponse("The stream: `retry: 1000`, what a resume missed, then the entries as they commit, and heartbeats"),
      },
    })
    .get("/v1/projects/:slug/audit-log/stream", ({ request, server, principal, params, query }) => live(audit, request, server, principal, params.slug, query), {
      access: "audit",
      params: ProjectParams,
      query: AuditStreamQuery,
      headers: StreamHeaders("The `id` of the last event received: the entries after it are sent first"),
      detail: {
        tags: TAGS,
        summary: "A project's audit log, live (SSE)",
        description: `${LIVE} The entries of this project, as GET /v1/projects/{slug}/audit-log; the stream ends after the project's own \`deleted\` entry. Unknown project 404. Who: as that list, every reader of the project's flags: API keys of scope mgmt or full (their own project only: another project's slug is 403 FORBIDDEN), admin keys, login JWTs of every role (viewer, editor, admin). Eval, test and client keys are 403 (they do not read flags either).`,
        responses: sseResponse("The stream: `retry: 1000`, what a resume missed, then the project's entries as they commit, and heartbeats"),
      },
    })
    .get("/v1/audit-log", ({ request, query }) => answer(audit, request, null, query), {
      access: "auditInstance",
      query: AuditQuery,
      response: { 200: AuditList },
      detail: {
        tags: TAGS,
        summary: "The instance's audit log",
        description: `Every entry of the instance: every project's, and instance-level ones (users, admin keys: \`project\` null). ${RECORDED} ${READING} Who: admin keys and login JWTs of role admin.`,
      },
    })
    .get("/v1/projects/:slug/audit-log", ({ request, params, query }) => answer(audit, request, params.slug, query), {
      access: "audit",
      params: ProjectParams,
      query: AuditQuery,
      response: { 200: AuditList },
      detail: {
        tags: TAGS,
        summary: "A project's audit log",
        description: `The entries of this project (of its id: a project deleted and created again under the same slug starts a new log). ${RECORDED} ${READING} Unknown project 404. Who: API keys of scope mgmt or full (their own project only: another project's slug is 403 FORBIDDEN), admin keys, login JWTs of every role.`,
      },
    });
