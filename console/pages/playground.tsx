/**
 * The playground: evaluate flags for a context typed as JSON, in one environment, one flag or
 * several at once, each result with its reason and the rule that matched (its name, read from the
 * flag's definition). It asks `POST /v1/projects/{slug}/environments/{env}/evaluate` (and
 * `/batch`): evaluation as a reader of the flags, open to every role by the session cookie, which
 * answers what `/v1/evaluate` answers to a key of that environment and is not counted as traffic
 * (docs/decisions.md, Evaluate as a reader). No API key is created.
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type Environment, type Project } from "../api";
import { Control, ErrorBanner, Loading, Select } from "../ui";

const BATCH_MAX = 50;
const EXAMPLE = `{
  "userId": "user-42",
  "plan": "beta",
  "age": 30,
  "country": "FR"
}`;

interface Result {
  flagKey: string;
  enabled: boolean;
  variant: string | null;
  reason: string;
  ruleId: string | null;
}
/** The context typed: an object, or the reason it is not one. */
export function parseContext(text: string): { context?: Record<string, unknown>; error?: string } {
  if (text.trim() === "") return { context: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { error: `Not valid JSON: ${(e as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { error: "The context must be a JSON object: { \"userId\": \"…\", … }" };
  return { context: value as Record<string, unknown> };
}

export function PlaygroundPage({ slug }: { slug: string }) {
  const base = `/v1/projects/${encodeURIComponent(slug)}`;
  const [envs, setEnvs] = useState<Environment[] | null>(null);
  const [flags, setFlags] = useState<{ key: string; name: string }[] | null>(null);
  const [env, setEnv] = useState("");
  const [text, setText] = useState(EXAMPLE);
  const [mode, setMode] = useState<"one" | "batch">("one");
  const [one, setOne] = useState("");
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [results, setResults] = useState<Result[] | null>(null);
  const [ruleNames, setRuleNames] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [jsonError, setJsonError] = useState("");

  useEffect(() => {
    api<Project>("GET", base).then((p) => {
      setEnvs(p.environments);
      setEnv((e) => e || p.environments.find((x) => x.slug === "production")?.slug || p.environments[0]?.slug || "");
    }, setError);
    (async () => {
      const all: { key: string; name: string }[] = [];
      for (let page = 1; ; page++) {
        const r = await api<{ flags: { key: string; name: string }[]; total: number }>("GET", `${base}/flags?perPage=100&page=${page}`);
        all.push(...r.flags);
        if (r.flags.length === 0 || all.length >= r.total) break;
      }
      setFlags(all);
      setOne((k) => k || all[0]?.key || "");
    })().catch(setError);
  }, [slug]);

  /** Rule names of the flags whose results matched a rule, read once per flag. */
  const nameRules = async (rs: Result[]) => {
    const names: Record<string, string> = {};
    await Promise.all(
      rs
        .filter((r) => r.ruleId && !(r.ruleId in ruleNames))
        .map(async (r) => {
          const f = await api<{ rules: { id: string; name: string }[] }>("GET", `${base}/flags/${encodeURIComponent(r.flagKey)}`).catch(() => null);
          for (const rule of f?.rules ?? []) names[rule.id] = rule.name;
        }),
    );
    setRuleNames((n) => ({ ...n, ...names }));
  };

  const run = async (e: Event) => {
    e.preventDefault();
    const parsed = parseContext(text);
    setJsonError(parsed.error ?? "");
    if (!parsed.context || !env) return;
    const wanted = mode === "one" ? [one] : [...picked];
    if (wanted.length === 0 || wanted[0] === "") {
      setError(new Error(mode === "one" ? "Pick a flag" : "Pick at least one flag"));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      let rs: Result[];
      const at = `${base}/environments/${encodeURIComponent(env)}/evaluate`;
      if (mode === "one") {
        rs = [await api<Result>("POST", at, { flagKey: one, context: parsed.context })];
      } else {
        rs = [];
        for (let i = 0; i < wanted.length; i += BATCH_MAX) {
          const b = await api<{ results: Record<string, Result> }>("POST", `${at}/batch`, { flags: wanted.slice(i, i + BATCH_MAX), context: parsed.context });
          rs.push(...Object.values(b.results));
        }
      }
      setResults(rs);
      await nameRules(rs);
    } catch (err) {
      // A 400 about the context belongs to the context's field.
      if (err instanceof ApiError && err.details.some((d) => d.path.startsWith("body.context"))) setJsonError(err.details.filter((d) => d.path.startsWith("body.context")).map((d) => `${d.path.replace(/^body\./, "")}: ${d.message}`).join("; "));
      else setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (envs === null || flags === null) return error ? <ErrorBanner error={error} /> : <Loading />;
  const envName = envs.find((x) => x.slug === env)?.name ?? env;
  const toggle = (k: string) => {
    const next = new Set(picked);
    if (next.has(k)) next.delete(k);
    else next.add(k);
    setPicked(next);
  };
  return (
    <>
      <h1>Playground</h1>
      <p class="muted">Evaluate flags for a context as your application would, and see why each one answers what it does.</p>
      <form class="form wide playground" onSubmit={run} noValidate aria-label="Evaluate">
        <Select label="Environment" value={env} options={envs.map((x) => [x.slug, x.name])} onChange={(v) => setEnv(v)} />
        <p class="hint">Evaluated as your application's key of {envName} would be answered; the playground's evaluations are not counted in the flags' insights.</p>
        <Control label="Context (JSON)" error={jsonError} hint="An object of attributes. userId is what percentage rollouts and weighted variants bucket by (without it a rollout under 100 % excludes the user); the other keys are attributes the rules' conditions match (plan, country, age…). Values: strings, numbers, booleans, null or arrays of those.">
          {(id, described) => (
            <textarea
              id={id}
              name="context"
              rows={8}
              spellcheck={false}
              value={text}
              aria-invalid={jsonError ? "true" : undefined}
              aria-describedby={described}
              onInput={(e) => {
                setText((e.target as HTMLTextAreaElement).value);
                setJsonError("");
              }}
            />
          )}
        </Control>
        <p class="hint">
          Example: <code>{`{"userId": "user-42", "plan": "beta"}`}</code>{" "}
          <button type="button" class="link" onClick={() => setText(EXAMPLE)}>
            Use the example
          </button>
        </p>
        <fieldset>
          <legend>Flags</legend>
          <label class="check">
            <input type="radio" name="mode" checked={mode === "one"} onChange={() => setMode("one")} /> One flag
          </label>{" "}
          <label class="check">
            <input type="radio" name="mode" checked={mode === "batch"} onChange={() => setMode("batch")} /> Several flags
          </label>
          {flags.length === 0 ? (
            <p class="muted">No flags in this project yet.</p>
          ) : mode === "one" ? (
            <Select label="Flag" value={one} options={flags.map((f) => [f.key, `${f.name} (${f.key})`])} onChange={setOne} />
          ) : (
            <>
              <p>
                <button type="button" onClick={() => setPicked(new Set(flags.map((f) => f.key)))}>
                  Select all
                </button>{" "}
                <button type="button" onClick={() => setPicked(new Set())}>
                  Select none
                </button>
              </p>
              <ul class="pick-flags">
                {flags.map((f) => (
                  <li key={f.key}>
                    <label class="check">
                      <input type="checkbox" name="flags" value={f.key} checked={picked.has(f.key)} onChange={() => toggle(f.key)} /> {f.name} <code>{f.key}</code>
                    </label>
                  </li>
                ))}
              </ul>
            </>
          )}
        </fieldset>
        <ErrorBanner error={error} />
        <button type="submit" class="primary" disabled={busy || !env}>
          {mode === "one" ? "Evaluate" : "Evaluate selected"}
        </button>
      </form>
      {results && (
        <section aria-labelledby="results-title">
          <h2 id="results-title">Results in {envName}</h2>
          <div class="table-wrap" role="region" aria-label="Results" tabIndex={0}>
            <table class="flags results" data-ready="">
              <thead>
                <tr>
                  <th scope="col">Flag</th>
                  <th scope="col">Enabled</th>
                  <th scope="col">Variant</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Matched rule</th>
                </tr>
              </thead>
              <tbody>
                {results.map((r) => (
                  <tr key={r.flagKey} data-flag={r.flagKey}>
                    <th scope="row">
                      <a href={`/projects/${encodeURIComponent(slug)}/flags/${encodeURIComponent(r.flagKey)}`}>{r.flagKey}</a>
                    </th>
                    <td class={r.enabled ? "state on" : "state off"}>{r.enabled ? "Yes" : "No"}</td>
                    <td>{r.variant ?? "—"}</td>
                    <td data-reason={r.reason}>
                      <code>{r.reason}</code>
                    </td>
                    <td>{r.ruleId ? (ruleNames[r.ruleId] ? <>{ruleNames[r.ruleId]}</> : <code>{r.ruleId}</code>) : "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
    </>
  );
}
