/**
 * API keys of a project (`/projects/{slug}/keys`) and the instance's admin keys (`/admin/keys`).
 * A secret is in the create (and rotate) answer only: it is shown once, with a copy button, and
 * forgotten when the notice is closed. Project keys: every role reads them (never the secret);
 * editors and admins create, rotate (with a grace period for the old secret) and delete them, as
 * `GET/POST /v1/projects/{slug}/api-keys`, `POST /v1/api-keys/{id}/rotate` and
 * `DELETE /v1/api-keys/{id}` allow. Admin keys: admins only (`/v1/admin-keys`).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, type Project, type Role } from "../api";
import { Confirm, ErrorBanner, Field, Loading, Select } from "../ui";

interface KeyRow {
  id: string;
  name: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}
interface ApiKey extends KeyRow {
  scope: string;
  environment: string;
}

const SCOPES: [string, string][] = [
  ["eval", "eval: evaluation"],
  ["client", "client: evaluation from a web page"],
  ["test", "test: test sessions"],
  ["mgmt", "mgmt: manage the project"],
  ["full", "full: everything in the project"],
];
const GRACE: [string, string][] = [
  ["0", "None: refuse the old secret at once"],
  ["300", "5 minutes"],
  ["3600", "1 hour"],
  ["86400", "24 hours"],
];

export const when = (iso: string | null, never = "Never") => (iso === null ? never : new Date(iso).toLocaleString());

/** A secret shown once: read-only, selectable, copied with a button ("Copied"). */
export function SecretOnce({ title, secret, onClose }: { title: string; secret: string; onClose: () => void }) {
  const [copied, setCopied] = useState("");
  const box = useRef<HTMLElement>(null);
  // The form that made it is gone: focus moves to the secret, so keyboard users land on it.
  useEffect(() => box.current?.focus(), [secret]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied.");
    } catch {
      setCopied("Could not copy: select the key and copy it.");
    }
  };
  return (
    <section ref={box} tabIndex={-1} class="banner info secret" aria-labelledby="secret-title" data-secret="">
      <h2 id="secret-title">{title}</h2>
      <p>Copy it now: it is shown only this once and cannot be read again.</p>
      <div class="secret-row">
        <Field label="Secret key" name="secret" value={secret} onInput={() => {}} readOnly />
        <button type="button" class="primary" onClick={copy}>
          Copy<span class="sr-only"> the secret key</span>
        </button>
      </div>
      <p role="status" aria-live="polite">
        {copied}
      </p>
      <button type="button" onClick={onClose}>
        Done, hide the key
      </button>
    </section>
  );
}

/** Create forms: fields, errors at their field, the rest in a banner. */
export function useSubmit<T>(run: () => Promise<T>, done: (r: T) => void) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      done(await run());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, submit, fields: error instanceof ApiError ? error.fields() : {} };
}

/** A form of `useSubmit`: its fields, the errors no field took, the submit and cancel buttons. */
export function SubmitForm(props: { legend: string; submit: string; form: ReturnType<typeof useSubmit<any>>; onCancel: () => void; wide?: boolean; children: ComponentChildren }) {
  const { form } = props;
  return (
    <form class={props.wide ? "inline-form form" : "inline-form"} onSubmit={form.submit}>
      <fieldset>
        <legend>{props.legend}</legend>
        {props.children}
        <ErrorBanner error={form.error} shown={Object.keys(form.fields)} />
        <div class="actions">
          <button type="submit" class="primary" disabled={form.busy}>
            {props.submit}
          </button>
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        </div>
      </fieldset>
    </form>
  );
}

/** The row to delete (with confirmation), and how. */
export function useDeletion<T extends { id: string }>(path: (id: string) => string, reload: () => Promise<void>, setError: (e: unknown) => void) {
  const [deleting, setDeleting] = useState<T | null>(null);
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    if (!deleting) return;
    setBusy(true);
    try {
      await api("DELETE", path(deleting.id));
      setError(null);
    } catch (e) {
      setError(e);
    } finally {
      setDeleting(null);
      setBusy(false);
      await reload();
    }
  };
  return { deleting, setDeleting, busy, confirm };
}

