/**
 * A flag per environment: its state (on/off) and rollout, saved with `If-Match: <the state's
 * ETag>`; its schedules (list, create one, cancel a pending one); its insights (evaluations by
 * variant over the last 7 days, a plain SVG chart with the figures in a table beside it).
 * Changes seen on the project's stream (flag.tsx) read a state again in place, unless its form
 * holds unsaved edits (then a notice says who changed it), and the schedules again.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { SaveInFlight } from "../live";
import { api, ApiError, tagged, type Environment, type FlagState } from "../api";
import { ErrorBanner, Field, Loading, Select } from "../ui";
import { changedBy, touches, type Flag, type SeenChange } from "./flag";

interface Schedule {
  id: string;
  environment: string;
  at: string;
  state: { enabled?: boolean; rolloutPercentage?: number | null };
  status: string;
  createdBy: { label: string };
}
interface Point {
  start: string;
  total: number;
  byVariant: Record<string, number>;
}

/** An ISO date-time as a `datetime-local` value in the browser's zone (seconds kept). */
export function toLocalInput(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
}

const rolloutText = (s: FlagState) => (s.rolloutPercentage === null ? "" : String(s.rolloutPercentage));
const percent = (text: string): number | null => (text.trim() === "" ? null : Number(text));
const stateText = (s: Schedule["state"]) =>
  [s.enabled === undefined ? "" : s.enabled ? "on" : "off", s.rolloutPercentage === undefined ? "" : s.rolloutPercentage === null ? "all users" : `${s.rolloutPercentage} %`].filter(Boolean).join(", ");

function StateEditor({ path, env, writer, change }: { path: string; env: Environment; writer: boolean; change: SeenChange }) {
  const [state, setState] = useState<{ data: FlagState; etag: string | null } | null>(null);
  const [enabled, setEnabled] = useState(false);
  const [rollout, setRollout] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  const [notice, setNotice] = useState("");
  const shown = useRef<string | null>(null);
  const saving = useRef(new SaveInFlight()).current;
  const show = (r: { data: FlagState; etag: string | null }) => {
    setNotice("");
    shown.current = r.etag;
    setState(r);
    setEnabled(r.data.enabled);
    setRollout(rolloutText(r.data));
  };
  const load = () => tagged<FlagState>("GET", `${path}/states/${env.slug}`).then(show, setError);
  useEffect(() => void load(), [path, env.slug]);
  // Someone changed this state: shown in place, unless the form holds unsaved edits.
  useEffect(() => {
    if (!touches(change, "flag_state", env.slug) || !state) return;
    const edited = writer && (enabled !== state.data.enabled || rollout !== rolloutText(state.data));
    saving
      .settled()
      .then(() => tagged<FlagState>("GET", `${path}/states/${env.slug}`))
      .then((r) => {
        if (r.etag !== null && r.etag === shown.current) return; // one's own save, or nothing new
        if (edited) setNotice(changedBy(change, `this flag in ${env.name}`));
        else show(r);
      }, setError);
  }, [change.seq]);
  if (!state) return error ? <ErrorBanner error={error} /> : <Loading />;
  const fields = error instanceof ApiError ? error.fields() : {};
  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      show(await saving.run(tagged<FlagState>("PUT", `${path}/states/${env.slug}`, { enabled, rolloutPercentage: percent(rollout) }, state.etag)));
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  if (!writer) {
    return (
      <p data-state={state.data.enabled ? "on" : "off"}>
        <span class={state.data.enabled ? "state on" : "state off"}>{state.data.enabled ? "On" : "Off"}</span>
        {state.data.rolloutPercentage !== null && <span class="rollout">{state.data.rolloutPercentage} % rollout</span>}
      </p>
    );
  }
  return (
    <form class="state-form" onSubmit={save} noValidate aria-label={`State in ${env.name}`}>
      <label class="check">
        <input type="checkbox" name="enabled" checked={enabled} onChange={(e) => setEnabled((e.target as HTMLInputElement).checked)} /> On in {env.name}
      </label>
      <Field label={`Rollout in ${env.name} (%)`} name="rolloutPercentage" type="number" value={rollout} onInput={setRollout} error={fields.rolloutPercentage} hint="0 to 100; empty: all users" />
      <ErrorBanner error={error} shown={Object.keys(fields)} />
      {notice && (
        <p class="banner info remote-change" role="status">
          {notice}
        </p>
      )}
      {((error instanceof ApiError && error.status === 412) || notice) && (
        <button type="button" onClick={() => void load().then(() => setError(null))}>
          Reload the state
        </button>
      )}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Save {env.name}
        </button>
        <span role="status" class="muted">
          {saved ? "Saved." : ""}
        </span>
      </div>
    </form>
  );
}

