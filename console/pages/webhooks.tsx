/**
 * Webhooks of a project (editors and admins: the API does not show them to viewers): the list,
 * register (URL, events, environments, a signing secret), enable/disable, delete (asked first),
 * and per webhook its delivery log (status, attempts, response code, error), refreshed every
 * 2 s while open, with redeliver (a finished delivery) and attempt-now (a pending one). The API
 * never returns the secret: the console shows the one typed or generated here once, after
 * registering, to copy.
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, type Project, type Role } from "../api";
import { Confirm, ErrorBanner, Field, Loading } from "../ui";

const EVENTS = ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled", "flag.stale"] as const;
const POLL_MS = 2000;

interface Webhook {
  id: string;
  url: string;
  events: string[];
  environments: string[];
  description: string | null;
  enabled: boolean;
}
interface Delivery {
  id: string;
  event: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  responseStatus: number | null;
  error: string | null;
  redeliveryOf: string | null;
  createdAt: string;
}

/** 32 random bytes as hex: a signing secret made in the browser. */
const newSecret = () => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, "0")).join("");

function Checks(props: { legend: string; hint?: string; options: string[]; value: string[]; onChange: (v: string[]) => void; error?: string }) {
  return (
    <fieldset class="checks">
      <legend>{props.legend}</legend>
      {props.hint && <p class="hint">{props.hint}</p>}
      {props.options.map((o) => (
        <label key={o} class="check">
          <input type="checkbox" checked={props.value.includes(o)} onChange={(e) => props.onChange((e.target as HTMLInputElement).checked ? [...props.value, o] : props.value.filter((x) => x !== o))} />
          {o}
        </label>
      ))}
      {props.error && <p class="error">{props.error}</p>}
    </fieldset>
  );
}

function Register({ slug, envs, onDone }: { slug: string; envs: string[]; onDone: (secret: string) => void }) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled"]);
  const [environments, setEnvironments] = useState<string[]>([]);
  const [description, setDescription] = useState("");
  const [secret, setSecret] = useState(newSecret);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fields = error instanceof ApiError ? error.fields() : {};
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("POST", `/v1/projects/${encodeURIComponent(slug)}/webhooks`, { url, events, environments, secret, ...(description ? { description } : {}) });
      onDone(secret);
      setUrl("");
      setDescription("");
      setSecret(newSecret());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="form inline-form" aria-label="Register a webhook" onSubmit={submit} noValidate>
      <fieldset>
        <legend>Register a webhook</legend>
        <Field label="URL" name="url" type="url" value={url} onInput={setUrl} error={fields.url} hint="http or https; events are POSTed here" required />
        <Checks legend="Events" options={[...EVENTS]} value={events} onChange={setEvents} error={fields.events} />
        <Checks legend="Environments" hint="None checked: every environment, including ones added later." options={envs} value={environments} onChange={setEnvironments} error={fields.environments} />
        <Field label="Description" name="description" value={description} onInput={setDescription} error={fields.description} />
        <Field label="Signing secret" name="secret" value={secret} onInput={setSecret} error={fields.secret} hint="16 to 256 characters; keys the X-Service-Signature HMAC. Generated here; never shown again after registering." required />
        <ErrorBanner error={error} shown={Object.keys(fields)} />
        <button type="submit" class="primary" disabled={busy}>
          Register webhook
        </button>
      </fieldset>
    </form>
  );
}

