/**
 * The flags of a project: search and paging (the API's `q`, `page`, `perPage`), each row with
 * every environment's on/off and rollout, toggled in place by those who may (editor, admin),
 * and the stale badge. A row's states come from `GET …/flags/{key}/states`.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, can, type Environment, type FlagItem, type FlagState, type Project, type Role } from "../api";
import { ErrorBanner, Loading } from "../ui";

const PER_PAGE = 20;

interface Row extends FlagItem {
  states: Record<string, FlagState>;
}

function staleText(stale: NonNullable<FlagItem["stale"]>): string {
  return stale.reason === "fully_rolled_out" ? "Stale: fully rolled out" : "Stale: not evaluated";
}

export function FlagsPage({ slug, role }: { slug: string; role: Role }) {
  const [envs, setEnvs] = useState<Environment[] | null>(null);
  const [rows, setRows] = useState<Row[] | null>(null);
  const [total, setTotal] = useState(0);
  const [q, setQ] = useState(() => new URL(location.href).searchParams.get("q") ?? "");
  const [page, setPage] = useState(1);
  const [error, setError] = useState<unknown>(null);
  const [pending, setPending] = useState<string | null>(null);
  const generation = useRef(0);
  const writer = can(role, "flags");
  const base = `/v1/projects/${encodeURIComponent(slug)}`;

  useEffect(() => {
    api<Project>("GET", base).then(
      (p) => setEnvs(p.environments),
      (e) => setError(e),
    );
  }, [slug]);

  useEffect(() => {
    const mine = ++generation.current;
    const timer = setTimeout(async () => {
      try {
        const query = new URLSearchParams({ page: String(page), perPage: String(PER_PAGE) });
        if (q.trim()) query.set("q", q.trim());
        const list = await api<{ flags: FlagItem[]; total: number }>("GET", `${base}/flags?${query}`);
        const states = await Promise.all(list.flags.map((f) => api<{ states: FlagState[] }>("GET", `${base}/flags/${encodeURIComponent(f.key)}/states`)));
        if (mine !== generation.current) return;
        setRows(list.flags.map((f, i) => ({ ...f, states: Object.fromEntries(states[i]!.states.map((s) => [s.environment, s])) })));
        setTotal(list.total);
        setError(null);
      } catch (e) {
        if (mine === generation.current) setError(e);
      }
    }, q ? 200 : 0);
    return () => clearTimeout(timer);
  }, [slug, q, page]);

  const toggle = async (row: Row, env: Environment) => {
    const id = `${row.key}/${env.slug}`;
    const current = row.states[env.slug];
    setPending(id);
    try {
      const next = await api<FlagState>("PUT", `${base}/flags/${encodeURIComponent(row.key)}/states/${env.slug}`, { enabled: !current?.enabled });
      setRows((rs) => rs && rs.map((r) => (r.key === row.key ? { ...r, states: { ...r.states, [env.slug]: next } } : r)));
      setError(null);
    } catch (e) {
      setError(e);
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
        <span class="muted" role="status">
          {rows === null ? "" : `${total} flag${total === 1 ? "" : "s"}`}
        </span>
      </div>
      <ErrorBanner error={error} />
      {rows === null || envs === null ? (
        <Loading />
      ) : rows.length === 0 ? (
        <p class="muted">{q ? "No flag matches." : "No flags yet."}</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Flags" tabIndex={0}>
          <table class="flags" data-ready="">
            <thead>
              <tr>
                <th scope="col">Flag</th>
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
                    <span class="flag-name">{row.name}</span> <code>{row.key}</code>
                    {row.stale && (
                      <span class="badge stale" title={`Since ${row.stale.since}`}>
                        {staleText(row.stale)}
                      </span>
                    )}
                  </th>
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
                            onClick={() => toggle(row, env)}
                          >
                            <span aria-hidden="true">{on ? "On" : "Off"}</span>
                          </button>
                        ) : (
                          <span class={on ? "state on" : "state off"} aria-label={`${label}: ${on ? "on" : "off"}`}>
                            {on ? "On" : "Off"}
                          </span>
                        )}
                        {rollout !== null && rollout !== undefined && <span class="rollout">{rollout} %</span>}
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {pages > 1 && (
        <nav class="pager" aria-label="Pages">
          <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
            Previous
          </button>
          <span>
            Page {page} of {pages}
          </span>
          <button type="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
            Next
          </button>
        </nav>
      )}
    </>
  );
}
