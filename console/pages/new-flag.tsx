/**
 * Create a flag: key, name, description and optional variants with weights. The weights are
 * checked as they are typed (either none or all, adding up to 100), before saving; the API's
 * own validation errors land at the field they name (`details[].path`).
 */
import { useState } from "preact/hooks";
import { api, ApiError, can, type Role } from "../api";
import { navigate } from "../router";
import { ErrorBanner, Field } from "../ui";

export interface Variant {
  key: string;
  weight: string;
}

/** What the weights say before saving: empty when fine. */
export function weightProblem(variants: Variant[]): string {
  const given = variants.filter((v) => v.weight.trim() !== "");
  if (given.length === 0) return "";
  if (given.length !== variants.length) return "Give every variant a weight, or none";
  const sum = given.reduce((s, v) => s + Number(v.weight), 0);
  if (given.some((v) => !Number.isInteger(Number(v.weight)) || Number(v.weight) < 0)) return "Weights are whole numbers from 0 to 100";
  return sum === 100 ? "" : `The weights add up to ${sum}, not 100`;
}

export function NewFlagPage({ slug, role }: { slug: string; role: Role }) {
  const [key, setKey] = useState("");
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [variants, setVariants] = useState<Variant[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (!can(role, "flags")) {
    return (
      <>
        <h1>New flag</h1>
        <p>Your role ({role}) may read flags but not create them.</p>
      </>
    );
  }
  const fields = error instanceof ApiError ? error.fields() : {};
  const weights = weightProblem(variants);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (weights) return;
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, unknown> = { key, name };
      if (description.trim()) body.description = description;
      if (variants.length > 0) body.variants = variants.map((v) => (v.weight.trim() === "" ? { key: v.key } : { key: v.key, weight: Number(v.weight) }));
      await api("POST", `/v1/projects/${encodeURIComponent(slug)}/flags`, body);
      navigate(`/projects/${slug}/flags?q=${encodeURIComponent(key)}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <h1>New flag</h1>
      <form class="form" onSubmit={submit} noValidate>
        <Field label="Key" value={key} onInput={setKey} error={fields.key} hint="kebab-case, unique in the project; cannot be changed later" required />
        <Field label="Name" value={name} onInput={setName} error={fields.name} required />
        <Field label="Description" value={description} onInput={setDescription} error={fields.description} />
        <VariantsFieldset variants={variants} onChange={setVariants} fields={fields} />
        <ErrorBanner error={error} shown={Object.keys(fields)} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy || weights !== ""}>
            Create flag
          </button>
          <a class="button" href={`/projects/${slug}/flags`}>
            Cancel
          </a>
        </div>
      </form>
    </>
  );
}

/** Variants with their weights, the weights' problem said as they are typed; read-only: no button. */
export function VariantsFieldset<V extends Variant>({ variants, onChange, fields, readOnly = false }: { variants: V[]; onChange: (vs: V[]) => void; fields: Record<string, string>; readOnly?: boolean }) {
  const weights = weightProblem(variants);
  const setVariant = (i: number, v: Partial<Variant>) => onChange(variants.map((x, j) => (j === i ? { ...x, ...v } : x)));
  return (
    <fieldset>
      <legend>Variants</legend>
      <p class="hint">None for an on/off flag. Weights: for none, or for all, adding up to 100.</p>
      {variants.map((v, i) => (
        <div class="variant" key={i}>
          <Field label={`Variant ${i + 1} key`} value={v.key} onInput={(k) => setVariant(i, { key: k })} error={fields[`variants[${i}].key`]} readOnly={readOnly} />
          <Field label={`Variant ${i + 1} weight`} type="number" value={v.weight} onInput={(w) => setVariant(i, { weight: w })} error={fields[`variants[${i}].weight`]} readOnly={readOnly} />
          {!readOnly && (
            <button type="button" onClick={() => onChange(variants.filter((_, j) => j !== i))}>
              Remove<span class="sr-only"> variant {i + 1}</span>
            </button>
          )}
        </div>
      ))}
      {!readOnly && (
        <button type="button" onClick={() => onChange([...variants, { key: "", weight: "" } as V])}>
          Add variant
        </button>
      )}
      {weights && (
        <p class="error" role="alert">
          {weights}
        </p>
      )}
      {fields.variants && <p class="error">{fields.variants}</p>}
    </fieldset>
  );
}
