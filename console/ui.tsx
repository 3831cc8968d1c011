/** Small shared pieces: labelled fields with their error, the error banner, the confirmation dialog. */
import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { ApiError } from "./api";

let ids = 0;
const nextId = () => `f${++ids}`;

export function Field(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  error?: string;
  type?: string;
  name?: string;
  required?: boolean;
  autocomplete?: string;
  hint?: string;
  pattern?: string;
  readOnly?: boolean;
}) {
  return (
    <Control label={props.label} error={props.error} hint={props.hint}>
      {(id, described) => (
        <input
          id={id}
          name={props.name}
          type={(props.type ?? "text") as "text"}
          value={props.value}
          required={props.required}
          autocomplete={props.autocomplete}
          pattern={props.pattern}
          readOnly={props.readOnly}
          aria-invalid={props.error ? "true" : undefined}
          aria-describedby={described}
          onInput={(e) => props.onInput((e.target as HTMLInputElement).value)}
        />
      )}
    </Control>
  );
}

/** An error's message, and the details that no field took. */
export function ErrorBanner({ error, shown = [] }: { error: unknown; shown?: string[] }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const rest = error instanceof ApiError ? error.details.filter((d) => !shown.includes(d.path.replace(/^(?:body|query|params)\.?/, ""))) : [];
  return (
    <div class="banner error" role="alert">
      <p>{message}</p>
      {rest.length > 0 && (
        <ul>
          {rest.map((d) => (
            <li key={d.path}>
              {d.path}: {d.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A modal confirmation (the native dialog: focus moves in, Escape cancels). */
export function Confirm(props: { title: string; children: ComponentChildren; confirm: string; onConfirm: () => void; onCancel: () => void; busy?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (!d.open) d.showModal();
    const cancel = (e: Event) => {
      e.preventDefault();
      props.onCancel();
    };
    d.addEventListener("cancel", cancel);
    return () => d.removeEventListener("cancel", cancel);
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title">
      <h2 id="confirm-title">{props.title}</h2>
      {props.children}
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" disabled={props.busy} onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </dialog>
  );
}

export function Loading() {
  return (
    <p class="muted" role="status">
      Loading…
    </p>
  );
}

/** A label and one control (select, textarea) with its hint and error, as `Field` does for inputs. */
export function Control(props: { label: string; error?: string; hint?: string; children: (id: string, describedBy?: string) => ComponentChildren }) {
  const id = useRef(nextId()).current;
  const described = [props.hint ? `${id}-hint` : "", props.error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id, described)}
      {props.hint && (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="error" id={`${id}-error`}>
          {props.error}
        </p>
      )}
    </div>
  );
}

export function Select(props: { label: string; value: string; options: [string, string][]; onChange: (v: string) => void; error?: string; hint?: string; disabled?: boolean }) {
  return (
    <Control label={props.label} error={props.error} hint={props.hint}>
      {(id, describedBy) => (
        <select id={id} value={props.value} disabled={props.disabled} aria-invalid={props.error ? "true" : undefined} aria-describedby={describedBy} onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}>
          {props.options.map(([v, label]) => (
            <option key={v} value={v}>
              {label}
            </option>
          ))}
        </select>
      )}
    </Control>
  );
}

/** Previous / next over `pages` pages (nothing when there is one). */
export function Pager({ page, pages, setPage }: { page: number; pages: number; setPage: (page: number) => void }) {
  if (pages <= 1) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
        Previous
      </button>
      <span>
        Page {page} of {pages}
      </span>
      <button type="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
        Next
      </button>
    </nav>
  );
}
