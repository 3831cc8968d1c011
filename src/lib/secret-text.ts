/**
 * Secrets in text that comes from outside (a vendor's answer, a plugin's error or log line):
 * every form a config's secret value travels in is replaced by "********" before the text is
 * stored, logged or answered. Plugins (host and worker) and integrations (the sender) share it.
 * Its own small module: every plugin worker loads it, and must not load the package checks (ajv).
 *
 * `secretForms` derives the forms once, when a config is loaded; `secretMask` builds one
 * pattern of them once; the mask then costs one pass over each text. Mask before cutting a
 * text: a cut could leave part of a secret.
 */
import { SECRET } from "../changes/entry";

/** Forms of base64 shorter than this are left out: they would mask stray letters of any base64 text. */
const MIN_BASE64_CORE = 4;

const jsonEscaped = (text: string) => JSON.stringify(text).slice(1, -1);
const formEncoded = (text: string) => new URLSearchParams({ v: text }).toString().slice(2);
const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

/**
 * The base64 letters that stand for `value` wherever it sits in the encoded text (`user:value`,
 * `value:` of Basic auth with the value as user, any other neighbours): for each of the three
 * offsets modulo 3, the letters that hold only bits of the value.
 */
function base64Cores(value: string): string[] {
  const bytes = new TextEncoder().encode(value);
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const padded = new Uint8Array(offset + bytes.length);
    padded.set(bytes, offset);
    const first = Math.ceil((8 * offset) / 6);
    const last = Math.floor((8 * (offset + bytes.length) - 6) / 6);
    const core = base64(padded).slice(first, last + 1);
    if (core.length >= MIN_BASE64_CORE) cores.push(core);
  }
  return cores;
}

/** A URL's path and query: what travels when a proxy (`apiHost`) takes the place of its scheme and host (Slack's webhook URL). */
function urlPath(value: string): string | null {
  if (!/^https?:\/\//i.test(value)) return null;
  try {
    const url = new URL(value);
    const path = `${url.pathname}${url.search}`;
    return path.length > 1 ? path : null;
  } catch {
    return null;
  }
}

/**
 * Every form the secret values travel in, longest first (a form inside another is masked
 * whole): the value (also inside `Bearer <value>`), its path when it is a URL, each of these
 * URL-encoded (encodeURIComponent, and form-encoded with + for spaces) and JSON-escaped (once,
 * and twice: a JSON body quoted in a JSON answer), and the value in base64 (alone, as
 * `value:` and `:value` of Basic auth, and inside any other base64 text).
 */
export function secretForms(values: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const value of values) {
    if (value === "") continue;
    const path = urlPath(value);
    for (const text of path === null ? [value] : [value, path]) {
      for (const form of [text, encodeURIComponent(text), formEncoded(text)]) {
        forms.add(form);
        forms.add(jsonEscaped(form));
        forms.add(jsonEscaped(jsonEscaped(form)));
      }
    }
    const encoder = new TextEncoder();
    for (const whole of [value, `${value}:`, `:${value}`]) forms.add(base64(encoder.encode(whole)));
    for (const core of base64Cores(value)) forms.add(core);
  }
  forms.delete("");
  return [...forms].sort((a, b) => b.length - a.length);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** `text` with every form (as `secretForms` gives them) replaced by "********"; built once per config. */
export function secretMask(forms: readonly string[]): (text: string) => string {
  if (forms.length === 0) return (text) => text;
  const pattern = new RegExp(forms.map(escapeRegExp).join("|"), "g");
  return (text) => text.replace(pattern, SECRET);
}
