/**
 * One flag: its definition (name, description, variants with weights, the rules, prerequisites),
 * saved in one `PATCH` with `If-Match: <the flag's ETag>` (a 412 says who changed it since), and
 * per environment its state and rollout (`PUT …/states/{env}` with the state's own ETag), its
 * schedules and its insights (flag-envs.tsx). Validation errors, the server's (`details[].path`)
 * and the page's own checks before saving, are shown at the field they name. A viewer sees the
 * same page read-only: no button, no form.
 *
 * Live: the project's change stream (`useProjectChanges`) tells the page when someone changes
 * this flag, its states or its schedules. A part the user has not edited is read again in place;
 * one with unsaved edits keeps them and says "<who> changed this flag; reload to see". An entry of
 * one's own save finds the version already shown (the same ETag) and does nothing.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, can, tagged, type Environment, type Project, type Role } from "../api";
import { LIVE_TEXT, SaveInFlight, useProjectChanges, type ChangeEntry } from "../live";
import { OPERATOR_VALUE_TYPES, OPERATORS, SEGMENT_OPERATORS, VALUE_OPTIONAL, type Operator } from "../../src/evaluation/types";
import { Control, ErrorBanner, Field, Loading, Select } from "../ui";
import { VariantsFieldset, weightProblem } from "./new-flag";
import { Environments, toLocalInput } from "./flag-envs";

type Scalar = string | number | boolean;
export interface Condition {
  attribute: string;
  operator: Operator;
  value?: Scalar | Scalar[];
}
interface Rule {
  id?: string;
  name: string;
  conditions: Condition[];
  enabled: boolean;
  variant: string | null;
}
interface Variant {
  key: string;
  name?: string;
  description?: string;
  weight?: number;
}
interface Prerequisite {
  flagKey: string;
  variant?: string;
}
export interface Flag {
  key: string;
  name: string;
  description?: string;
  variants: Variant[];
  rules: Rule[];
  prerequisites?: Prerequisite[];
}

type Kind = "string" | "number" | "boolean";
/** A condition as edited: its value as typed, and the type it is sent as. */
export interface CondDraft {
  attribute: string;
  operator: Operator;
  kind: Kind;
  text: string;
}
interface RuleDraft extends Omit<Rule, "conditions"> {
  conditions: CondDraft[];
}
interface VariantDraft extends Omit<Variant, "weight"> {
  weight: string;
}

const LIST_OPERATORS: ReadonlySet<Operator> = new Set(["in", "not_in"]);
const TIME_OPERATORS: ReadonlySet<Operator> = new Set(["before", "after"]);
const HINTS: Partial<Record<Operator, string>> = {
  semver_equals: "A semantic version, e.g. 1.2.3",
  semver_greater_than: "A semantic version, e.g. 1.2.3",
  semver_less_than: "A semantic version, e.g. 1.2.3",
  matches: "A regular expression in RE2 syntax, searched anywhere (anchor with ^ and $)",
  before: "Your local time; stored as UTC",
  after: "Your local time; stored as UTC",
};

/** The types an operator's value may have (an `in` list: the type of its items). */
const kindsOf = (op: Operator): Kind[] => (LIST_OPERATORS.has(op) ? ["string", "number", "boolean"] : (OPERATOR_VALUE_TYPES[op] as readonly string[]).filter((k): k is Kind => k !== "array"));
const KIND_LABEL: Record<Kind, string> = { string: "Text", number: "Number", boolean: "Boolean" };

export function draftOf(c: Condition): CondDraft {
  const v = c.value;
  if (Array.isArray(v)) return { attribute: c.attribute, operator: c.operator, kind: v.length === 0 ? "string" : (typeof v[0] as Kind), text: v.join("\n") };
  if (TIME_OPERATORS.has(c.operator) && typeof v === "string") return { attribute: c.attribute, operator: c.operator, kind: "string", text: toLocalInput(v) };
  return { attribute: c.attribute, operator: c.operator, kind: v === undefined ? kindsOf(c.operator)[0]! : (typeof v as Kind), text: v === undefined ? "" : String(v) };
}

