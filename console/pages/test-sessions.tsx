/**
 * Test sessions of a project and their overrides (the Testing API with the signed-in user's
 * session: every role reads, editors and admins change). The list of live sessions (token,
 * created, expires, overrides); create one; open one to see its overrides, set one (a flag of
 * the project, a value fit for it: on/off for a boolean flag, one of its variants otherwise) and
 * remove one; destroy a session (asked first). Evaluations that send the token as
 * `X-Service-Session` get the overrides.
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, type FlagItem, type Role } from "../api";
import { Confirm, ErrorBanner, Field, Loading, Select } from "../ui";

type Value = boolean | string;
interface Session {
  id: string;
  token: string;
  label?: string;
  overrides: Record<string, Value>;
  createdAt: string;
  expiresAt: string;
}

const when = (iso: string) => new Date(iso).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" });
const shown = (v: Value) => (v === true ? "on (true)" : v === false ? "off (false)" : v);

export function TestSessionsPage({ slug, role }: { slug: string; role: Role }) {
  const writer = can(role, "flags");
  const [sessions, setSessions] = useState<Session[] | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [label, setLabel] = useState("");
  const [doomed, setDoomed] = useState<Session | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [reads, setReads] = useState(0);
  const reload = () => setReads((n) => n + 1);
  const fields = error instanceof ApiError ? error.fields() : {};

  useEffect(() => {
    api<{ sessions: Session[] }>("GET", `/v1/testing/sessions?projectId=${encodeURIComponent(slug)}`).then(
      (r) => setSessions(r.sessions),
      (e) => setError(e),
    );
  }, [slug, reads]);

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const s = await api<Session>("POST", "/v1/testing/sessions", { projectId: slug, ...(label.trim() ? { label: label.trim() } : {}) });
      setLabel("");
      setOpen(s.id);
      reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const destroy = async () => {
    if (!doomed) return;
    setBusy(true);
    try {
      await api("DELETE", `/v1/testing/sessions/${encodeURIComponent(doomed.id)}`);
      if (open === doomed.id) setOpen(null);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      setDoomed(null);
      reload();
    }
  };

  const opened = sessions?.find((s) => s.id === open) ?? null;
  return (
    <>
      <h1>Test sessions</h1>
      <p class="muted">
        A test session overrides flags for the evaluations that send its token in the <code>X-Service-Session</code> header, in every environment of this project; others are never
        affected. Sessions expire on their own.
      </p>
      {writer && (
        <form class="form inline-form" aria-label="Create a test session" onSubmit={create} noValidate>
          <Field label="Label (optional)" name="label" value={label} onInput={setLabel} error={fields.label} hint="To recognise the session, e.g. the test suite's name" />
          <button type="submit" class="primary" disabled={busy}>
            Create session
          </button>
        </form>
      )}
      <ErrorBanner error={error} shown={Object.keys(fields)} />
      {sessions === null ? (
        <Loading />
      ) : sessions.length === 0 ? (
        <p class="muted">No live test session.</p>
      ) : (
        <div class="table-wrap sessions-wrap" role="region" aria-label="Test sessions" tabIndex={0}>
          <table class="flags">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Overrides</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {sessions.map((s) => (
                <tr key={s.id} data-session={s.id}>
                  <th scope="row">
                    {s.label ?? <span class="muted">No label</span>} <code>{s.id}</code>
                  </th>
                  <td>{when(s.createdAt)}</td>
                  <td>{when(s.expiresAt)}</td>
                  <td>{Object.keys(s.overrides).length}</td>
                  <td class="actions">
                    <button type="button" aria-expanded={open === s.id} aria-controls="session-detail" onClick={() => setOpen(open === s.id ? null : s.id)}>
                      {open === s.id ? "Close" : "Open"}
                      <span class="sr-only"> {s.label ?? s.id}</span>
                    </button>{" "}
                    {writer && (
                      <button type="button" class="danger" onClick={() => setDoomed(s)}>
                        Destroy<span class="sr-only"> {s.label ?? s.id}</span>
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {opened && <SessionDetail key={opened.id} slug={slug} session={opened} writer={writer} onChanged={reload} />}
      {doomed && (
        <Confirm title="Destroy this test session?" confirm="Destroy session" busy={busy} onConfirm={destroy} onCancel={() => setDoomed(null)}>
          <p>
            {doomed.label ?? doomed.id} and its {Object.keys(doomed.overrides).length} override(s) go at once: evaluations sending its token are evaluated normally from then on.
          </p>
        </Confirm>
      )}
    </>
  );
}

function SessionDetail({ slug, session, writer, onChanged }: { slug: string; session: Session; writer: boolean; onChanged: () => void }) {
  const base = `/v1/testing/sessions/${encodeURIComponent(session.id)}`;
  const [error, setError] = useState<unknown>(null);
  const entries = Object.entries(session.overrides);
  const remove = async (flagKey: string) => {
    try {
      await api("DELETE", `${base}/overrides/${encodeURIComponent(flagKey)}`);
      setError(null);
      onChanged();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section id="session-detail" class="session-panel" aria-labelledby="session-title">
      <h2 id="session-title">Session {session.label ?? session.id}</h2>
      <p>
        Token (send as <code>X-Service-Session</code>): <code class="token" data-token="">{session.token}</code>
      </p>
      <ErrorBanner error={error} />
      {entries.length === 0 ? (
        <p class="muted">No overrides: every flag evaluates normally for this session.</p>
      ) : (
        <div class="table-wrap sessions-wrap" role="region" aria-label="Overrides" tabIndex={0}>
          <table class="flags overrides">
            <caption class="sr-only">Overrides of this session</caption>
            <thead>
              <tr>
                <th scope="col">Flag</th>
                <th scope="col">Value</th>
                {writer && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {entries.map(([flagKey, value]) => (
                <tr key={flagKey} data-override={flagKey}>
                  <th scope="row">
                    <code>{flagKey}</code>
                  </th>
                  <td>{shown(value)}</td>
                  {writer && (
                    <td>
                      <button type="button" onClick={() => remove(flagKey)}>
                        Remove<span class="sr-only"> the override of {flagKey}</span>
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {writer && <AddOverride slug={slug} base={base} onDone={onChanged} />}
    </section>
  );
}

/** A flag of the project and a value fit for it: on/off for a boolean flag, one of its variants otherwise. */
function AddOverride({ slug, base, onDone }: { slug: string; base: string; onDone: () => void }) {
  const project = `/v1/projects/${encodeURIComponent(slug)}`;
  const [flags, setFlags] = useState<FlagItem[] | null>(null);
  const [flagKey, setFlagKey] = useState("");
  const [variants, setVariants] = useState<string[] | null>(null);
  const [value, setValue] = useState("true");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fields = error instanceof ApiError ? error.fields() : {};

  useEffect(() => {
    api<{ flags: FlagItem[] }>("GET", `${project}/flags?perPage=100`).then(
      (r) => {
        setFlags(r.flags);
        if (r.flags[0]) setFlagKey(r.flags[0].key);
      },
      (e) => setError(e),
    );
  }, [slug]);
  useEffect(() => {
    if (!flagKey) return;
    setVariants(null);
    api<{ variants: { key: string }[] }>("GET", `${project}/flags/${encodeURIComponent(flagKey)}`).then(
      (f) => {
        const keys = f.variants.map((v) => v.key);
        setVariants(keys);
        setValue(keys[0] ?? "true");
      },
      (e) => setError(e),
    );
  }, [flagKey]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("PUT", `${base}/overrides/${encodeURIComponent(flagKey)}`, { value: variants && variants.length > 0 ? value : value === "true" });
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (flags === null) return error ? <ErrorBanner error={error} /> : <Loading />;
  if (flags.length === 0) return <p class="muted">This project has no flags to override yet.</p>;
  const options: [string, string][] = variants && variants.length > 0 ? variants.map((v) => [v, v]) : [["true", "On (true)"], ["false", "Off (false)"]];
  return (
    <form class="form inline-form" aria-label="Set an override" onSubmit={submit} noValidate>
      <fieldset>
        <legend>Set an override</legend>
        <Select label="Flag" value={flagKey} options={flags.map((f) => [f.key, `${f.name} (${f.key})`])} onChange={setFlagKey} error={fields.flagKey} />
        <Select label="Value" value={value} options={options} onChange={setValue} error={fields.value} disabled={variants === null} hint={variants && variants.length > 0 ? "One of the flag's variants" : "A boolean flag: on or off"} />
        <ErrorBanner error={error} shown={Object.keys(fields)} />
        <button type="submit" class="primary" disabled={busy || variants === null}>
          Set override
        </button>
      </fieldset>
    </form>
  );
}
