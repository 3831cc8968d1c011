/**
 * A project's history: its audit log (`GET /v1/projects/{slug}/audit-log`), newest first, with
 * the API's filters (resource type, resource key, actor, action, since/until), kept in the
 * address (`?resourceKey=checkout`: a flag's page links there), read page by page with
 * `nextCursor` ("Older entries"). Each entry: who, when, what, on which resource, and its
 * before → after. Live: entries committed while the page is open are added on top when they pass
 * the filters (the project's change stream, live.ts).
 */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { LIVE_TEXT, useProjectChanges, type ChangeEntry } from "../live";
import { navigate, useLocation } from "../router";
import { ErrorBanner, Field, Loading, Select } from "../ui";

interface Entry extends Omit<ChangeEntry, "resource"> {
  id: string;
  resource: { type: string; id: string; key: string | null };
  actor: { type: string; id: string; label: string };
  changes: Record<string, { before: unknown; after: unknown; changed?: boolean }> | null;
}

const FILTERS = ["resourceType", "resourceKey", "actorId", "action", "since", "until"] as const;
type Filters = Record<(typeof FILTERS)[number], string>;
const TYPES = ["project", "environment", "flag", "flag_state", "segment", "api_key", "webhook", "schedule"];
const ACTIONS = ["created", "updated", "deleted", "enabled", "disabled", "rotated"];
const PAGE = 50;

const filtersOf = (search: string): Filters => {
  const q = new URLSearchParams(search);
  return Object.fromEntries(FILTERS.map((f) => [f, q.get(f) ?? ""])) as Filters;
};

/** A `datetime-local` value (the browser's zone) as the API's instant, or "" when empty or not one. */
const instant = (local: string): string => {
  const t = new Date(local);
  return local === "" || Number.isNaN(t.getTime()) ? "" : t.toISOString();
};

/** Whether a live entry passes the filters (the list's meaning: `since` inclusive, `until` exclusive). */
function passes(e: Entry, f: Filters): boolean {
  if (f.resourceType && e.resource.type !== f.resourceType) return false;
  if (f.resourceKey && e.resource.key !== f.resourceKey) return false;
  if (f.actorId && e.actor.id !== f.actorId && e.actor.label.toLowerCase() !== f.actorId.toLowerCase()) return false;
  if (f.action && e.action !== f.action) return false;
  const at = Date.parse(e.at);
  if (f.since && instant(f.since) && at < Date.parse(instant(f.since))) return false;
  if (f.until && instant(f.until) && at >= Date.parse(instant(f.until))) return false;
  return true;
}

const show = (v: unknown): string => (v === null || v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v));