const scalar = (text: string, kind: Kind): Scalar | undefined => {
  if (kind === "boolean") return text === "true" ? true : text === "false" ? false : undefined;
  if (kind === "number") return text.trim() === "" || !Number.isFinite(Number(text)) ? undefined : Number(text);
  return text;
};

/** A drafted condition as the API takes it; a problem the page can see goes to `errors[path]`. */
export function conditionOf(d: CondDraft, path: string, errors: Record<string, string>): Condition {
  const c: Condition = { attribute: d.attribute, operator: d.operator };
  if (VALUE_OPTIONAL.has(d.operator)) return c;
  if (LIST_OPERATORS.has(d.operator)) {
    const items = d.text.split(/[\n,]/).map((s) => s.trim()).filter((s) => s !== "").map((s) => scalar(s, d.kind));
    if (items.some((i) => i === undefined)) errors[`${path}.value`] = `Every item must be a ${d.kind}`;
    c.value = items.filter((i): i is Scalar => i !== undefined);
    return c;
  }
  if (TIME_OPERATORS.has(d.operator)) {
    const t = new Date(d.text);
    if (d.text === "" || Number.isNaN(t.getTime())) errors[`${path}.value`] = "Pick a date and time";
    else c.value = t.toISOString();
    return c;
  }
  const v = scalar(d.text, d.kind);
  if (v === undefined) errors[`${path}.value`] = d.kind === "number" ? "Enter a number" : "Pick true or false";
  else c.value = v;
  return c;
}

const move = <T,>(xs: T[], i: number, by: number): T[] => {
  const j = i + by;
  if (j < 0 || j >= xs.length) return xs;
  const out = xs.slice();
  [out[i], out[j]] = [out[j]!, out[i]!];
  return out;
};
const replace = <T,>(xs: T[], i: number, patch: Partial<T>): T[] => xs.map((x, j) => (j === i ? { ...x, ...patch } : x));

export function ConditionEditor(props: { c: CondDraft; label: string; path: string; errors: Record<string, string>; segments: [string, string][]; readOnly: boolean; onChange: (c: CondDraft) => void; onRemove: () => void }) {
  const { c, label, path, errors, readOnly } = props;
  const set = (patch: Partial<CondDraft>) => props.onChange({ ...c, ...patch });
  const setOperator = (op: Operator) => {
    const kinds = kindsOf(op);
    const next: Partial<CondDraft> = { operator: op, kind: kinds.includes(c.kind) ? c.kind : kinds[0]! };
    if (SEGMENT_OPERATORS.has(op)) next.attribute = "userId";
    if (SEGMENT_OPERATORS.has(op) !== SEGMENT_OPERATORS.has(c.operator) || TIME_OPERATORS.has(op) !== TIME_OPERATORS.has(c.operator)) next.text = "";
    set(next);
  };
  const kinds = kindsOf(c.operator);
  const error = errors[`${path}.value`];
  const segment = SEGMENT_OPERATORS.has(c.operator);
  let value: ComponentChildren = null;
  if (segment) {
    value = <Select label={`${label} segment`} value={c.text} disabled={readOnly} options={[["", "Pick a segment"], ...props.segments]} onChange={(v) => set({ text: v })} error={error} />;
  } else if (c.kind === "boolean" && !LIST_OPERATORS.has(c.operator) && !VALUE_OPTIONAL.has(c.operator)) {
    value = <Select label={`${label} value`} value={c.text} disabled={readOnly} options={[["", "Pick one"], ["true", "true"], ["false", "false"]]} onChange={(v) => set({ text: v })} error={error} />;
  } else if (LIST_OPERATORS.has(c.operator)) {
    value = (
      <Control label={`${label} values`} hint="One per line (or comma-separated)" error={error}>
        {(id, d) => <textarea id={id} rows={3} readOnly={readOnly} value={c.text} aria-invalid={error ? "true" : undefined} aria-describedby={d} onInput={(e) => set({ text: (e.target as HTMLTextAreaElement).value })} />}
      </Control>
    );
  } else if (!VALUE_OPTIONAL.has(c.operator)) {
    const type = TIME_OPERATORS.has(c.operator) ? "datetime-local" : c.kind === "number" ? "number" : "text";
    value = (
      <Control label={`${label} value`} hint={HINTS[c.operator]} error={error}>
        {(id, d) => (
          <input id={id} type={type as "text"} step={type === "datetime-local" ? 1 : "any"} readOnly={readOnly} value={c.text} aria-invalid={error ? "true" : undefined} aria-describedby={d} onInput={(e) => set({ text: (e.target as HTMLInputElement).value })} />
        )}
      </Control>
    );
  }
  return (
    <div class="condition">
      <Field label={`${label} attribute`} value={c.attribute} onInput={(v) => set({ attribute: v })} error={errors[`${path}.attribute`]} readOnly={readOnly || segment} />
      <Select label={`${label} operator`} value={c.operator} disabled={readOnly} options={OPERATORS.map((o) => [o, o.replaceAll("_", " ")])} onChange={(v) => setOperator(v as Operator)} error={errors[`${path}.operator`]} />
      {kinds.length > 1 && (
        <Select label={`${label} ${LIST_OPERATORS.has(c.operator) ? "item type" : "value type"}`} value={c.kind} disabled={readOnly} options={kinds.map((k) => [k, KIND_LABEL[k]])} onChange={(v) => set({ kind: v as Kind, text: v === "boolean" && !LIST_OPERATORS.has(c.operator) ? "" : c.text })} />
      )}
      {value}
      {!readOnly && (
        <button type="button" class="danger" onClick={props.onRemove}>
          Remove<span class="sr-only"> {label.toLowerCase()}</span>
        </button>
      )}
    </div>
  );
}

