/**
 * Login users (`/admin/users`, admins only): list, create (e-mail, password, role), change a
 * role, set a new password (which ends the user's sessions), delete with confirmation; all
 * through `/v1/users`. The server keeps the last admin (409, its message shown).
 */
import { useEffect, useState } from "preact/hooks";
import { api, type Role, type User } from "../api";
import { Confirm, ErrorBanner, Field, Loading, Select } from "../ui";
import { AdminOnly, SubmitForm, useDeletion, useSubmit } from "./keys";

const ROLES: [string, string][] = [
  ["viewer", "viewer: reads everything"],
  ["editor", "editor: flags, states, webhooks, API keys"],
  ["admin", "admin: everything"],
];

/** One user's change: the role, or a new password. */
function EditUser({ user, kind, onDone, onCancel }: { user: User; kind: "role" | "password"; onDone: () => void; onCancel: () => void }) {
  const [role, setRole] = useState<string>(user.role);
  const [password, setPassword] = useState("");
  const save = useSubmit(() => api("PATCH", `/v1/users/${user.id}`, kind === "role" ? { role } : { password }), onDone);
  return (
    <SubmitForm legend={kind === "role" ? `Role of ${user.email}` : `New password for ${user.email}`} submit={kind === "role" ? "Save role" : "Set password"} form={save} onCancel={onCancel}>
      {kind === "role" ? (
        <Select label="Role" value={role} options={ROLES} onChange={setRole} error={save.fields.role} />
      ) : (
        <Field label="New password" type="password" name="new-password" autocomplete="new-password" value={password} onInput={setPassword} error={save.fields.password} hint="At least 10 characters. The user's current sessions end." required />
      )}
    </SubmitForm>
  );
}

export function UsersPage({ role, me }: { role: Role; me: string }) {
  const [users, setUsers] = useState<User[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<{ id: string; kind: "role" | "password" } | null>(null);
  const [notice, setNotice] = useState("");
  const [form, setForm] = useState({ email: "", password: "", role: "viewer" });
  const load = () =>
    api<{ users: User[] }>("GET", "/v1/users").then(
      (r) => setUsers(r.users),
      (e) => setError(e),
    );
  useEffect(() => {
    if (role === "admin") void load();
  }, [role]);
  const del = useDeletion<User>((id) => `/v1/users/${id}`, load, setError);
  const create = useSubmit(
    () => api<User>("POST", "/v1/users", form),
    (u) => {
      setNotice(`User ${u.email} created.`);
      setCreating(false);
      setForm({ email: "", password: "", role: "viewer" });
      void load();
    },
  );
  if (role !== "admin") return <AdminOnly title="Users" />;
  const edited = (message: string) => {
    setEditing(null);
    setNotice(message);
    void load();
  };
  return (
    <>
      <div class="page-head">
        <h1>Users</h1>
        {!creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New user
          </button>
        )}
      </div>
      <p role="status" class="muted">
        {notice}
      </p>
      {creating && (
        <SubmitForm legend="New user" submit="Create user" form={create} onCancel={() => setCreating(false)} wide>
          <Field label="E-mail" type="email" name="email" autocomplete="off" value={form.email} onInput={(email) => setForm({ ...form, email })} error={create.fields.email} required />
          <Field label="Password" type="password" name="password" autocomplete="new-password" value={form.password} onInput={(password) => setForm({ ...form, password })} error={create.fields.password} hint="At least 10 characters" required />
          <Select label="Role" value={form.role} options={ROLES} onChange={(r) => setForm({ ...form, role: r })} error={create.fields.role} />
        </SubmitForm>
      )}
      <ErrorBanner error={error} />
      {users === null ? (
        !error && <Loading />
      ) : (
        <ul class="cards users" data-ready="">
          {users.map((u) => (
            <li key={u.id} class="card" data-user={u.email}>
              <div class="card-head">
                <h2>
                  {u.email} <span class="role">{u.role}</span>
                  {u.id === me && <span class="muted"> (you)</span>}
                </h2>
                <div class="actions">
                  <button type="button" aria-expanded={editing?.id === u.id && editing.kind === "role"} onClick={() => setEditing({ id: u.id, kind: "role" })}>
                    Change role<span class="sr-only"> of {u.email}</span>
                  </button>
                  <button type="button" aria-expanded={editing?.id === u.id && editing.kind === "password"} onClick={() => setEditing({ id: u.id, kind: "password" })}>
                    Reset password<span class="sr-only"> of {u.email}</span>
                  </button>
                  <button type="button" class="danger" onClick={() => del.setDeleting(u)}>
                    Delete<span class="sr-only"> user {u.email}</span>
                  </button>
                </div>
              </div>
              {editing?.id === u.id && (
                <EditUser
                  key={editing.kind}
                  user={u}
                  kind={editing.kind}
                  onDone={() => edited(editing.kind === "role" ? `Role of ${u.email} changed.` : `Password of ${u.email} changed; their sessions ended.`)}
                  onCancel={() => setEditing(null)}
                />
              )}
            </li>
          ))}
        </ul>
      )}
      {del.deleting && (
        <Confirm title={`Delete user ${del.deleting.email}?`} confirm="Delete" busy={del.busy} onConfirm={del.confirm} onCancel={() => del.setDeleting(null)}>
          <p>Their sessions end at once. The last admin cannot be deleted. This cannot be undone.</p>
        </Confirm>
      )}
    </>
  );
}
