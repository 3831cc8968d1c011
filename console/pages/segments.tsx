/**
 * Segments: the list (search, paging; writers create), and one segment: name, description, its
 * conditions (the flag page's condition editor), the included/excluded ids (pasted many at once,
 * one per line or comma-separated, deduplicated, counted; at most 10,000 each), saved in one
 * `PATCH` with `If-Match` (a 412 shows who changed it). Delete asks first; a 409 lists the flags
 * that use it. "Used by" is found by scanning the project's flags' rules (the API has no
 * per-segment filter), on demand, or taken from a refused delete's `details`.
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, tagged, type Role } from "../api";
import { navigate } from "../router";
import { Confirm, Control, ErrorBanner, Field, Loading, Pager } from "../ui";
import { ConditionEditor, conditionOf, draftOf, type CondDraft, type Condition, type Flag } from "./flag";

const PER_PAGE = 20;
const IDS_MAX = 10_000;

interface SegmentItem {
  key: string;
  name: string;
  updatedAt: string;
}
interface Segment extends SegmentItem {
  description?: string;
  conditions: Condition[];
  included: string[];
  excluded: string[];
}

/** The ids typed or pasted: one per line or comma-separated, trimmed, duplicates dropped (first kept). */
export function idsOf(text: string): { ids: string[]; duplicates: number } {
  const all = text.split(/[\n,]/).map((s) => s.trim()).filter((s) => s !== "");
  const ids = [...new Set(all)];
  return { ids, duplicates: all.length - ids.length };
}

const projectPath = (slug: string) => `/v1/projects/${encodeURIComponent(slug)}`;

export function SegmentsPage({ slug, role }: { slug: string; role: Role }) {
  const [list, setList] = useState<{ segments: SegmentItem[]; total: number } | null>(null);
  const [q, setQ] = useState("");
  const [page, setPage] = useState(1);
  const [error, setError] = useState<unknown>(null);
  const [key, setKey] = useState("");
  const [name, setName] = useState("");
  const [createError, setCreateError] = useState<unknown>(null);
  const writer = can(role, "flags");
  const base = projectPath(slug);
  useEffect(() => {
    const query = new URLSearchParams({ page: String(page), perPage: String(PER_PAGE) });
    if (q.trim()) query.set("q", q.trim());
    const timer = setTimeout(() => api<{ segments: SegmentItem[]; total: number }>("GET", `${base}/segments?${query}`).then(setList, setError), q ? 200 : 0);
    return () => clearTimeout(timer);
  }, [slug, q, page]);
  const create = async (e: Event) => {
    e.preventDefault();
    setCreateError(null);
    try {
      await api("POST", `${base}/segments`, { key, name, conditions: [] });
      navigate(`/projects/${encodeURIComponent(slug)}/segments/${encodeURIComponent(key)}`);
    } catch (err) {
      setCreateError(err);
    }
  };
  const fields = createError instanceof ApiError ? createError.fields() : {};
  const pages = Math.max(1, Math.ceil((list?.total ?? 0) / PER_PAGE));
  return (
    <>
      <h1>Segments</h1>
      <div class="toolbar">
        <label for="segment-search">Search segments</label>
        <input id="segment-search" type="search" placeholder="Key or name" value={q} onInput={(e) => (setQ((e.target as HTMLInputElement).value), setPage(1))} />
        <span class="muted" role="status">
          {list === null ? "" : `${list.total} segment${list.total === 1 ? "" : "s"}`}
        </span>
      </div>
      <ErrorBanner error={error} />
      {list === null ? (
        <Loading />
      ) : list.segments.length === 0 ? (
        <p class="muted">{q ? "No segment matches." : "No segments yet."}</p>
      ) : (
        <ul class="segment-list" data-ready="">
          {list.segments.map((s) => (
            <li key={s.key} data-segment={s.key}>
              <a class="flag-name" href={`/projects/${encodeURIComponent(slug)}/segments/${encodeURIComponent(s.key)}`}>
                {s.name}
              </a>{" "}
              <code>{s.key}</code> <span class="muted">updated {new Date(s.updatedAt).toLocaleString()}</span>
            </li>
          ))}
        </ul>
      )}
      <Pager page={page} pages={pages} setPage={setPage} />
      {writer && (
        <form class="form inline-form" onSubmit={create} aria-label="New segment">
          <fieldset>
            <legend>New segment</legend>
            <Field label="Key" name="key" value={key} onInput={setKey} error={fields.key} hint="Lower-case letters, digits and dashes; cannot change later" required />
            <Field label="Name" name="name" value={name} onInput={setName} error={fields.name} required />
            <ErrorBanner error={createError} shown={Object.keys(fields)} />
            <button type="submit" class="primary">
              Create segment
            </button>
          </fieldset>
        </form>
      )}
    </>
  );
}