function RuleEditor(props: {
  rule: RuleDraft;
  index: number;
  count: number;
  errors: Record<string, string>;
  variants: string[];
  segments: [string, string][];
  readOnly: boolean;
  onChange: (r: RuleDraft) => void;
  onMove: (by: number) => void;
  onRemove: () => void;
}) {
  const { rule, index: i, errors, readOnly } = props;
  const n = i + 1;
  const path = `rules[${i}]`;
  const set = (patch: Partial<RuleDraft>) => props.onChange({ ...rule, ...patch });
  return (
    <li class={rule.enabled ? "rule" : "rule disabled"} data-rule={n}>
      <div class="rule-head">
        <h3>
          Rule {n}
          {rule.name ? `: ${rule.name}` : ""}
          {!rule.enabled && <span class="badge">disabled</span>}
        </h3>
        {!readOnly && (
          <div class="actions">
            <button type="button" disabled={i === 0} onClick={() => props.onMove(-1)}>
              Up<span class="sr-only"> (move rule {n} up)</span>
            </button>
            <button type="button" disabled={i === props.count - 1} onClick={() => props.onMove(1)}>
              Down<span class="sr-only"> (move rule {n} down)</span>
            </button>
            <label class="check">
              <input type="checkbox" checked={rule.enabled} onChange={(e) => set({ enabled: (e.target as HTMLInputElement).checked })} /> Enabled<span class="sr-only"> rule {n}</span>
            </label>
            <button type="button" class="danger" onClick={props.onRemove}>
              Delete<span class="sr-only"> rule {n}</span>
            </button>
          </div>
        )}
      </div>
      <Field label={`Rule ${n} name`} value={rule.name} onInput={(v) => set({ name: v })} error={errors[`${path}.name`]} readOnly={readOnly} />
      {errors[path] && <p class="error">{errors[path]}</p>}
      {rule.conditions.length === 0 && <p class="hint">No condition: matches everyone.</p>}
      {rule.conditions.map((c, j) => (
        <ConditionEditor
          key={j}
          c={c}
          label={`Rule ${n} condition ${j + 1}`}
          path={`${path}.conditions[${j}]`}
          errors={errors}
          segments={props.segments}
          readOnly={readOnly}
          onChange={(next) => set({ conditions: rule.conditions.map((x, k) => (k === j ? next : x)) })}
          onRemove={() => set({ conditions: rule.conditions.filter((_, k) => k !== j) })}
        />
      ))}
      {!readOnly && (
        <button type="button" onClick={() => set({ conditions: [...rule.conditions, { attribute: "", operator: "equals", kind: "string", text: "" }] })}>
          Add condition<span class="sr-only"> to rule {n}</span>
        </button>
      )}
      <Select
        label={`Rule ${n} serves`}
        value={rule.variant ?? ""}
        disabled={readOnly}
        options={[["", props.variants.length ? "The weighted variants (no fixed variant)" : "On (no variant)"], ...props.variants.map((v): [string, string] => [v, `Variant ${v}`])]}
        onChange={(v) => set({ variant: v === "" ? null : v })}
        error={errors[`${path}.variant`]}
      />
    </li>
  );
}

