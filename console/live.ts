/**
 * A project's changes as they commit: `GET /v1/projects/{slug}/audit-log/stream` (SSE, the
 * session cookie, same origin). The browser reconnects by itself with `Last-Event-ID` (nothing
 * missed); when the server refuses the stream (the session ended, a restart before it listens)
 * EventSource gives up, so this reopens it with `?since=<last position>`, backing off from 1 s to
 * 30 s, after asking the API once (a 401 there sends the user to sign-in). Closed when the page
 * using it goes away.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api";

/** An entry of the change log as the audit API answers it (the fields the console reads). */
export interface ChangeEntry {
  position: number;
  at: string;
  actor: { label: string };
  resource: { type: string; key: string };
  environment: string | null;
  action: string;
}

export type LiveStatus = "connecting" | "live" | "reconnecting";
/** What a page's live indicator says for each status. */
/**
 * A page part's save under way (`run` it), so that a live change seen meanwhile is looked at once
 * the save has answered (`settled`): one's own change then matches the version shown, and is
 * not taken for someone else's (the stream can be faster than the save's own answer).
 */
export class SaveInFlight {
  private pending: Promise<unknown> = Promise.resolve();

  run<T>(save: Promise<T>): Promise<T> {
    this.pending = save.catch(() => undefined);
    return save;
  }

  settled(): Promise<unknown> {
    return this.pending;
  }
}

export const LIVE_TEXT: Record<LiveStatus, string> = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…" };

/**
 * Calls `onChange` with each entry of the project's log from now on; with null after a reopen
 * that started afresh (no entry seen yet: what happened meanwhile is unknown, read it again).
 */
export function useProjectChanges(slug: string, onChange: (entry: ChangeEntry | null) => void): LiveStatus {
  const [status, setStatus] = useState<LiveStatus>("connecting");
  const handler = useRef(onChange);
  handler.current = onChange;
  useEffect(() => {
    const path = `/v1/projects/${encodeURIComponent(slug)}`;
    let source: EventSource | null = null;
    let last = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    let delay = 1000;
    let dropped = false;
    let gone = false;
    const open = () => {
      const es = new EventSource(`${path}/audit-log/stream${last ? `?since=${encodeURIComponent(last)}` : ""}`);
      source = es;
      es.onopen = () => {
        delay = 1000;
        setStatus("live");
        if (dropped && !last) handler.current(null);
        dropped = false;
      };
      es.addEventListener("change", (e) => {
        const ev = e as MessageEvent<string>;
        if (ev.lastEventId) last = ev.lastEventId;
        try {
          handler.current(JSON.parse(ev.data) as ChangeEntry);
        } catch {
          // Not an entry: nothing to show.
        }
      });
      es.onerror = () => {
        if (gone) return;
        dropped = true;
        setStatus("reconnecting");
        if (es.readyState !== EventSource.CLOSED) return; // the browser retries, with Last-Event-ID
        es.close();
        void api("GET", path).catch(() => {}); // a 401 ends the session (sign-in, "Your session expired")
        timer = setTimeout(open, delay);
        delay = Math.min(delay * 2, 30_000);
      };
    };
    open();
    return () => {
      gone = true;
      clearTimeout(timer);
      source?.close();
    };
  }, [slug]);
  return status;
}
