/**
 * A project's integrations (Pro; admins only, as the API): the configured ones with their
 * delivery counters (sent, failed, the last error, when last sent), enable/disable, edit (a form
 * from the type's config schema; secrets come back as "********" and are kept unless retyped),
 * delete (asked first); configure a new one: pick a type, fill the form made from its schema
 * (secrets as password inputs). On the Community Edition every integration endpoint answers 403
 * PRO_EDITION_REQUIRED: the page says so instead.
 */
import { useEffect, useState } from "preact/hooks";
import { api, type Role } from "../api";
import { Confirm, ErrorBanner, Loading, Select } from "../ui";
import { AdminsOnly, changer, isProRequired, runsPro } from "./plugins";
import { SchemaForm, type ConfigSchema } from "./schema-form";

interface IntegrationType {
  type: string;
  name: string;
  category: string;
  description: string;
  configSchema: ConfigSchema;
}
interface Integration {
  id: string;
  type: string;
  config: Record<string, unknown>;
  enabled: boolean;
  stats: { sent: number; failed: number; lastError: string | null; lastSentAt: string | null };
}

function Create({ types, base, onDone }: { types: IntegrationType[]; base: string; onDone: () => void }) {
  const [type, setType] = useState("");
  const picked = types.find((t) => t.type === type);
  return (
    <section class="form inline-form" aria-labelledby="new-integration-title">
      <h2 id="new-integration-title">Configure an integration</h2>
      <Select label="Type" value={type} options={[["", "Pick a type…"], ...types.map((t) => [t.type, `${t.name} (${t.category})`] as [string, string])]} onChange={setType} />
      {picked && (
        <>
          <p class="muted">{picked.description}</p>
          <SchemaForm
            key={picked.type}
            label={`New ${picked.name} integration`}
            schema={picked.configSchema}
            submitLabel="Create integration"
            onSubmit={async (config) => {
              await api("POST", base, { type: picked.type, config });
              setType("");
              onDone();
            }}
          />
        </>
      )}
    </section>
  );
}

export function IntegrationsPage({ slug, role }: { slug: string; role: Role }) {
  const [types, setTypes] = useState<IntegrationType[] | null>(null);
  const [list, setList] = useState<Integration[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [removing, setRemoving] = useState<Integration | null>(null);
  const [pro, setPro] = useState(true);
  const base = `/v1/projects/${encodeURIComponent(slug)}/integrations`;
  const load = () => api<{ integrations: Integration[] }>("GET", base).then((r) => setList(r.integrations), setError);
  useEffect(() => {
    if (role !== "admin") return;
    runsPro()
      .then(async (pro) => {
        if (!pro) return setPro(false);
        setTypes((await api<{ types: IntegrationType[] }>("GET", "/v1/integrations/types")).types);
        await load();
      })
      .catch(setError);
  }, [slug]);
  if (role !== "admin") return <AdminsOnly title="Integrations" />;
  if (!pro || isProRequired(error)) {
    return (
      <>
        <h1>Integrations</h1>
        <p class="banner info" role="status">
          Integrations (Segment, Amplitude, Mixpanel, Datadog, Slack and more, sent by the server itself) are part of the Pro edition. This server runs the Community Edition (<code>SVC_EDITION=ce</code>): plugins do the same from the <a href={`/projects/${encodeURIComponent(slug)}/plugins`}>Plugins</a> page.
        </p>
      </>
    );
  }
  const change = changer(setError, load);
  const nameOf = (type: string) => types?.find((t) => t.type === type)?.name ?? type;
  return (
    <div class="integrations-page">
      <h1>Integrations</h1>
      <ErrorBanner error={error} />
      {list === null || types === null ? (
        error ? null : <Loading />
      ) : (
        <>
          {list.length === 0 ? (
            <p class="muted">No integrations in this project yet.</p>
          ) : (
            <ul class="cards" data-ready="">
              {list.map((i) => (
                <li class="card" key={i.id} data-integration={i.type}>
                  <div class="card-head">
                    <h2 class="pkg-name">{nameOf(i.type)}</h2>
                    <span class={i.enabled ? "state on" : "state off"}>{i.enabled ? "Enabled" : "Disabled"}</span>
                  </div>
                  <p class="muted integration-stats">
                    Sent {i.stats.sent}, failed {i.stats.failed}; last sent {i.stats.lastSentAt ? new Date(i.stats.lastSentAt).toLocaleString() : "never"}.
                  </p>
                  {i.stats.lastError && <p class="error">Last error: {i.stats.lastError}</p>}
                  <div class="actions">
                    <button type="button" aria-expanded={editing === i.id} onClick={() => setEditing(editing === i.id ? null : i.id)}>
                      Edit<span class="sr-only"> {nameOf(i.type)}</span>
                    </button>
                    <button type="button" onClick={() => change(() => api("PATCH", `${base}/${encodeURIComponent(i.id)}`, { enabled: !i.enabled }))}>
                      {i.enabled ? "Disable" : "Enable"}
                      <span class="sr-only"> {nameOf(i.type)}</span>
                    </button>
                    <button type="button" class="danger" onClick={() => setRemoving(i)}>
                      Delete<span class="sr-only"> {nameOf(i.type)}</span>
                    </button>
                  </div>
                  {editing === i.id && (
                    <SchemaForm
                      label={`Edit ${nameOf(i.type)}`}
                      schema={types.find((t) => t.type === i.type)?.configSchema ?? {}}
                      config={i.config}
                      submitLabel="Save integration"
                      onSubmit={async (config) => {
                        await api("PATCH", `${base}/${encodeURIComponent(i.id)}`, { config });
                        setEditing(null);
                        await load();
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          )}
          <Create types={types} base={base} onDone={() => void load()} />
        </>
      )}
      {removing && (
        <Confirm
          title={`Delete the ${nameOf(removing.type)} integration?`}
          confirm="Delete"
          onConfirm={() => {
            const i = removing;
            setRemoving(null);
            void change(() => api("DELETE", `${base}/${encodeURIComponent(i.id)}`));
          }}
          onCancel={() => setRemoving(null)}
        >
          <p>Nothing more is sent to it; its configuration is deleted.</p>
        </Confirm>
      )}
    </div>
  );
}