interface Draft {
  name: string;
  description: string;
  variants: VariantDraft[];
  rules: RuleDraft[];
  prerequisites: { flagKey: string; variant: string }[];
}

const draftOfFlag = (f: Flag): Draft => ({
  name: f.name,
  description: f.description ?? "",
  variants: f.variants.map((v) => ({ ...v, weight: v.weight === undefined ? "" : String(v.weight) })),
  rules: f.rules.map((r) => ({ ...r, conditions: r.conditions.map(draftOf) })),
  prerequisites: (f.prerequisites ?? []).map((p) => ({ flagKey: p.flagKey, variant: p.variant ?? "" })),
});

/** The PATCH body of a draft, and the problems the page sees before sending it. */
function patchOf(d: Draft): { body: Record<string, unknown>; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const body = {
    name: d.name,
    description: d.description.trim() === "" ? null : d.description,
    variants: d.variants.map(({ weight, ...v }) => (weight.trim() === "" ? v : { ...v, weight: Number(weight) })),
    rules: d.rules.map((r, i) => ({ ...r, conditions: r.conditions.map((c, j) => conditionOf(c, `rules[${i}].conditions[${j}]`, errors)) })),
    prerequisites: d.prerequisites.length === 0 ? null : d.prerequisites.map((p) => (p.variant ? p : { flagKey: p.flagKey })),
  };
  return { body, errors };
}

/**
 * A change to this flag seen on the project's stream, numbered so that each one is an effect's
 * dependency; `entry` null: the stream started afresh, anything may have changed.
 */
export interface SeenChange {
  seq: number;
  entry: ChangeEntry | null;
}
/** The change-log resources the flag page shows, by the flag's key. */
const FLAG_RESOURCES = new Set(["flag", "flag_state", "schedule"]);
/** Whether a seen change may touch this resource type (and environment, for a state). */
export const touches = (c: SeenChange, type: string, environment?: string) =>
  c.seq > 0 && (c.entry === null || (c.entry.resource.type === type && (environment === undefined || c.entry.environment === environment)));
/** The notice for a change someone made while this page holds unsaved edits. */
export const changedBy = (c: SeenChange, what = "this flag") => `${c.entry?.actor.label ?? "Someone"} changed ${what}; reload to see`;

