/**
 * The live audit log (docs/audit.md, "Live"): `GET /v1/audit-log/stream` and
 * `/v1/projects/{slug}/audit-log/stream` send each change-log entry their caller may read, in the
 * audit API's shape, as it commits (this hub is a change-bus subscriber: entries come once, in
 * commit order). A stream that resumes after a position is registered first (what commits
 * meanwhile is held), then sent the entries after that position from the store, batch by batch
 * as its client reads them, then what was held and is newer: no gap and no repeat at the seam.
 *
 * Memory per stream is bounded: an SseStream ends past MAX_QUEUED_CHUNKS unread events (a client
 * that does not read), and a resume holds at most MAX_QUEUED_CHUNKS live entries while it sends
 * its backlog; either way the client reconnects with `Last-Event-ID` and loses nothing.
 */
import type { ChangeEntry } from "../../changes/entry";
import type { Principal } from "../../http/access";
import type { Clock } from "../../lib/clock";
import type { Logger } from "../../lib/log";
import { HEARTBEAT_MS } from "../streams/hub";
import { encode, MAX_QUEUED_CHUNKS, PING, SseStream } from "../streams/sse";
import { viewOf } from "./service";
import type { AuditFilter, AuditStore } from "./store";

/** Entries a resume reads from the store at a time (then waits for its client to read them). */
export const RESUME_BATCH = 200;

/** What a stream keeps of its filter: the audit API's, without time bounds or a cursor. */
export type StreamFilter = Pick<AuditFilter, "projectId" | "resourceType" | "resourceKey" | "actorId" | "actorEmail" | "action">;

/** What the hub asks of the credential registry: whether a stream's caller is still accepted. */
export interface StreamCallers {
  stillAccepts(principal: Principal, openedAt: number, now: number): boolean;
}

interface AuditStream {
  sse: SseStream;
  filter: StreamFilter;
  principal: Principal;
  openedAt: number;
  /** Until its backlog is sent, live entries wait in `held`. */
  started: boolean;
  held: ChangeEntry[];
  /** Entries at or below this position were sent (or were before the stream began). */
  after: number;
}

export interface AuditStreamHubDeps {
  store: AuditStore;
  callers: StreamCallers;
  clock: Clock;
  log: Logger;
  /** The change log's last position at start. */
  position: number;
  /** Default HEARTBEAT_MS; 0: no timer (tests call `heartbeat()`). */
  heartbeatMs?: number;
}

/** An entry as an SSE event: `id` its position, `event: change`, `data` the audit API's item. */
export const changeEvent = (e: ChangeEntry) => `id: ${e.position}\nevent: change\ndata: ${JSON.stringify(viewOf(e))}\n\n`;

/** Whether an entry passes a stream's filter (the same fields as the store's conditions). */
export function admits(f: StreamFilter, e: ChangeEntry): boolean {
  return (
    (f.projectId === undefined || e.project?.id === f.projectId) &&
    (f.resourceType === undefined || e.resource.type === f.resourceType) &&
    (f.resourceKey === undefined || e.resource.key === f.resourceKey) &&
    (f.actorId === undefined || e.actor.id === f.actorId) &&
    (f.actorEmail === undefined || (e.actor.type === "user" && e.actor.label === f.actorEmail)) &&
    (f.action === undefined || e.action === f.action)
  );
}

export class AuditStreamHub {
  private readonly streams = new Set<AuditStream>();
  /** The change log's last position the hub has heard. */
  private seen: number;
  private closed = false;
  private readonly timer: ReturnType<typeof setInterval> | undefined;
  private readonly store: AuditStore;
  private readonly callers: StreamCallers;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(deps: AuditStreamHubDeps) {
    ({ store: this.store, callers: this.callers, clock: this.clock, log: this.log } = deps);
    this.seen = deps.position;
    const every = deps.heartbeatMs ?? HEARTBEAT_MS;
    if (every > 0) {
      this.timer = setInterval(() => this.heartbeat(), every);
      this.timer.unref?.();
    }
  }

  /** Open streams (the metrics' `flagsvc_streams_connected{kind="audit"}`). */
  size(): number {
    return this.streams.size;
  }

  /** The bus subscriber: each committed entry to every stream it passes the filter of. */
  readonly subscriber = (entries: readonly ChangeEntry[]): void => {
    for (const e of entries) {
      if (e.position > this.seen) this.seen = e.position;
      if (this.streams.size === 0) continue;
      let chunk: Uint8Array | undefined;
      for (const s of this.streams) {
        if (!admits(s.filter, e)) continue;
        if (!s.started) {
          if (s.held.length >= MAX_QUEUED_CHUNKS) s.sse.close();
          else s.held.push(e);
        } else if (e.position > s.after) {
          s.after = e.position;
          s.sse.write((chunk ??= encode(changeEvent(e))));
        }
      }
      // A project's stream ends with the project (its entry sent first).
      if (e.resource.type === "project" && e.action === "deleted") {
        for (const s of this.streams) if (s.filter.projectId === e.resource.id && s.started) s.sse.close();
      }
    }
  };

  /**
   * A stream of the entries passing `filter`, from now on; with `since` (a position: the
   * `Last-Event-ID` of a reconnect), the entries after it first. A position ahead of the log
   * counts as its end.
   */
  open(principal: Principal, filter: StreamFilter, since: number | null): ReadableStream<Uint8Array> {
    const sse = new SseStream(() => this.streams.delete(stream));
    const stream: AuditStream = { sse, filter, principal, openedAt: this.clock.now(), started: since === null, held: [], after: Math.min(since ?? this.seen, this.seen) };
    if (this.closed) {
      sse.close();
      return sse.body;
    }
    this.streams.add(stream);
    if (!stream.started) {
      void this.resume(stream).catch((e) => {
        this.log.error("audit stream: the resume failed", { error: e instanceof Error ? e.message : String(e) });
        sse.close();
      });
    }
    return sse.body;
  }

  /** The entries after the stream's position, batch by batch as its client reads them; then what was held. */
  private async resume(stream: AuditStream): Promise<void> {
    for (let after: number | null = stream.after; after !== null; ) {
      const { entries, scannedTo } = await this.store.after(stream.filter, after, RESUME_BATCH);
      for (const e of entries) stream.sse.write(encode(changeEvent(e)));
      if (entries.length > 0) stream.after = entries.at(-1)!.position;
      after = scannedTo;
      await stream.sse.drained();
      if (stream.sse.closed) return;
    }
    stream.started = true;
    for (const e of stream.held.splice(0)) {
      if (e.position <= stream.after) continue;
      stream.after = e.position;
      stream.sse.write(encode(changeEvent(e)));
    }
  }

  /** Ends every stream whose caller is no longer accepted (a key deleted, a token revoked or expired, a role changed). */
  revalidate(now = this.clock.now()): void {
    for (const s of this.streams) if (!this.callers.stillAccepts(s.principal, s.openedAt, now)) s.sse.close();
  }

  /** Every stream gets a `: ping`, after its caller is checked again. */
  heartbeat(): void {
    this.revalidate();
    for (const s of this.streams) s.sse.write(PING);
  }

  /** Ends every stream and refuses new ones (shutdown). */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    for (const s of [...this.streams]) s.sse.close();
  }
}
