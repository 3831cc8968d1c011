/** Projects and their environments: list; admins create, rename and delete (with confirmation). */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, type Environment, type Project, type Role } from "../api";
import { Confirm, ErrorBanner, Field, Loading } from "../ui";

type Target = { kind: "project"; project: Project } | { kind: "environment"; project: Project; env: Environment };

/** A small inline form: one or two fields, saved through `save`; field errors from the API. */
function InlineForm(props: { legend: string; fields: { name: string; label: string; initial?: string; hint?: string }[]; submit: string; save: (values: Record<string, string>) => Promise<unknown>; onDone: () => void; onCancel?: () => void }) {
  const [values, setValues] = useState<Record<string, string>>(Object.fromEntries(props.fields.map((f) => [f.name, f.initial ?? ""])));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fieldErrors = error instanceof ApiError ? error.fields() : {};
  return (
    <form
      class="inline-form"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          await props.save(values);
          props.onDone();
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <fieldset>
        <legend>{props.legend}</legend>
        {props.fields.map((f) => (
          <Field key={f.name} label={f.label} hint={f.hint} value={values[f.name]!} onInput={(v) => setValues({ ...values, [f.name]: v })} error={fieldErrors[f.name]} />
        ))}
        <ErrorBanner error={error} shown={Object.keys(fieldErrors)} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {props.submit}
          </button>
          {props.onCancel && (
            <button type="button" onClick={props.onCancel}>
              Cancel
            </button>
          )}
        </div>
      </fieldset>
    </form>
  );
}

const SLUG_HINT = "Lower-case letters, digits and dashes; used in URLs and API paths";

export function ProjectsPage({ role }: { role: Role }) {
  const [projects, setProjects] = useState<Project[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const [addingEnv, setAddingEnv] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<Target | null>(null);
  const [busy, setBusy] = useState(false);
  const load = () =>
    api<{ projects: Project[] }>("GET", "/v1/projects").then(
      (r) => setProjects(r.projects),
      (e) => setError(e),
    );
  useEffect(() => {
    void load();
  }, []);
  const admin = can(role, "projects");
  const remove = async () => {
    if (!deleting) return;
    setBusy(true);
    try {
      if (deleting.kind === "project") await api("DELETE", `/v1/projects/${deleting.project.slug}`);
      else await api("DELETE", `/v1/projects/${deleting.project.slug}/environments/${deleting.env.slug}`);
      setDeleting(null);
      setError(null);
      await load();
    } catch (e) {
      setDeleting(null);
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <div class="page-head">
        <h1>Projects</h1>
        {admin && !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New project
          </button>
        )}
      </div>
      {creating && (
        <InlineForm
          legend="New project"
          fields={[
            { name: "slug", label: "Slug", hint: SLUG_HINT },
            { name: "name", label: "Name" },
          ]}
          submit="Create project"
          save={(v) => api("POST", "/v1/projects", v)}
          onDone={() => {
            setCreating(false);
            void load();
          }}
          onCancel={() => setCreating(false)}
        />
      )}
      <ErrorBanner error={error} />
      {projects === null ? (
        <Loading />
      ) : (
        <ul class="cards">
          {projects.map((p) => (
            <li key={p.id} class="card">
              <div class="card-head">
                <h2>
                  <a href={`/projects/${p.slug}/flags`}>{p.name}</a> <code>{p.slug}</code>
                </h2>
                {admin && (
                  <div class="actions">
                    <button type="button" onClick={() => setEditing(editing === p.id ? null : p.id)} aria-expanded={editing === p.id}>
                      Rename<span class="sr-only"> project {p.name}</span>
                    </button>
                    <button type="button" class="danger" onClick={() => setDeleting({ kind: "project", project: p })}>
                      Delete<span class="sr-only"> project {p.name}</span>
                    </button>
                  </div>
                )}
              </div>
              {editing === p.id && (
                <InlineForm
                  legend={`Rename ${p.name}`}
                  fields={[{ name: "name", label: "Name", initial: p.name }]}
                  submit="Save"
                  save={(v) => api("PATCH", `/v1/projects/${p.slug}`, v)}
                  onDone={() => {
                    setEditing(null);
                    void load();
                  }}
                  onCancel={() => setEditing(null)}
                />
              )}
              <h3>Environments</h3>
              <ul class="envs">
                {p.environments.map((env) => (
                  <li key={env.id}>
                    {editing === env.id ? (
                      <InlineForm
                        legend={`Rename ${env.name}`}
                        fields={[{ name: "name", label: "Name", initial: env.name }]}
                        submit="Save"
                        save={(v) => api("PATCH", `/v1/projects/${p.slug}/environments/${env.slug}`, v)}
                        onDone={() => {
                          setEditing(null);
                          void load();
                        }}
                        onCancel={() => setEditing(null)}
                      />
                    ) : (
                      <>
                        <span>
                          {env.name} <code>{env.slug}</code>
                        </span>
                        {can(role, "environments") && (
                          <span class="actions">
                            <button type="button" onClick={() => setEditing(env.id)}>
                              Rename<span class="sr-only"> environment {env.name}</span>
                            </button>
                            <button type="button" class="danger" onClick={() => setDeleting({ kind: "environment", project: p, env })}>
                              Delete<span class="sr-only"> environment {env.name}</span>
                            </button>
                          </span>
                        )}
                      </>
                    )}
                  </li>
                ))}
              </ul>
              {can(role, "environments") &&
                (addingEnv === p.id ? (
                  <InlineForm
                    legend={`New environment in ${p.name}`}
                    fields={[
                      { name: "slug", label: "Slug", hint: SLUG_HINT },
                      { name: "name", label: "Name" },
                    ]}
                    submit="Add environment"
                    save={(v) => api("POST", `/v1/projects/${p.slug}/environments`, v)}
                    onDone={() => {
                      setAddingEnv(null);
                      void load();
                    }}
                    onCancel={() => setAddingEnv(null)}
                  />
                ) : (
                  <button type="button" onClick={() => setAddingEnv(p.id)}>
                    Add environment<span class="sr-only"> to {p.name}</span>
                  </button>
                ))}
            </li>
          ))}
        </ul>
      )}
      {deleting && (
        <Confirm
          title={deleting.kind === "project" ? `Delete project ${deleting.project.name}?` : `Delete environment ${deleting.env.name}?`}
          confirm="Delete"
          busy={busy}
          onConfirm={remove}
          onCancel={() => setDeleting(null)}
        >
          <p>
            {deleting.kind === "project"
              ? "Its flags, segments, environments, API keys and webhooks are deleted with it. This cannot be undone."
              : "The flags' states in it and its API keys are deleted with it. This cannot be undone."}
          </p>
        </Confirm>
      )}
    </>
  );
}