function Schedules({ path, env, writer, all, onChange }: { path: string; env: Environment; writer: boolean; all: Schedule[]; onChange: () => void }) {
  const [at, setAt] = useState("");
  const [enabled, setEnabled] = useState("keep");
  const [rollout, setRollout] = useState("");
  const [error, setError] = useState<unknown>(null);
  const mine = all.filter((s) => s.environment === env.slug);
  const fields = error instanceof ApiError ? error.fields() : {};
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const state: Schedule["state"] = {};
    if (enabled !== "keep") state.enabled = enabled === "on";
    if (rollout.trim() !== "") state.rolloutPercentage = rollout.trim() === "all" ? null : Number(rollout);
    try {
      const when = new Date(at);
      await api("POST", `${path}/schedules`, { environment: env.slug, at: Number.isNaN(when.getTime()) ? at : when.toISOString(), state });
      setAt("");
      setRollout("");
      onChange();
    } catch (err) {
      setError(err);
    }
  };
  const cancel = async (s: Schedule) => {
    try {
      await api("DELETE", `${path}/schedules/${s.id}`);
      onChange();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <h3>Schedules</h3>
      {mine.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul class="schedules">
          {mine.map((s) => (
            <li key={s.id}>
              <time dateTime={s.at}>{toLocalInput(s.at).replace("T", " ")}</time>: {stateText(s.state)} <span class="badge">{s.status}</span> <span class="muted">by {s.createdBy.label}</span>
              {writer && s.status === "pending" && (
                <button type="button" onClick={() => cancel(s)}>
                  Cancel<span class="sr-only"> the schedule at {s.at}</span>
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {writer && (
        <form class="schedule-form" onSubmit={create} noValidate aria-label={`Schedule a change in ${env.name}`}>
          <Field label="At (your local time)" type="datetime-local" value={at} onInput={setAt} error={fields.at} />
          <Select label="State then" value={enabled} options={[["keep", "Keep on/off"], ["on", "On"], ["off", "Off"]]} onChange={setEnabled} error={fields["state.enabled"]} />
          <Field label="Rollout then (%)" value={rollout} onInput={setRollout} error={fields["state.rolloutPercentage"] ?? fields.state} hint="Empty: keep; all: all users" />
          <ErrorBanner error={error} shown={Object.keys(fields)} />
          <button type="submit">Schedule<span class="sr-only"> a change in {env.name}</span></button>
        </form>
      )}
    </>
  );
}

const COLORS = ["#0a5bd3", "#1a7f37", "#b35900", "#8250df", "#b42318", "#57606a"];

/** Evaluations by variant, a bar a day, stacked; the same figures in a table for screen readers. */
function Insights({ path, env }: { path: string; env: Environment }) {
  const [points, setPoints] = useState<Point[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const from = new Date(Date.now() - 6 * 86_400_000).toISOString();
    api<{ points: Point[] }>("GET", `${path}/insights?environment=${env.slug}&interval=day&from=${encodeURIComponent(from)}`).then((r) => setPoints(r.points), setError);
  }, [path, env.slug]);
  if (error) return <ErrorBanner error={error} />;
  if (!points) return <Loading />;
  const variants = [...new Set(points.flatMap((p) => Object.keys(p.byVariant)))].sort();
  const max = Math.max(1, ...points.map((p) => p.total));
  const W = 280;
  const H = 80;
  const bw = W / points.length;
  const total = points.reduce((s, p) => s + p.total, 0);
  return (
    <>
      <h3>Evaluations, last 7 days</h3>
      {total === 0 ? (
        <p class="muted">No evaluations.</p>
      ) : (
        <div class="insights">
          <svg viewBox={`0 0 ${W} ${H}`} width={W} height={H} aria-hidden="true" focusable="false">
            {points.map((p, i) => {
              let y = H;
              return variants.map((v, k) => {
                const h = ((p.byVariant[v] ?? 0) / max) * H;
                y -= h;
                return h > 0 ? <rect key={`${i}-${v}`} x={i * bw + 2} y={y} width={bw - 4} height={h} fill={COLORS[k % COLORS.length]} /> : null;
              });
            })}
          </svg>
          <table class="mini">
            <caption class="sr-only">Evaluations in {env.name} by day and variant</caption>
            <thead>
              <tr>
                <th scope="col">Day</th>
                {variants.map((v, k) => (
                  <th scope="col" key={v}>
                    <span class="swatch" style={{ background: COLORS[k % COLORS.length] }} aria-hidden="true" /> {v}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {points
                .filter((p) => p.total > 0)
                .map((p) => (
                  <tr key={p.start}>
                    <th scope="row">{p.start.slice(0, 10)}</th>
                    {variants.map((v) => (
                      <td key={v}>{p.byVariant[v] ?? 0}</td>
                    ))}
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

export function Environments({ slug, flag, envs, writer, change }: { slug: string; flag: Flag; envs: Environment[]; writer: boolean; change: SeenChange }) {
  const path = `/v1/projects/${encodeURIComponent(slug)}/flags/${encodeURIComponent(flag.key)}`;
  const [schedules, setSchedules] = useState<Schedule[]>([]);
  const loadSchedules = () => void api<{ schedules: Schedule[] }>("GET", `${path}/schedules`).then((r) => setSchedules(r.schedules), () => setSchedules([]));
  useEffect(loadSchedules, [path]);
  useEffect(() => {
    if (touches(change, "schedule")) loadSchedules();
  }, [change.seq]);
  return (
    <section aria-labelledby="envs-title">
      <h2 id="envs-title">Environments</h2>
      <div class="env-cards">
        {envs.map((env) => (
          <section class="card" key={env.id} data-env={env.slug} aria-labelledby={`env-${env.slug}`}>
            <h3 id={`env-${env.slug}`} class="env-title">
              {env.name}
            </h3>
            <StateEditor path={path} env={env} writer={writer} change={change} />
            <Schedules path={path} env={env} writer={writer} all={schedules} onChange={loadSchedules} />
            <Insights path={path} env={env} />
          </section>
        ))}
      </div>
    </section>
  );
}
