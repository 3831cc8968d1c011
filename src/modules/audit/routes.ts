/** The audit log: routes (docs/audit.md). */
import { Elysia } from "elysia";
import { accessGuard } from "../../http/auth";
import { queryInt } from "../../http/schema";
import { ProjectParams } from "../projects/model";
import { AuditList, AuditQuery, LIMIT_DEFAULT, LIMIT_MAX } from "./model";
import { EXPORT_BATCH, type AuditEntryView, type AuditQueryInput, type AuditService } from "./service";
import { SCAN_WINDOW } from "./store";

const TAGS = ["Audit log"];
const NDJSON = "application/x-ndjson";
const RECORDED =
  "One entry per resource a successful write changed, appended in the write's own transaction: projects, environments, flags (created, updated, deleted: a flag's states are in its deleted entry), flag states (enabled, disabled, updated), API keys (created, rotated, deleted), admin keys, users, webhooks. Test sessions and overrides are not recorded. A write that changes nothing appends nothing. Secrets (password and key hashes, webhook secrets) show as \"********\" with `changed: true`.";
const READING = `Newest first (by \`position\`, the order of commit). Filters, combined with AND: \`resourceType\`, \`resourceKey\` (a flag key gives the flag's whole history, its state changes in every environment included), \`actorId\` (an actor's id, as entries show it in \`actor.id\`: \`usr_...\`, \`key_...\`, \`cli:<user>\`, \`system\`; or a user's e-mail address, in any case: the entries of the user with that address, also one deleted since), \`action\`, \`since\` (inclusive) and \`until\` (exclusive), ISO 8601 with a zone. \`limit\` 1 to ${LIMIT_MAX} (default ${LIMIT_DEFAULT}). \`nextCursor\` (null on the last page) passed as \`cursor\` gives the next, older page (a filter other than \`resourceKey\` searches at most ${SCAN_WINDOW.toLocaleString("en")} entries a request: a page may then hold fewer than \`limit\`, even none, with a \`nextCursor\`; follow it until null): entries appended meanwhile never shift it, so no entry is skipped or repeated while writes go on. A cursor is bound to no filter: it means "older than this entry". With \`Accept: ${NDJSON}\` the answer is every matching entry, one JSON object a line, newest first, streamed (from \`cursor\` when given; \`limit\` does not apply): an export for a SIEM. Unknown query parameters, values out of their range and malformed cursors are 400 VALIDATION_ERROR with \`details\` at \`query.<name>\`. Entries older than SVC_AUDIT_RETENTION_DAYS (default 365; 0 keeps everything) are removed daily.`;

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

export const auditRoutes = (audit: AuditService) =>
  new Elysia({ name: "flagsvc/audit" })
    .use(accessGuard())
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