export function HistoryPage({ slug }: { slug: string }) {
  // The address is the state: the filters applied are those of its query.
  const search = useLocation().search;
  const filters = useMemo(() => filtersOf(search), [search]);
  const [draft, setDraft] = useState<Filters>(filters);
  useEffect(() => setDraft(filters), [filters]);
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const generation = useRef(0);
  /** Live entries received while a first page is read (it may have been read before they committed). */
  const arrived = useRef<Entry[] | null>(null);
  const base = `/v1/projects/${encodeURIComponent(slug)}`;

  const query = (f: Filters, after: string | null) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const k of FILTERS) {
      const v = k === "since" || k === "until" ? instant(f[k]) : f[k].trim();
      if (v) q.set(k, v);
    }
    if (after) q.set("cursor", after);
    return q;
  };

  const load = async (f: Filters, after: string | null) => {
    const mine = ++generation.current;
    if (!after) arrived.current = [];
    setBusy(true);
    try {
      const r = await api<{ entries: Entry[]; nextCursor: string | null }>("GET", `${base}/audit-log?${query(f, after)}`);
      if (mine !== generation.current) return;
      // A first page: live entries that arrived while it was read and are newer than it go on top.
      const top = r.entries[0]?.position ?? 0;
      const early = (after ? null : arrived.current)?.filter((e) => e.position > top && passes(e, f)).reverse() ?? [];
      if (!after) arrived.current = null;
      setEntries((es) => (after && es ? [...es, ...r.entries] : [...early, ...r.entries]));
      setCursor(r.nextCursor);
      setError(null);
    } catch (e) {
      if (mine === generation.current) {
        setError(e);
        arrived.current = null;
      }
    } finally {
      if (mine === generation.current) setBusy(false);
    }
  };
  useEffect(() => {
    void load(filters, null);
  }, [slug, search]);

  const live = useProjectChanges(slug, (entry) => {
    if (entry === null) return void load(filters, null);
    const e = entry as Entry;
    if (!passes(e, filters)) return;
    if (arrived.current) arrived.current.push(e); // a first page is being read: kept for it
    setEntries((es) => (es === null || es.some((x) => x.position === e.position) ? es : [e, ...es]));
  });

  const apply = (e: Event) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const k of FILTERS) if (draft[k].trim()) q.set(k, draft[k].trim());
    const s = q.toString();
    navigate(`/projects/${slug}/history${s ? `?${s}` : ""}`, true);
  };
  const clear = () => navigate(`/projects/${slug}/history`, true);
  const set = (k: keyof Filters) => (v: string) => setDraft({ ...draft, [k]: v });
  const fields = error instanceof ApiError ? error.fields() : {};

  return (
    <>
      <div class="page-head">
        <h1>History</h1>
        <span class={`live-status ${live}`} data-live={live} title="Changes show here as they are saved">
          {LIVE_TEXT[live]}
        </span>
      </div>
      <form class="history-filters" onSubmit={apply} aria-label="Filters" noValidate>
        <Select label="Resource type" value={draft.resourceType} options={[["", "Any"], ...TYPES.map((t): [string, string] => [t, t])]} onChange={set("resourceType")} error={fields.resourceType} />
        <Field label="Resource key" name="resourceKey" value={draft.resourceKey} onInput={set("resourceKey")} hint="A flag's key gives its states too" error={fields.resourceKey} />
        <Field label="Actor" name="actorId" value={draft.actorId} onInput={set("actorId")} hint="A user's e-mail, or an id (usr_…, key_…)" error={fields.actorId} />
        <Select label="Action" value={draft.action} options={[["", "Any"], ...ACTIONS.map((a): [string, string] => [a, a])]} onChange={set("action")} error={fields.action} />
        <Field label="Since" type="datetime-local" name="since" value={draft.since} onInput={set("since")} error={fields.since} />
        <Field label="Until" type="datetime-local" name="until" value={draft.until} onInput={set("until")} hint="Not included" error={fields.until} />
        <div class="actions">
          <button type="submit" class="primary">
            Apply filters
          </button>
          <button type="button" onClick={clear}>
            Clear
          </button>
        </div>
      </form>
      <ErrorBanner error={error} shown={Object.keys(fields)} />
      {entries === null ? (
        !error && <Loading />
      ) : entries.length === 0 && cursor === null ? (
        <p class="muted" data-ready="">
          No entry matches.
        </p>
      ) : (
        <ol class="history" data-ready="" aria-label="Entries">
          {entries.map((e) => (
            <li key={e.position} data-position={e.position} data-action={e.action}>
              <p class="entry-head">
                <strong class="actor">{e.actor.label}</strong> <span class="action">{e.action}</span> <span class="resource">{e.resource.type.replace("_", " ")}</span> <code>{e.resource.key ?? e.resource.id}</code>
                {e.environment && <span class="muted"> in {e.environment}</span>}
                <time dateTime={e.at} class="muted">
                  {new Date(e.at).toLocaleString()}
                </time>
              </p>
              {e.changes && Object.keys(e.changes).length > 0 && (
                <dl class="changes">
                  {Object.entries(e.changes).map(([field, c]) => (
                    <div key={field}>
                      <dt>{field}</dt>
                      <dd>
                        <span class="before">{show(c.before)}</span> <span aria-label="became">→</span> <span class="after">{show(c.after)}</span>
                      </dd>
                    </div>
                  ))}
                </dl>
              )}
            </li>
          ))}
        </ol>
      )}
      {cursor !== null && entries !== null && (
        <p>
          <button type="button" disabled={busy} onClick={() => load(filters, cursor)}>
            {busy ? "Loading…" : "Older entries"}
          </button>
        </p>
      )}
    </>
  );
}