function Deliveries({ hook }: { hook: Webhook }) {
  const [list, setList] = useState<Delivery[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [reads, setReads] = useState(0);
  useEffect(() => {
    let live = true;
    const read = () =>
      api<{ deliveries: Delivery[] }>("GET", `/v1/webhooks/${encodeURIComponent(hook.id)}/deliveries?limit=20`).then(
        (r) => live && setList(r.deliveries),
        (e) => live && setError(e),
      );
    void read();
    const timer = setInterval(read, POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [hook.id, reads]);
  const act = async (d: Delivery, what: "redeliver" | "attempt-now") => {
    try {
      await api("POST", `/v1/webhook-deliveries/${encodeURIComponent(d.id)}/${what}`);
      setError(null);
    } catch (err) {
      setError(err);
    }
    setReads((n) => n + 1);
  };
  return (
    <div class="deliveries">
      <ErrorBanner error={error} />
      {list === null ? (
        <Loading />
      ) : list.length === 0 ? (
        <p class="muted">No deliveries yet.</p>
      ) : (
        <div class="table-wrap" role="region" aria-label={`Deliveries to ${hook.url}`} tabIndex={0}>
          <table class="flags">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Response</th>
                <th scope="col">Last attempt</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((d) => (
                <tr key={d.id} data-delivery={d.id} data-status={d.status}>
                  <td>
                    {d.event}
                    {d.redeliveryOf && <span class="badge">redelivery</span>}
                  </td>
                  <td>{d.status}</td>
                  <td>{d.attempts}</td>
                  <td title={d.error ?? undefined}>{d.responseStatus ?? d.error ?? "—"}</td>
                  <td>{d.lastAttemptAt ? new Date(d.lastAttemptAt).toLocaleString() : d.nextAttemptAt ? `due ${new Date(d.nextAttemptAt).toLocaleString()}` : "—"}</td>
                  <td>
                    {d.status === "pending" ? (
                      <button type="button" disabled={!hook.enabled} onClick={() => act(d, "attempt-now")}>
                        Attempt now<span class="sr-only"> {d.event} delivery {d.id}</span>
                      </button>
                    ) : (
                      <button type="button" disabled={!hook.enabled} onClick={() => act(d, "redeliver")}>
                        Redeliver<span class="sr-only"> {d.event} delivery {d.id}</span>
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export function WebhooksPage({ slug, role }: { slug: string; role: Role }) {
  const [hooks, setHooks] = useState<Webhook[] | null>(null);
  const [envs, setEnvs] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [secret, setSecret] = useState("");
  const [open, setOpen] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<Webhook | null>(null);
  const allowed = can(role, "webhooks");
  const base = `/v1/projects/${encodeURIComponent(slug)}`;
  const load = () => api<{ webhooks: Webhook[] }>("GET", `${base}/webhooks`).then((r) => setHooks(r.webhooks), setError);
  useEffect(() => {
    if (!allowed) return;
    void load();
    api<Project>("GET", base).then((p) => setEnvs(p.environments.map((e) => e.slug)), setError);
  }, [slug]);
  if (!allowed) {
    return (
      <>
        <h1>Webhooks</h1>
        <p class="muted">Webhooks are seen and managed by editors and admins.</p>
      </>
    );
  }
  const change = async (run: () => Promise<unknown>) => {
    try {
      await run();
      setError(null);
    } catch (err) {
      setError(err);
    }
    await load();
  };
  return (
    <>
      <h1>Webhooks</h1>
      <ErrorBanner error={error} />
      {secret && (
        <div class="banner info" role="status">
          <p>
            Registered. Its signing secret, shown only now (the API never returns it): <code class="secret">{secret}</code>{" "}
            <button type="button" onClick={() => void navigator.clipboard?.writeText(secret)}>
              Copy
            </button>{" "}
            <button type="button" onClick={() => setSecret("")}>
              Done
            </button>
          </p>
        </div>
      )}
      {hooks === null ? (
        <Loading />
      ) : hooks.length === 0 ? (
        <p class="muted">No webhooks yet.</p>
      ) : (
        <ul class="cards" data-ready="">
          {hooks.map((h) => (
            <li class="card" key={h.id} data-webhook={h.id}>
              <div class="card-head">
                <h2 class="hook-url">{h.url}</h2>
                <span class={h.enabled ? "state on" : "state off"}>{h.enabled ? "Enabled" : "Disabled"}</span>
              </div>
              {h.description && <p>{h.description}</p>}
              <p class="muted">
                Events: {h.events.join(", ")}. Environments: {h.environments.length ? h.environments.join(", ") : "all"}.
              </p>
              <div class="actions">
                <button type="button" aria-expanded={open === h.id} onClick={() => setOpen(open === h.id ? null : h.id)}>
                  Delivery log<span class="sr-only"> of {h.url}</span>
                </button>
                <button type="button" onClick={() => change(() => api("PATCH", `/v1/webhooks/${encodeURIComponent(h.id)}`, { enabled: !h.enabled }))}>
                  {h.enabled ? "Disable" : "Enable"}
                  <span class="sr-only"> {h.url}</span>
                </button>
                <button type="button" class="danger" onClick={() => setDeleting(h)}>
                  Delete<span class="sr-only"> {h.url}</span>
                </button>
              </div>
              {open === h.id && <Deliveries hook={h} />}
            </li>
          ))}
        </ul>
      )}
      <Register
        slug={slug}
        envs={envs}
        onDone={(s) => {
          setSecret(s);
          void load();
        }}
      />
      {deleting && (
        <Confirm
          title="Delete this webhook?"
          confirm="Delete"
          onConfirm={() => {
            const h = deleting;
            setDeleting(null);
            void change(() => api("DELETE", `/v1/webhooks/${encodeURIComponent(h.id)}`));
          }}
          onCancel={() => setDeleting(null)}
        >
          <p>
            <code>{deleting.url}</code> gets no more events; its deliveries, pending ones included, are deleted.
          </p>
        </Confirm>
      )}
    </>
  );
}