/** The rules of a flag that name the segment. */
const rulesUsing = (flag: Flag, key: string) => flag.rules.filter((r) => r.conditions.some((c) => (c.operator === "in_segment" || c.operator === "not_in_segment") && c.value === key));

/** Every flag of the project whose rules name `key`: all pages of the list, then each flag's definition. */
async function scanFlags(base: string, key: string): Promise<{ flagKey: string; message: string }[]> {
  const keys: string[] = [];
  for (let page = 1; ; page++) {
    const r = await api<{ flags: { key: string }[]; total: number }>("GET", `${base}/flags?perPage=100&page=${page}`);
    keys.push(...r.flags.map((f) => f.key));
    if (r.flags.length === 0 || keys.length >= r.total) break;
  }
  const out: { flagKey: string; message: string }[] = [];
  for (let i = 0; i < keys.length; i += 8) {
    const flags = await Promise.all(keys.slice(i, i + 8).map((k) => api<Flag>("GET", `${base}/flags/${encodeURIComponent(k)}`)));
    for (const f of flags) {
      const rules = rulesUsing(f, key);
      if (rules.length > 0) out.push({ flagKey: f.key, message: `in ${rules.map((r) => r.name || "an unnamed rule").join(", ")}` });
    }
  }
  return out;
}

function IdsControl(props: { label: string; hint: string; text: string; error?: string; readOnly: boolean; onInput: (t: string) => void }) {
  const { ids, duplicates } = idsOf(props.text);
  const over = ids.length > IDS_MAX;
  const count = `${ids.length.toLocaleString("en-US")} id${ids.length === 1 ? "" : "s"}${duplicates > 0 ? ` (${duplicates} duplicate${duplicates === 1 ? "" : "s"} dropped)` : ""}`;
  return (
    <Control label={props.label} hint={`${props.hint} One per line or comma-separated; at most ${IDS_MAX.toLocaleString("en-US")}.`} error={props.error ?? (over ? `Too many: ${ids.length} ids, at most ${IDS_MAX}` : undefined)}>
      {(id, d) => (
        <>
          <textarea id={id} rows={5} readOnly={props.readOnly} value={props.text} aria-invalid={props.error || over ? "true" : undefined} aria-describedby={d} onInput={(e) => props.onInput((e.target as HTMLTextAreaElement).value)} />
          <p class="hint ids-count" aria-live="polite">
            {count}
          </p>
        </>
      )}
    </Control>
  );
}

interface Draft {
  name: string;
  description: string;
  conditions: CondDraft[];
  included: string;
  excluded: string;
}
const draftOfSegment = (s: Segment): Draft => ({ name: s.name, description: s.description ?? "", conditions: s.conditions.map(draftOf), included: s.included.join("\n"), excluded: s.excluded.join("\n") });
/** A server error at `included[3]` belongs to the `included` field. */
const listError = (errors: Record<string, string>, name: string) => errors[name] ?? Object.entries(errors).find(([k]) => k.startsWith(`${name}[`))?.[1];