/** The flag's definition, edited as a whole and saved with `If-Match`. */
function Definition(props: { slug: string; flag: Flag; etag: string | null; writer: boolean; onSaved: (f: Flag, etag: string | null) => void; onReload: () => void; dirty: { current: boolean }; saving: SaveInFlight }) {
  const { slug, writer } = props;
  const readOnly = !writer;
  const [d, setD] = useState<Draft>(() => draftOfFlag(props.flag));
  const [error, setError] = useState<unknown>(null);
  const [local, setLocal] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  const [segments, setSegments] = useState<[string, string][]>([]);
  const [flags, setFlags] = useState<[string, string][]>([]);
  const base = `/v1/projects/${encodeURIComponent(slug)}`;
  useEffect(() => setD(draftOfFlag(props.flag)), [props.flag]);
  useEffect(() => {
    api<{ segments: { key: string; name: string }[] }>("GET", `${base}/segments?perPage=100`).then((r) => setSegments(r.segments.map((s) => [s.key, `${s.name} (${s.key})`])), setError);
    api<{ flags: { key: string; name: string }[] }>("GET", `${base}/flags?perPage=100`).then((r) => setFlags(r.flags.filter((f) => f.key !== props.flag.key).map((f) => [f.key, `${f.name} (${f.key})`])), setError);
  }, [slug, props.flag.key]);

  const errors = { ...(error instanceof ApiError ? error.fields() : {}), ...local };
  const weights = weightProblem(d.variants);
  // Read by the page when someone else changes the flag: unsaved edits are not overwritten.
  props.dirty.current = writer && JSON.stringify(d) !== JSON.stringify(draftOfFlag(props.flag));
  const set = (patch: Partial<Draft>) => {
    setD({ ...d, ...patch });
    setSaved(false);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (weights) return;
    const { body, errors: found } = patchOf(d);
    setLocal(found);
    setError(null);
    setSaved(false);
    if (Object.keys(found).length > 0) return;
    setBusy(true);
    try {
      const r = await props.saving.run(tagged<Flag>("PATCH", `${base}/flags/${encodeURIComponent(props.flag.key)}`, body, props.etag));
      props.onSaved(r.data, r.etag);
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const Wrap = writer ? "form" : "div";
  const variantKeys = d.variants.map((v) => v.key).filter(Boolean);
  return (
    <Wrap class="form wide" onSubmit={save} noValidate aria-label="Definition">
      <Field label="Name" value={d.name} onInput={(v) => set({ name: v })} error={errors.name} readOnly={readOnly} required />
      <Field label="Description" value={d.description} onInput={(v) => set({ description: v })} error={errors.description} readOnly={readOnly} />
      <VariantsFieldset variants={d.variants} onChange={(variants) => set({ variants })} fields={errors} readOnly={readOnly} />
      <fieldset>
        <legend>Rules</legend>
        <p class="hint">Tried top to bottom; the first whose conditions all hold serves the flag.</p>
        {errors.rules && <p class="error">{errors.rules}</p>}
        <ol class="rules">
          {d.rules.map((r, i) => (
            <RuleEditor
              key={r.id ?? `new-${i}`}
              rule={r}
              index={i}
              count={d.rules.length}
              errors={errors}
              variants={variantKeys}
              segments={segments}
              readOnly={readOnly}
              onChange={(next) => set({ rules: d.rules.map((x, j) => (j === i ? next : x)) })}
              onMove={(by) => set({ rules: move(d.rules, i, by) })}
              onRemove={() => set({ rules: d.rules.filter((_, j) => j !== i) })}
            />
          ))}
        </ol>
        {d.rules.length === 0 && <p class="muted">No rules.</p>}
        {writer && (
          <button type="button" onClick={() => set({ rules: [...d.rules, { name: "", conditions: [], enabled: true, variant: null }] })}>
            Add rule
          </button>
        )}
      </fieldset>
      <fieldset>
        <legend>Prerequisites</legend>
        <p class="hint">Flags that must be on (and serve the variant, when one is picked) for this one to be served.</p>
        {errors.prerequisites && <p class="error">{errors.prerequisites}</p>}
        {d.prerequisites.length === 0 && <p class="muted">None.</p>}
        {d.prerequisites.map((p, i) => (
          <div class="variant" key={i}>
            <Select
              label={`Prerequisite ${i + 1} flag`}
              value={p.flagKey}
              disabled={readOnly}
              options={[["", "Pick a flag"], ...(flags.some(([k]) => k === p.flagKey) || !p.flagKey ? flags : [[p.flagKey, p.flagKey] as [string, string], ...flags])]}
              onChange={(v) => set({ prerequisites: replace(d.prerequisites, i, { flagKey: v }) })}
              error={errors[`prerequisites[${i}].flagKey`]}
            />
            <Field label={`Prerequisite ${i + 1} variant (optional)`} value={p.variant} onInput={(v) => set({ prerequisites: replace(d.prerequisites, i, { variant: v }) })} error={errors[`prerequisites[${i}].variant`]} readOnly={readOnly} />
            {writer && (
              <button type="button" onClick={() => set({ prerequisites: d.prerequisites.filter((_, j) => j !== i) })}>
                Remove<span class="sr-only"> prerequisite {i + 1}</span>
              </button>
            )}
          </div>
        ))}
        {writer && (
          <button type="button" onClick={() => set({ prerequisites: [...d.prerequisites, { flagKey: "", variant: "" }] })}>
            Add prerequisite
          </button>
        )}
      </fieldset>
      {Object.keys(local).length > 0 && (
        <p class="banner error" role="alert">
          Some values need fixing: see the fields marked above.
        </p>
      )}
      <ErrorBanner error={error} shown={Object.keys(errors)} />
      {error instanceof ApiError && error.status === 412 && writer && (
        <p>
          <button type="button" onClick={props.onReload}>
            Reload the flag
          </button>
        </p>
      )}
      {writer && (
        <div class="actions">
          <button type="submit" class="primary" disabled={busy || weights !== ""}>
            {busy ? "Saving…" : "Save flag"}
          </button>
          <span role="status" class="muted">
            {saved ? "Saved." : ""}
          </span>
        </div>
      )}
    </Wrap>
  );
}

export function FlagPage({ slug, flagKey, role }: { slug: string; flagKey: string; role: Role }) {
  const [flag, setFlag] = useState<{ data: Flag; etag: string | null } | null>(null);
  const [envs, setEnvs] = useState<Environment[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState("");
  const [change, setChange] = useState<SeenChange>({ seq: 0, entry: null });
  const dirty = useRef(false);
  const shown = useRef<string | null>(null);
  shown.current = flag?.etag ?? null;
  const saving = useRef(new SaveInFlight()).current;
  const base = `/v1/projects/${encodeURIComponent(slug)}`;
  const load = () =>
    tagged<Flag>("GET", `${base}/flags/${encodeURIComponent(flagKey)}`).then(
      (r) => {
        setFlag(r);
        setError(null);
        setNotice("");
      },
      setError,
    );
  useEffect(() => {
    void load();
    api<Project>("GET", base).then((p) => setEnvs(p.environments), setError);
  }, [slug, flagKey]);
  useEffect(() => {
    if (flag) document.title = `${flag.data.name} · flagsvc`;
  }, [flag?.data.name]);
  const live = useProjectChanges(slug, (entry) => {
    if (entry === null || (FLAG_RESOURCES.has(entry.resource.type) && entry.resource.key === flagKey)) setChange((c) => ({ seq: c.seq + 1, entry }));
  });
  // The definition changed: read it again; shown in place unless the user has unsaved edits.
  useEffect(() => {
    if (!touches(change, "flag")) return;
    saving
      .settled()
      .then(() => tagged<Flag>("GET", `${base}/flags/${encodeURIComponent(flagKey)}`))
      .then((r) => {
        if (r.etag !== null && r.etag === shown.current) return; // one's own save, or nothing new
        if (dirty.current) setNotice(changedBy(change));
        else {
          setFlag(r);
          setError(null);
        }
      }, setError);
  }, [change.seq]);
  const writer = can(role, "flags");
  return (
    <>
      <p class="crumbs">
        <a href={`/projects/${slug}/flags`}>Flags</a> / <code>{flagKey}</code> · <a href={`/projects/${slug}/history?resourceKey=${encodeURIComponent(flagKey)}`}>History</a>{" "}
        <span class={`live-status ${live}`} data-live={live} title="Changes made by anyone show here as they are saved">
          {LIVE_TEXT[live]}
        </span>
      </p>
      <h1>{flag ? flag.data.name : flagKey}</h1>
      <ErrorBanner error={error} />
      {flag === null || envs === null ? (
        !error && <Loading />
      ) : (
        <div class="flag-page" data-ready="">
          <section aria-labelledby="def-title">
            <h2 id="def-title">Definition</h2>
            {notice && (
              <p class="banner info remote-change" role="status">
                {notice}{" "}
                <button type="button" onClick={() => void load()}>
                  Reload the flag
                </button>
              </p>
            )}
            <Definition slug={slug} flag={flag.data} etag={flag.etag} writer={writer} onSaved={(data, etag) => {
                shown.current = etag;
                setFlag({ data, etag });
              }}
              onReload={load}
              dirty={dirty}
              saving={saving}
            />
          </section>
          <Environments slug={slug} flag={flag.data} envs={envs} writer={writer} change={change} />
        </div>
      )}
    </>
  );
}
