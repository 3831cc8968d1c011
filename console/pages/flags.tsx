/**
 * The flags of a project: search and paging (the API's `q`, `page`, `perPage`), each row with
 * every environment's on/off and rollout, changed in place by those who may (editor, admin),
 * and the stale badge. One request a page: `GET …/flags?include=states` gives each flag's states
 * with their ETags. Live: the project's change stream (live.ts) reads the page again when a flag,
 * a state or an environment changes, whoever changed it. Edit conflicts: a toggle or rollout
 * change sends `If-Match` with the ETag of the state shown; a 412 (someone changed it meanwhile)
 * shows the server's message, saying who changed what, and the page is read again.
 * Each row has a sparkline of its evaluations over the last days: one request for the page
 * (`GET …/insights?flags=…`) after the list, so that the list shows without waiting for counts.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, can, tagged, type Environment, type FlagItem, type FlagState, type Project, type Role } from "../api";
import { LIVE_TEXT, useProjectChanges, type ChangeEntry } from "../live";
import { ErrorBanner, Loading, Pager } from "../ui";

const PER_PAGE = 20;
/** The sparkline's days (today the last). */
const SPARK_DAYS = 7;
/** Changes arriving together (a burst of writes) are read once. */
const SETTLE_MS = 100;

type ListedState = FlagState & { etag: string };
interface Row extends FlagItem {
  states: Record<string, ListedState>;
}

const TOUCHES_LIST = new Set(["flag", "flag_state", "environment"]);

function staleText(stale: NonNullable<FlagItem["stale"]>): string {
  return stale.reason === "fully_rolled_out" ? "Stale: fully rolled out" : "Stale: not evaluated";
}

/** The percentage typed in a rollout field: null for empty (everyone), undefined when not one. */
function percentage(text: string): number | null | undefined {
  if (text.trim() === "") return null;
  const n = Number(text);
  return Number.isFinite(n) && n >= 0 && n <= 100 ? n : undefined;
}

