/**
 * A project's plugins (admins only: the API answers 403 to anyone else): the installed plugins
 * with their status, and per plugin its status, counters and recent log lines (read again every
 * 2 s while open), enable/disable, configure (a form from the package's configSchema), uninstall
 * (asked first); the marketplace (Pro: on the Community Edition, read from GET /v1/health, the
 * page says so instead) with search, category and sort, a package's details and its install form
 * built from its configSchema (secrets as password inputs).
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type Role } from "../api";
import { navigate } from "../router";
import { Confirm, ErrorBanner, Field, Loading, Select } from "../ui";
import { SchemaForm, type ConfigSchema } from "./schema-form";

/** The catalog's categories (src/plugins/manifest.ts CATEGORIES; that module holds the validator, not bundled here). */
const CATEGORIES = ["analytics", "monitoring", "crm"];
const POLL_MS = 2000;
const SEARCH_DELAY_MS = 250;

interface Listing {
  packageName: string;
  name: string;
  description: string;
  category: string;
  version: string;
  author: string;
  downloads: number;
  verified: boolean;
}
interface Details extends Listing {
  readme: string;
  configSchema: ConfigSchema;
  homepage: string | null;
  versions: { version: string; publishedAt: string }[];
}
interface Plugin {
  id: string;
  packageName: string;
  version: string;
  status: "installing" | "active" | "error" | "disabled";
  config: Record<string, unknown>;
  errorMessage: string | null;
  installedAt: string;
}
interface Status {
  status: Plugin["status"];
  errorMessage: string | null;
  logs: { timestamp: string; level: string; message: string }[];
  stats: { eventsHandled: number; errors: number; lastEventAt: string | null; evaluationsDropped: number };
}

const pkgPath = (name: string) => `/v1/marketplace/plugins/${encodeURIComponent(name)}`;
export const isProRequired = (e: unknown) => e instanceof ApiError && e.code === "PRO_EDITION_REQUIRED";
/** Whether this server runs the Pro edition (GET /v1/health says), so that no Pro endpoint is asked in vain on CE. */
export const runsPro = () => api<{ edition: string }>("GET", "/v1/health").then((h) => h.edition === "pro");

/** Runs a change; its error, or none, goes to `setError`; then `reload` (as it now is, either way). */
export const changer = (setError: (e: unknown) => void, reload: () => Promise<unknown>) => async (run: () => Promise<unknown>) => {
  try {
    await run();
    setError(null);
  } catch (err) {
    setError(err);
  }
  await reload();
};

/** For admins only, as the API: everyone else reads why. */
export function AdminsOnly({ title }: { title: string }) {
  return (
    <>
      <h1>{title}</h1>
      <p class="muted">{title} are installed, seen and managed by admins only (the API answers 403 to other roles).</p>
    </>
  );
}

/** `/plugins`, the console's older address: the current project's plugins. */
export function PluginsRedirect({ slug }: { slug: string }) {
  useEffect(() => navigate(`/projects/${encodeURIComponent(slug)}/plugins`, true), [slug]);
  return <Loading />;
}