export function SegmentPage({ slug, segmentKey, role }: { slug: string; segmentKey: string; role: Role }) {
  const [segment, setSegment] = useState<Segment | null>(null);
  const [etag, setEtag] = useState<string | null>(null);
  const [d, setD] = useState<Draft | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [local, setLocal] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [usedBy, setUsedBy] = useState<{ flagKey: string; message: string }[] | null>(null);
  const [scanning, setScanning] = useState(false);
  const writer = can(role, "flags");
  const base = projectPath(slug);
  const path = `${base}/segments/${encodeURIComponent(segmentKey)}`;
  const load = () =>
    tagged<Segment>("GET", path).then(({ data, etag }) => {
      setSegment(data);
      setEtag(etag);
      setD(draftOfSegment(data));
      setError(null);
    }, setError);
  useEffect(() => {
    void load();
  }, [slug, segmentKey]);

  if (d === null || segment === null) return error ? <ErrorBanner error={error} /> : <Loading />;
  const set = (patch: Partial<Draft>) => (setD({ ...d, ...patch }), setSaved(false));
  const errors = { ...(error instanceof ApiError ? error.fields() : {}), ...local };
  const included = idsOf(d.included).ids;
  const excluded = idsOf(d.excluded).ids;
  const tooMany = included.length > IDS_MAX || excluded.length > IDS_MAX;
  const save = async (e: Event) => {
    e.preventDefault();
    const problems: Record<string, string> = {};
    const conditions = d.conditions.map((c, j) => conditionOf(c, `conditions[${j}]`, problems));
    setLocal(problems);
    setSaved(false);
    if (Object.keys(problems).length > 0 || tooMany) return;
    setBusy(true);
    try {
      const body = { name: d.name, description: d.description.trim() === "" ? null : d.description, conditions, included, excluded };
      const r = await tagged<Segment>("PATCH", path, body, etag);
      setSegment(r.data);
      setEtag(r.etag);
      setD(draftOfSegment(r.data));
      setError(null);
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    try {
      await api("DELETE", path);
      navigate(`/projects/${encodeURIComponent(slug)}/segments`);
    } catch (err) {
      setDeleting(false);
      setError(err);
      if (err instanceof ApiError && err.status === 409) setUsedBy(err.details.filter((x) => x.path.startsWith("flags.")).map((x) => ({ flagKey: x.path.slice("flags.".length), message: x.message })));
    } finally {
      setBusy(false);
    }
  };
  const scan = async () => {
    setScanning(true);
    try {
      setUsedBy(await scanFlags(base, segmentKey));
    } catch (err) {
      setError(err);
    } finally {
      setScanning(false);
    }
  };
  const conflict = error instanceof ApiError && error.status === 412;
  return (
    <div class="segment-page" data-ready="">
      <p class="crumbs">
        <a href={`/projects/${encodeURIComponent(slug)}/segments`}>Segments</a>
      </p>
      <div class="page-head">
        <h1>{segment.name}</h1>
        <code>{segment.key}</code>
      </div>
      <form class="form wide" aria-label="Segment" onSubmit={save} noValidate>
        <Field label="Name" name="name" value={d.name} onInput={(v) => set({ name: v })} error={errors.name} readOnly={!writer} required />
        <Control label="Description" error={errors.description}>
          {(id, desc) => <textarea id={id} rows={2} readOnly={!writer} value={d.description} aria-describedby={desc} onInput={(e) => set({ description: (e.target as HTMLTextAreaElement).value })} />}
        </Control>
        <fieldset>
          <legend>Conditions (all must match)</legend>
          {d.conditions.length === 0 && <p class="muted">No conditions: only the included ids are members.</p>}
          {d.conditions.map((c, j) => (
            <ConditionEditor
              key={j}
              c={c}
              label={`Condition ${j + 1}`}
              path={`conditions[${j}]`}
              errors={errors}
              segments={[]}
              readOnly={!writer}
              onChange={(next) => set({ conditions: d.conditions.map((x, k) => (k === j ? next : x)) })}
              onRemove={() => set({ conditions: d.conditions.filter((_, k) => k !== j) })}
            />
          ))}
          {writer && (
            <button type="button" onClick={() => set({ conditions: [...d.conditions, { attribute: "", operator: "equals", kind: "string", text: "" }] })}>
              Add condition
            </button>
          )}
        </fieldset>
        <IdsControl label="Included user ids" hint="Members whatever the conditions." text={d.included} error={listError(errors, "included")} readOnly={!writer} onInput={(t) => set({ included: t })} />
        <IdsControl label="Excluded user ids" hint="Not members unless included." text={d.excluded} error={listError(errors, "excluded")} readOnly={!writer} onInput={(t) => set({ excluded: t })} />
        <ErrorBanner error={error} shown={[...Object.keys(errors).filter((k) => !k.startsWith("included") && !k.startsWith("excluded")), "headers.if-match"]} />
        {conflict && (
          <p>
            <button type="button" onClick={() => void load()}>
              Reload the segment
            </button>
          </p>
        )}
        {writer && (
          <div class="actions">
            <button type="submit" class="primary" disabled={busy || tooMany}>
              Save segment
            </button>
            <button type="button" class="danger" onClick={() => setDeleting(true)}>
              Delete segment
            </button>
            <span role="status">{saved ? "Saved." : ""}</span>
          </div>
        )}
      </form>
      <section aria-labelledby="used-by">
        <h2 id="used-by">Used by</h2>
        {usedBy === null ? (
          <p class="muted">Not checked yet: the flags' rules are read to find it.</p>
        ) : usedBy.length === 0 ? (
          <p class="used-by">No flag uses this segment.</p>
        ) : (
          <ul class="used-by">
            {usedBy.map((u) => (
              <li key={u.flagKey}>
                <a href={`/projects/${encodeURIComponent(slug)}/flags/${encodeURIComponent(u.flagKey)}`}>{u.flagKey}</a> <span class="muted">{u.message}</span>
              </li>
            ))}
          </ul>
        )}
        <button type="button" disabled={scanning} onClick={scan}>
          {scanning ? "Checking…" : "Find the flags that use it"}
        </button>
      </section>
      {deleting && (
        <Confirm title={`Delete segment ${segment.name}?`} confirm="Delete" busy={busy} onConfirm={remove} onCancel={() => setDeleting(false)}>
          <p>This cannot be undone. A segment that a flag's rule names cannot be deleted.</p>
        </Confirm>
      )}
    </div>
  );
}