export function FlagsPage({ slug, role }: { slug: string; role: Role }) {
  const [envs, setEnvs] = useState<Environment[] | null>(null);
  const [rows, setRows] = useState<Row[] | null>(null);
  const [total, setTotal] = useState(0);
  const [q, setQ] = useState(() => new URL(location.href).searchParams.get("q") ?? "");
  const [page, setPage] = useState(1);
  const [staleOnly, setStaleOnly] = useState(() => new URL(location.href).searchParams.get("stale") === "true");
  const [error, setError] = useState<unknown>(null);
  const [pending, setPending] = useState<string | null>(null);
  const [reads, setReads] = useState(0);
  /** Flag key -> evaluations a day, oldest first (absent: not read yet). */
  const [daily, setDaily] = useState<Record<string, number[]>>({});
  const generation = useRef(0);
  const settle = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const writer = can(role, "flags");
  const base = `/v1/projects/${encodeURIComponent(slug)}`;

  const loadEnvironments = () =>
    api<Project>("GET", base).then(
      (p) => setEnvs(p.environments),
      (e) => setError(e),
    );
  useEffect(() => {
    void loadEnvironments();
  }, [slug]);

  /** Reads the page again (live changes, a conflict); changes arriving together are read once. */
  const reload = () => {
    clearTimeout(settle.current);
    settle.current = setTimeout(() => setReads((n) => n + 1), SETTLE_MS);
  };
  useEffect(() => () => clearTimeout(settle.current), []);

  const live = useProjectChanges(slug, (entry: ChangeEntry | null) => {
    if (entry === null || TOUCHES_LIST.has(entry.resource.type)) reload();
    if (entry === null || entry.resource.type === "environment") void loadEnvironments();
  });

  useEffect(() => {
    const mine = ++generation.current;
    const timer = setTimeout(async () => {
      try {
        const query = new URLSearchParams({ page: String(page), perPage: String(PER_PAGE), include: "states" });
        if (q.trim()) query.set("q", q.trim());
        if (staleOnly) query.set("stale", "true");
        const list = await api<{ flags: (FlagItem & { states: ListedState[] })[]; total: number }>("GET", `${base}/flags?${query}`);
        if (mine !== generation.current) return;
        setRows(list.flags.map((f) => ({ ...f, states: Object.fromEntries(f.states.map((s) => [s.environment, s])) })));
        setTotal(list.total);
        if (list.flags.length > 0) {
          const keys = list.flags.map((f) => f.key).join(",");
          api<{ flags: { flagKey: string; days: number[] }[] }>("GET", `${base}/insights?flags=${encodeURIComponent(keys)}&days=${SPARK_DAYS}`).then(
            (r) => mine === generation.current && setDaily(Object.fromEntries(r.flags.map((f) => [f.flagKey, f.days]))),
            () => {}, // No sparklines: the list works without them.
          );
        }
        // A conflict's message stays while the page is read again: it says what changed.
        setError((e: unknown) => (e instanceof ApiError && e.status === 412 ? e : null));
      } catch (e) {
        if (mine === generation.current) setError(e);
      }
    }, q ? 200 : 0);
    return () => clearTimeout(timer);
  }, [slug, q, page, reads, staleOnly]);

  /** A state PUT on the version shown (If-Match): the row takes the answer, or the 412's message is shown and the page read again. */
  const change = async (row: Row, env: Environment, body: { enabled: boolean; rolloutPercentage?: number | null }) => {
    const current = row.states[env.slug];
    setPending(`${row.key}/${env.slug}`);
    try {
      const { data, etag } = await tagged<FlagState>("PUT", `${base}/flags/${encodeURIComponent(row.key)}/states/${env.slug}`, body, current?.etag);
      const next: ListedState = { ...data, etag: etag ?? "" };
      setRows((rs) => rs && rs.map((r) => (r.key === row.key ? { ...r, states: { ...r.states, [env.slug]: next } } : r)));
      setError(null);
    } catch (e) {
      setError(e);
      if (e instanceof ApiError && e.status === 412) reload();
    } finally {
      setPending(null);
    }
  };

  const pages = Math.max(1, Math.ceil(total / PER_PAGE));
  return (
    <>
      <div class="page-head">
        <h1>Flags</h1>
        {writer && (
          <a class="button primary" href={`/projects/${slug}/flags/new`}>
            New flag
          </a>
        )}
      </div>
      <div class="toolbar">
        <label for="flag-search">Search flags</label>
        <input
          id="flag-search"
          type="search"
          placeholder="Key or name"
          value={q}
          onInput={(e) => {
            setQ((e.target as HTMLInputElement).value);
            setPage(1);
          }}
        />
        <label class="check">
          <input
            type="checkbox"
            name="stale"
            checked={staleOnly}
            onChange={(e) => {
              setStaleOnly((e.target as HTMLInputElement).checked);
              setPage(1);
            }}
          />
          Stale only
        </label>
        <span class="muted" role="status">
          {rows === null ? "" : `${total} flag${total === 1 ? "" : "s"}`}
        </span>
        <span class={`live-status ${live}`} data-live={live} title="Changes made by anyone show here as they are saved">
          {LIVE_TEXT[live]}
        </span>
      </div>
      {/* A 412 says it all in its message; its detail (the If-Match header) means nothing to the user. */}
      <ErrorBanner error={error} shown={["headers.if-match"]} />
      {rows === null || envs === null ? (
        <Loading />
      ) : rows.length === 0 ? (
        <p class="muted">{q || staleOnly ? "No flag matches." : "No flags yet."}</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Flags" tabIndex={0}>
          <table class="flags" data-ready="">
            <thead>
              <tr>
                <th scope="col">Flag</th>
                <th scope="col">Last {SPARK_DAYS} days</th>
                {envs.map((env) => (
                  <th scope="col" key={env.id}>
                    {env.name}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => (
                <tr key={row.key} data-flag={row.key}>
                  <th scope="row">
                    <a class="flag-name" href={`/projects/${encodeURIComponent(slug)}/flags/${encodeURIComponent(row.key)}`}>{row.name}</a> <code>{row.key}</code>
                    {row.stale && (
                      <span class="badge stale" title={`Since ${row.stale.since}`}>
                        {staleText(row.stale)}
                      </span>
                    )}
                  </th>
                  <td class="spark-cell">{daily[row.key] && <Sparkline days={daily[row.key]!} />}</td>
                  {envs.map((env) => {
                    const s = row.states[env.slug];
                    const on = s?.enabled ?? false;
                    const rollout = s?.rolloutPercentage;
                    const label = `${row.name} in ${env.name}`;
                    return (
                      <td key={env.id} data-env={env.slug}>
                        {writer ? (
                          <button
                            type="button"
                            role="switch"
                            class="switch"
                            aria-checked={on}
                            aria-label={label}
                            disabled={pending === `${row.key}/${env.slug}`}
                            onClick={() => change(row, env, { enabled: !on })}
                          >
                            <span aria-hidden="true">{on ? "On" : "Off"}</span>
                          </button>
                        ) : (
                          <span class={on ? "state on" : "state off"} aria-label={`${label}: ${on ? "on" : "off"}`}>
                            {on ? "On" : "Off"}
                          </span>
                        )}
                        {writer ? (
                          <Rollout key={`${s?.etag}`} label={`Rollout of ${label} (%)`} value={rollout ?? null} disabled={pending === `${row.key}/${env.slug}`} onSave={(v) => change(row, env, { enabled: on, rolloutPercentage: v })} />
                        ) : (
                          rollout !== null && rollout !== undefined && <span class="rollout">{rollout} %</span>
                        )}
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager page={page} pages={pages} setPage={setPage} />
    </>
  );
}

/** A state's rollout, typed in place: saved on Enter or when leaving the field, if changed (empty: everyone). */
function Rollout({ label, value, disabled, onSave }: { label: string; value: number | null; disabled: boolean; onSave: (v: number | null) => void }) {
  const [text, setText] = useState(value === null ? "" : String(value));
  const parsed = percentage(text);
  const save = () => {
    if (parsed !== undefined && parsed !== value) onSave(parsed);
  };
  return (
    <input
      class="rollout-input"
      type="number"
      min={0}
      max={100}
      step="any"
      inputMode="decimal"
      placeholder="100"
      aria-label={label}
      aria-invalid={parsed === undefined}
      title="Rollout in % (empty: everyone)"
      value={text}
      disabled={disabled}
      onInput={(e) => setText((e.target as HTMLInputElement).value)}
      onBlur={save}
      onKeyDown={(e) => {
        if (e.key === "Enter") save();
      }}
    />
  );
}

const SPARK_W = 84;
const SPARK_H = 24;

/** Evaluations a day as a tiny line (no chart library): an image to assistive technology, its total in words. */
export function Sparkline({ days }: { days: number[] }) {
  const total = days.reduce((a, b) => a + b, 0);
  const max = Math.max(1, ...days);
  const step = days.length > 1 ? (SPARK_W - 4) / (days.length - 1) : 0;
  const points = days.map((n, i) => `${(2 + i * step).toFixed(1)},${(SPARK_H - 2 - (n / max) * (SPARK_H - 4)).toFixed(1)}`).join(" ");
  const label = `${total.toLocaleString("en")} evaluation${total === 1 ? "" : "s"} in the last ${days.length} days`;
  return (
    <svg class={total > 0 ? "sparkline" : "sparkline none"} role="img" aria-label={label} width={SPARK_W} height={SPARK_H} viewBox={`0 0 ${SPARK_W} ${SPARK_H}`} data-total={total}>
      <title>{label}</title>
      <polyline points={points} fill="none" stroke-width="1.5" stroke-linejoin="round" />
    </svg>
  );
}