export function ApiKeysPage({ slug, role }: { slug: string; role: Role }) {
  const [project, setProject] = useState<Project | null>(null);
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<{ title: string; key: string } | null>(null);
  const [rotating, setRotating] = useState<ApiKey | null>(null);
  const [grace, setGrace] = useState("3600");
  const [rotateBusy, setRotateBusy] = useState(false);
  const [form, setForm] = useState({ name: "", scope: "eval", environment: "" });
  const writer = role === "admin" || role === "editor";
  const load = () =>
    api<{ apiKeys: ApiKey[] }>("GET", `/v1/projects/${slug}/api-keys`).then(
      (r) => setKeys(r.apiKeys),
      (e) => setError(e),
    );
  useEffect(() => {
    setKeys(null);
    void load();
    api<Project>("GET", `/v1/projects/${slug}`).then((p) => {
      setProject(p);
      setForm((f) => ({ ...f, environment: p.environments[0]?.slug ?? "" }));
    }, setError);
  }, [slug]);
  const del = useDeletion<ApiKey>((id) => `/v1/api-keys/${id}`, load, setError);
  const create = useSubmit(
    () => api<ApiKey & { key: string }>("POST", `/v1/projects/${slug}/api-keys`, form),
    (k) => {
      setSecret({ title: `Key “${k.name}” created`, key: k.key });
      setCreating(false);
      setForm({ ...form, name: "" });
      void load();
    },
  );
  const rotate = async () => {
    if (!rotating) return;
    setRotateBusy(true);
    try {
      const k = await api<ApiKey & { key: string }>("POST", `/v1/api-keys/${rotating.id}/rotate`, { gracePeriodSeconds: Number(grace) });
      const left = grace === "0" ? "The old secret no longer works." : `The old secret works until ${when(new Date(Date.now() + Number(grace) * 1000).toISOString())}.`;
      setSecret({ title: `Key “${k.name}” rotated. ${left}`, key: k.key });
      setError(null);
    } catch (e) {
      setError(e);
    } finally {
      setRotating(null);
      setRotateBusy(false);
      await load();
    }
  };
  return (
    <>
      <div class="page-head">
        <h1>API keys</h1>
        {writer && !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New API key
          </button>
        )}
      </div>
      {secret && <SecretOnce title={secret.title} secret={secret.key} onClose={() => setSecret(null)} />}
      {creating && (
        <SubmitForm legend="New API key" submit="Create key" form={create} onCancel={() => setCreating(false)} wide>
          <Field label="Name" name="name" value={form.name} onInput={(name) => setForm({ ...form, name })} error={create.fields.name} required />
          <Select label="Scope" value={form.scope} options={SCOPES} onChange={(scope) => setForm({ ...form, scope })} error={create.fields.scope} />
          <Select
            label="Environment"
            value={form.environment}
            options={(project?.environments ?? []).map((e) => [e.slug, e.name])}
            onChange={(environment) => setForm({ ...form, environment })}
            error={create.fields.environment}
          />
        </SubmitForm>
      )}
      <ErrorBanner error={error} />
      {keys === null ? (
        !error && <Loading />
      ) : keys.length === 0 ? (
        <p class="muted">No API keys in this project yet.</p>
      ) : (
        <div class="table-wrap keys-wrap" tabIndex={0} role="region" aria-label="API keys">
          <table class="flags keys" data-ready="">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Scope</th>
                <th scope="col">Environment</th>
                <th scope="col">Key</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                {writer && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id} data-key={k.id}>
                  <th scope="row">{k.name}</th>
                  <td>{k.scope}</td>
                  <td>{k.environment}</td>
                  <td>
                    <code>{k.keyPrefix}…</code>
                  </td>
                  <td>{when(k.createdAt)}</td>
                  <td>{when(k.lastUsedAt)}</td>
                  {writer && (
                    <td class="actions">
                      <button type="button" onClick={() => setRotating(k)}>
                        Rotate<span class="sr-only"> key {k.name}</span>
                      </button>
                      <button type="button" class="danger" onClick={() => del.setDeleting(k)}>
                        Delete<span class="sr-only"> key {k.name}</span>
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {rotating && (
        <Confirm title={`Rotate key ${rotating.name}?`} confirm="Rotate" busy={rotateBusy} onConfirm={rotate} onCancel={() => setRotating(null)}>
          <p>A new secret is issued for this key; its name, scope and environment stay.</p>
          <Select label="Old secret keeps working for" value={grace} options={GRACE} onChange={setGrace} />
        </Confirm>
      )}
      {del.deleting && (
        <Confirm title={`Delete key ${del.deleting.name}?`} confirm="Delete" busy={del.busy} onConfirm={del.confirm} onCancel={() => del.setDeleting(null)}>
          <p>It is refused from the next request on, with any old secret still in its grace period. This cannot be undone.</p>
        </Confirm>
      )}
    </>
  );
}

export function AdminOnly({ title }: { title: string }) {
  return (
    <>
      <h1>{title}</h1>
      <p class="muted">Only admins see this page.</p>
    </>
  );
}

export function AdminKeysPage({ role }: { role: Role }) {
  const [keys, setKeys] = useState<KeyRow[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [name, setName] = useState("");
  const [secret, setSecret] = useState<{ title: string; key: string } | null>(null);
  const load = () =>
    api<{ adminKeys: KeyRow[] }>("GET", "/v1/admin-keys").then(
      (r) => setKeys(r.adminKeys),
      (e) => setError(e),
    );
  useEffect(() => {
    if (role === "admin") void load();
  }, [role]);
  const del = useDeletion<KeyRow>((id) => `/v1/admin-keys/${id}`, load, setError);
  const create = useSubmit(
    () => api<KeyRow & { key: string }>("POST", "/v1/admin-keys", { name }),
    (k) => {
      setSecret({ title: `Admin key “${k.name}” created`, key: k.key });
      setCreating(false);
      setName("");
      void load();
    },
  );
  if (role !== "admin") return <AdminOnly title="Admin keys" />;
  return (
    <>
      <div class="page-head">
        <h1>Admin keys</h1>
        {!creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New admin key
          </button>
        )}
      </div>
      <p class="muted">An admin key may do everything on this instance, in every project.</p>
      {secret && <SecretOnce title={secret.title} secret={secret.key} onClose={() => setSecret(null)} />}
      {creating && (
        <SubmitForm legend="New admin key" submit="Create admin key" form={create} onCancel={() => setCreating(false)} wide>
          <Field label="Name" name="name" value={name} onInput={setName} error={create.fields.name} required />
        </SubmitForm>
      )}
      <ErrorBanner error={error} />
      {keys === null ? (
        !error && <Loading />
      ) : (
        <div class="table-wrap keys-wrap" tabIndex={0} role="region" aria-label="Admin keys">
          <table class="flags keys" data-ready="">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id} data-key={k.id}>
                  <th scope="row">{k.name}</th>
                  <td>
                    <code>{k.keyPrefix}…</code>
                  </td>
                  <td>{when(k.createdAt)}</td>
                  <td>{when(k.lastUsedAt)}</td>
                  <td class="actions">
                    <button type="button" class="danger" onClick={() => del.setDeleting(k)}>
                      Delete<span class="sr-only"> admin key {k.name}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {del.deleting && (
        <Confirm title={`Delete admin key ${del.deleting.name}?`} confirm="Delete" busy={del.busy} onConfirm={del.confirm} onCancel={() => del.setDeleting(null)}>
          <p>It is refused at once. The last admin key can be deleted only while an admin user exists. This cannot be undone.</p>
        </Confirm>
      )}
    </>
  );
}