/** Read every 2 s while open; a status other than the list's reloads the list (`onMoved`). */
function StatusPanel({ base, plugin, onMoved }: { base: string; plugin: Plugin; onMoved: () => void }) {
  const [status, setStatus] = useState<Status | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    const read = () =>
      api<Status>("GET", `${base}/${encodeURIComponent(plugin.id)}/status`).then(
        (s) => {
          if (!live) return;
          setStatus(s);
          setError(null);
          if (s.status !== plugin.status) onMoved();
        },
        (e) => live && setError(e),
      );
    void read();
    const timer = setInterval(read, POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [plugin.id, plugin.status]);
  if (error) return <ErrorBanner error={error} />;
  if (!status) return <Loading />;
  return (
    <div class="plugin-status" data-status={status.status}>
      <p>
        Status: <strong>{status.status}</strong>
        {status.errorMessage && <span class="error"> — {status.errorMessage}</span>}
      </p>
      <p class="muted">
        Events handled {status.stats.eventsHandled}, errors {status.stats.errors}, evaluations dropped {status.stats.evaluationsDropped}, last event {status.stats.lastEventAt ? new Date(status.stats.lastEventAt).toLocaleString() : "none yet"}.
      </p>
      <h3>Recent logs</h3>
      {status.logs.length === 0 ? (
        <p class="muted">No log lines in this run.</p>
      ) : (
        <ol class="plugin-logs" tabIndex={0} aria-label={`Logs of ${plugin.packageName}`}>
          {status.logs.map((l, i) => (
            <li key={i} class={`log-${l.level}`}>
              <time dateTime={l.timestamp}>{new Date(l.timestamp).toLocaleTimeString()}</time> <span class="level">{l.level}</span> {l.message}
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

function Installed({ base, plugins, reload, pro }: { base: string; plugins: Plugin[]; reload: () => Promise<unknown>; pro: boolean }) {
  const [open, setOpen] = useState<string | null>(null);
  const [editing, setEditing] = useState<{ plugin: Plugin; schema: ConfigSchema } | null>(null);
  const [removing, setRemoving] = useState<Plugin | null>(null);
  const [error, setError] = useState<unknown>(null);
  const change = changer(setError, reload);
  const configure = async (p: Plugin) => {
    try {
      // The API gives the latest version's configSchema only (no per-version details): an older install is configured with the latest's fields.
      setEditing({ plugin: p, schema: (await api<Details>("GET", pkgPath(p.packageName))).configSchema });
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="installed-title">
      <h2 id="installed-title">Installed</h2>
      <ErrorBanner error={error} />
      {plugins.length === 0 ? (
        <p class="muted">No plugins installed in this project.</p>
      ) : (
        <ul class="cards installed" data-ready="">
          {plugins.map((p) => (
            <li class="card" key={p.id} data-plugin={p.packageName}>
              <div class="card-head">
                <h3 class="pkg-name">
                  {p.packageName} <span class="muted">{p.version}</span>
                </h3>
                <span class={`state plugin-${p.status}`}>{p.status}</span>
              </div>
              {p.errorMessage && <p class="error">{p.errorMessage}</p>}
              <div class="actions">
                <button type="button" aria-expanded={open === p.id} onClick={() => setOpen(open === p.id ? null : p.id)}>
                  Status and logs<span class="sr-only"> of {p.packageName}</span>
                </button>
                <button type="button" onClick={() => change(() => api("PATCH", `${base}/${encodeURIComponent(p.id)}`, { enabled: p.status === "disabled" }))}>
                  {p.status === "disabled" ? "Enable" : "Disable"}
                  <span class="sr-only"> {p.packageName}</span>
                </button>
                {pro && (
                  <button type="button" onClick={() => configure(p)}>
                    Configure<span class="sr-only"> {p.packageName}</span>
                  </button>
                )}
                <button type="button" class="danger" onClick={() => setRemoving(p)}>
                  Uninstall<span class="sr-only"> {p.packageName}</span>
                </button>
              </div>
              {editing?.plugin.id === p.id && (
                <SchemaForm
                  label={`Configure ${p.packageName}`}
                  schema={editing.schema}
                  config={p.config}
                  submitLabel="Save configuration"
                  onSubmit={async (config) => {
                    await api("PATCH", `${base}/${encodeURIComponent(p.id)}`, { config });
                    setEditing(null);
                    setOpen(p.id);
                    await reload();
                  }}
                />
              )}
              {open === p.id && <StatusPanel base={base} plugin={p} onMoved={() => void reload()} />}
            </li>
          ))}
        </ul>
      )}
      {removing && (
        <Confirm
          title={`Uninstall ${removing.packageName}?`}
          confirm="Uninstall"
          onConfirm={() => {
            const p = removing;
            setRemoving(null);
            void change(() => api("DELETE", `${base}/${encodeURIComponent(p.id)}`));
          }}
          onCancel={() => setRemoving(null)}
        >
          <p>Its deactivate hook is called, it gets no more events, and its configuration is deleted.</p>
        </Confirm>
      )}
    </section>
  );
}

function Install({ name, base, onInstalled, onClose }: { name: string; base: string; onInstalled: (p: Plugin) => void; onClose: () => void }) {
  const [details, setDetails] = useState<Details | null>(null);
  const [version, setVersion] = useState("latest");
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    api<Details>("GET", pkgPath(name)).then(setDetails, setError);
  }, [name]);
  if (error) return <ErrorBanner error={error} />;
  if (!details) return <Loading />;
  return (
    <div class="pkg-details" data-package={name}>
      <div class="card-head">
        <h3>Install {details.name}</h3>
        <button type="button" onClick={onClose}>
          Close<span class="sr-only"> {details.name}</span>
        </button>
      </div>
      <p class="muted">
        {details.packageName} by {details.author}
        {details.homepage && (
          <>
            {" · "}
            <a href={details.homepage} rel="noreferrer noopener" target="_blank">
              Homepage
            </a>
          </>
        )}
      </p>
      {details.readme && (
        <details>
          <summary>Read me</summary>
          <pre class="readme">{details.readme}</pre>
        </details>
      )}
      <SchemaForm
        label={`Install ${details.packageName}`}
        schema={details.configSchema}
        submitLabel="Install"
        onSubmit={async (config) => onInstalled(await api<Plugin>("POST", base, { packageName: name, version, config }))}
      >
        <Select label="Version" value={version} options={[["latest", `latest (${details.version})`], ...details.versions.map((v) => [v.version, v.version] as [string, string])]} onChange={setVersion} />
      </SchemaForm>
    </div>
  );
}

function Marketplace({ base, onInstalled }: { base: string; onInstalled: (p: Plugin) => void }) {
  const [q, setQ] = useState("");
  const [category, setCategory] = useState("");
  const [sort, setSort] = useState("name");
  const [list, setList] = useState<Listing[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [picked, setPicked] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    const query = new URLSearchParams({ sort, ...(q.trim() ? { q: q.trim() } : {}), ...(category ? { category } : {}) });
    const timer = setTimeout(
      () =>
        api<{ plugins: Listing[] }>("GET", `/v1/marketplace/plugins?${query}`).then(
          (r) => live && (setList(r.plugins), setError(null)),
          (e) => live && setError(e),
        ),
      SEARCH_DELAY_MS,
    );
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [q, category, sort]);
  return (
    <section aria-labelledby="market-title">
      <h2 id="market-title">Marketplace</h2>
      <form class="market-filters" role="search" aria-label="Search the marketplace" onSubmit={(e) => e.preventDefault()}>
        <Field label="Search" type="search" name="q" value={q} onInput={setQ} hint="Name or description" error={error instanceof ApiError ? error.fields().q : undefined} />
        <Select label="Category" value={category} options={[["", "All categories"], ...CATEGORIES.map((c) => [c, c] as [string, string])]} onChange={setCategory} />
        <Select label="Sort" value={sort} options={[["name", "Name"], ["popular", "Most installed"], ["newest", "Newest"]]} onChange={setSort} />
      </form>
      <ErrorBanner error={error} />
      {list === null ? (
        <Loading />
      ) : list.length === 0 ? (
        <p class="muted">No package matches.</p>
      ) : (
        <ul class="cards market" data-ready="" aria-live="polite">
          {list.map((p) => (
            <li class="card" key={p.packageName} data-package={p.packageName}>
              <div class="card-head">
                <h3 class="pkg-name">{p.name}</h3>
                <span>
                  <span class="badge">{p.category}</span>
                  {p.verified && <span class="badge verified">verified</span>}
                </span>
              </div>
              <p>{p.description}</p>
              <p class="muted">
                {p.packageName} {p.version} · {p.author} · {p.downloads} installs here
              </p>
              {picked === p.packageName ? (
                <Install
                  name={p.packageName}
                  base={base}
                  onClose={() => setPicked(null)}
                  onInstalled={(plugin) => {
                    setPicked(null);
                    onInstalled(plugin);
                  }}
                />
              ) : (
                <button type="button" onClick={() => setPicked(p.packageName)}>
                  Details and install<span class="sr-only"> {p.name}</span>
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

export function PluginsPage({ slug, role }: { slug: string; role: Role }) {
  const [plugins, setPlugins] = useState<Plugin[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [pro, setPro] = useState<boolean | null>(null);
  const [notice, setNotice] = useState("");
  const base = `/v1/projects/${encodeURIComponent(slug)}/plugins`;
  const load = () => api<{ plugins: Plugin[] }>("GET", base).then((r) => setPlugins(r.plugins), setError);
  useEffect(() => {
    if (role !== "admin") return;
    void load();
    runsPro().then(setPro, setError);
  }, [slug]);
  if (role !== "admin") return <AdminsOnly title="Plugins" />;
  return (
    <div class="plugins-page">
      <h1>Plugins</h1>
      <ErrorBanner error={error} />
      {notice && (
        <p class="banner info" role="status">
          {notice}
        </p>
      )}
      {plugins === null ? <Loading /> : <Installed base={base} plugins={plugins} reload={load} pro={pro === true} />}
      {pro === false && (
        <section aria-labelledby="market-title">
          <h2 id="market-title">Marketplace</h2>
          <p class="banner info">
            The marketplace is part of the Pro edition; this server runs the Community Edition (<code>SVC_EDITION=ce</code>). Plugins installed through the API (<code>POST {base}</code>) are shown and managed above.
          </p>
        </section>
      )}
      {pro === true && (
        <Marketplace
          base={base}
          onInstalled={(p) => {
            setNotice(`Installed ${p.packageName} ${p.version}: its status is “${p.status}”; open “Status and logs” to follow it.`);
            void load();
          }}
        />
      )}
    </div>
  );
}
