/**
 * A form made from a JSON Schema of a config (a plugin package's `configSchema`, an integration
 * type's schema): one field per top-level property, typed by it (text, number, integer, true/false,
 * a choice for `enum` or an `anyOf` of `const`s, a list for an array: one item a line or comma),
 * the description as its hint, `required` and `default` honoured. A property marked
 * `"secret": true` (how our schemas mark secrets; `writeOnly` and `format: "password"` too) is a
 * password input. Editing a config, secrets come back from the API as "********": sent unchanged,
 * the API keeps the stored value. The API's `details` (`body.config.<name>`) are shown at the field.
 */
import { useState } from "preact/hooks";
import { ApiError } from "../api";
import { Control, ErrorBanner, Field, Select } from "../ui";

export interface PropSchema {
  type?: string;
  title?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
  anyOf?: { const?: unknown }[];
  items?: { type?: string };
  secret?: boolean;
  writeOnly?: boolean;
  format?: string;
}
export interface ConfigSchema {
  properties?: Record<string, PropSchema>;
  required?: string[];
}
type Values = Record<string, string | boolean>;

const isSecret = (p: PropSchema) => p.secret === true || p.writeOnly === true || p.format === "password";
const choices = (p: PropSchema): string[] | null => (p.enum ?? (p.anyOf?.every((a) => "const" in a) ? p.anyOf.map((a) => a.const) : null))?.map(String) ?? null;
const kind = (p: PropSchema) => (choices(p) ? "choice" : (p.type ?? "string"));

function initial(schema: ConfigSchema, config: Record<string, unknown> | undefined): Values {
  const out: Values = {};
  for (const [name, p] of Object.entries(schema.properties ?? {})) {
    const v = config ? config[name] : p.default;
    out[name] = kind(p) === "boolean" ? v === true : Array.isArray(v) ? v.join("\n") : v === undefined || v === null ? "" : String(v);
  }
  return out;
}

/** The config to send, or the fields the page can tell are wrong (a number that is not one). */
function toConfig(schema: ConfigSchema, values: Values, editing: Record<string, unknown> | undefined): { config: Record<string, unknown>; problems: Record<string, string> } {
  const config: Record<string, unknown> = {};
  const problems: Record<string, string> = {};
  for (const [name, p] of Object.entries(schema.properties ?? {})) {
    const v = values[name]!;
    const k = kind(p);
    if (typeof v === "boolean") {
      config[name] = v;
      continue;
    }
    if (v.trim() === "") {
      // Emptied while editing: removed from the stored config (PATCH merges; null removes).
      if (editing && name in editing) config[name] = null;
      continue;
    }
    if (k === "number" || k === "integer") {
      const n = Number(v);
      if (!Number.isFinite(n) || (k === "integer" && !Number.isInteger(n))) problems[`config.${name}`] = k === "integer" ? "Must be a whole number" : "Must be a number";
      else config[name] = n;
    } else if (k === "array") {
      const items = v.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
      config[name] = p.items?.type === "number" || p.items?.type === "integer" ? items.map(Number) : items;
    } else config[name] = v;
  }
  return { config, problems };
}

export function SchemaForm(props: {
  label: string;
  schema: ConfigSchema;
  /** The stored config (secrets masked) when editing; none when creating (defaults filled in). */
  config?: Record<string, unknown>;
  submitLabel: string;
  /** What else the form holds (a version, a type), before the config's fields. */
  children?: preact.ComponentChildren;
  onSubmit: (config: Record<string, unknown>) => Promise<unknown>;
}) {
  const [values, setValues] = useState<Values>(() => initial(props.schema, props.config));
  const [error, setError] = useState<unknown>(null);
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const required = new Set(props.schema.required ?? []);
  const fields = { ...(error instanceof ApiError ? error.fields() : {}), ...problems };
  const set = (name: string) => (v: string | boolean) => setValues((old) => ({ ...old, [name]: v }));
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const out = toConfig(props.schema, values, props.config);
    setProblems(out.problems);
    if (Object.keys(out.problems).length) return;
    setBusy(true);
    try {
      await props.onSubmit(out.config);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const properties = Object.entries(props.schema.properties ?? {});
  return (
    <form class="form schema-form" aria-label={props.label} onSubmit={submit} noValidate>
      {props.children}
      {properties.length === 0 && <p class="muted">Nothing to configure.</p>}
      {properties.map(([name, p]) => {
        const label = p.title ?? name;
        const hint = [p.description, required.has(name) ? "Required." : "", isSecret(p) ? "A secret: never shown again once saved." : ""].filter(Boolean).join(" ") || undefined;
        const err = fields[`config.${name}`];
        const k = kind(p);
        const v = values[name]!;
        if (k === "boolean") {
          return (
            <div class="field check-field" key={name}>
              <label>
                <input type="checkbox" name={name} checked={v === true} aria-describedby={hint ? `cfg-${name}-hint` : undefined} onChange={(e) => set(name)((e.target as HTMLInputElement).checked)} />
                {label}
              </label>
              {hint && (
                <p class="hint" id={`cfg-${name}-hint`}>
                  {hint}
                </p>
              )}
              {err && <p class="error">{err}</p>}
            </div>
          );
        }
        if (k === "choice") {
          const opts = choices(p)!.map((c) => [c, c] as [string, string]);
          return <Select key={name} label={label} value={String(v)} options={required.has(name) ? opts : [["", "(not set)"], ...opts]} onChange={set(name)} hint={hint} error={err} />;
        }
        if (k === "array") {
          return (
            <Control key={name} label={label} hint={`${hint ?? ""} One a line, or separated by commas.`.trim()} error={err}>
              {(id, described) => <textarea id={id} name={name} rows={3} value={String(v)} aria-invalid={err ? "true" : undefined} aria-describedby={described} onInput={(e) => set(name)((e.target as HTMLTextAreaElement).value)} />}
            </Control>
          );
        }
        return (
          <Field
            key={name}
            label={label}
            name={name}
            type={isSecret(p) ? "password" : k === "number" || k === "integer" ? "number" : "text"}
            autocomplete={isSecret(p) ? "new-password" : "off"}
            value={String(v)}
            onInput={set(name)}
            hint={hint}
            error={err}
            required={required.has(name)}
          />
        );
      })}
      <ErrorBanner error={error} shown={Object.keys(fields)} />
      <button type="submit" class="primary" disabled={busy}>
        {props.submitLabel}
      </button>
    </form>
  );
}
