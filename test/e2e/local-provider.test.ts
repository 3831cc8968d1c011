/**
 * The local-evaluation provider (packages/openfeature-provider), as built (dist/index.js),
 * against the compiled binary:
 * - differential: random flags (their rules naming segments too), states and contexts created
 *   through the API, a segment changed once the provider holds them; the provider's answer
 *   (ours through `evaluate`, OpenFeature's through a client) equals `/v1/evaluate`'s, the
 *   bucketing vectors included, and prerequisites (chains of earlier flags, some naming a
 *   variant);
 * - changes through the API reach it (ConfigurationChanged with the key, the new answer);
 * - a dropped connection, a silent one and a server restart are survived without a wrong
 *   answer: the last state meanwhile, STALE, then in sync again with what changed meanwhile;
 * - the bundle loads in Node and evaluates there.
 * The provider reaches the binary through a TCP proxy the test can cut (tcp-proxy.ts).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { OpenFeature, ProviderEvents, ProviderStatus, type Client, type EvaluationContext } from "@openfeature/server-sdk";
import { compileFlag, compileSegment } from "../../src/evaluation/engine";
import { isResolutionError, resolution, isIdentified } from "../../src/evaluation/openfeature";
import type { Condition, EvalContext, EvaluationResult, FlagDefinition, Operator, SegmentDefinition } from "../../src/evaluation/types";
import { OPERATORS } from "../../src/evaluation/types";
import { callServer } from "../helpers";
import { baseEnv, binaryPath, cleanup, freePort, ROOT, startBinary, tempDir, type RunningBinary } from "./binary";
import { tcpProxy, type TcpProxy } from "./tcp-proxy";

type ProviderModule = typeof import("../../packages/openfeature-provider/src/index");
type Provider = InstanceType<ProviderModule["FlagsvcProvider"]>;

const T = 120_000;
const ADMIN = `svc_admin_${"lp".repeat(18)}`;
const FLAGS = "/v1/projects/default/flags";
const SEGMENTS_PATH = "/v1/projects/default/segments";
const BUNDLE = join(ROOT, "packages", "openfeature-provider", "dist", "index.js");
const ENV = { SVC_ADMIN_KEY: ADMIN, SVC_RATE_LIMITS: "eval:100000000,admin:100000000,mgmt:100000000" };
const silent = { error() {}, warn() {}, info() {}, debug() {} };
/** The binary's certificate is self-signed. */
const insecureFetch = ((url: string, init?: RequestInit) => fetch(url, { ...init, tls: { rejectUnauthorized: false } })) as typeof fetch;

let mod: ProviderModule;
let srv: RunningBinary;
let port: number;
let dataDir: string;
let evalKey: string;
let serverKey: string;

beforeAll(async () => {
  // The bundle as shipped (no declarations: the tests do not read them), and the binary.
  const build = Bun.spawn([process.execPath, join(ROOT, "packages", "openfeature-provider", "build.ts"), "--no-types"], { cwd: ROOT, env: baseEnv(), stdout: "pipe", stderr: "pipe" });
  const [err, code] = await Promise.all([new Response(build.stderr).text(), build.exited, binaryPath()]);
  if (code !== 0) throw new Error(`building the provider failed: ${err}`);
  mod = (await import(BUNDLE)) as ProviderModule;
  port = await freePort();
  dataDir = join(tempDir(), "data");
  srv = await start();
  evalKey = (await api("POST", "/v1/projects/default/api-keys", { name: "app", scope: "eval", environment: "production" })).key;
  serverKey = (await api("POST", "/v1/projects/default/api-keys", { name: "service", scope: "mgmt", environment: "production" })).key;
}, T);

afterAll(async () => {
  await OpenFeature.clearProviders();
  cleanup();
});

const start = () => startBinary({ dataDir, env: ENV, args: ["--port", String(port)] });

async function api(method: string, path: string, body?: unknown, key = ADMIN): Promise<any> {
  const res = await callServer(srv.url, method, path, { key, body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The server's answers for these flags and this (our) context, without evaluatedAt. */
async function serverAnswers(keys: string[], context: EvalContext): Promise<Record<string, Omit<EvaluationResult, "evaluatedAt">>> {
  const out: Record<string, Omit<EvaluationResult, "evaluatedAt">> = {};
  for (let i = 0; i < keys.length; i += 50) {
    const { results } = await api("POST", "/v1/evaluate/batch", { flags: keys.slice(i, i + 50), context }, evalKey);
    for (const [k, r] of Object.entries(results as Record<string, EvaluationResult>)) out[k] = withoutTime(r);
  }
  return out;
}

const withoutTime = ({ evaluatedAt: _, ...rest }: EvaluationResult) => rest;

async function connect(opts: Partial<ConstructorParameters<ProviderModule["FlagsvcProvider"]>[0]> & { via?: TcpProxy } = {}): Promise<Provider> {
  const { via, ...rest } = opts;
  const provider = new mod.FlagsvcProvider({
    baseUrl: `https://127.0.0.1:${via?.port ?? port}`,
    apiKey: serverKey,
    fetch: insecureFetch,
    logger: silent,
    reconnect: { initialDelayMs: 100, maxDelayMs: 500 },
    ...rest,
  });
  await provider.initialize();
  return provider;
}

/** Resolves with the first ConfigurationChanged naming `key` (and the ms it took from `since`). */
function changeOf(provider: Provider, key: string, since = performance.now(), timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      provider.events.removeHandler(ProviderEvents.ConfigurationChanged, handler);
      reject(new Error(`no ConfigurationChanged for ${key} within ${timeoutMs} ms`));
    }, timeoutMs);
    const handler = (details?: Record<string, unknown>) => {
      if (!(details?.flagsChanged as string[] | undefined)?.includes(key)) return;
      clearTimeout(timer);
      provider.events.removeHandler(ProviderEvents.ConfigurationChanged, handler);
      resolve(performance.now() - since);
    };
    provider.events.addHandler(ProviderEvents.ConfigurationChanged, handler);
  });
}

function nextEvent(provider: Provider, event: ProviderEvents, timeoutMs = 20_000): Promise<number> {
  const since = performance.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${timeoutMs} ms`)), timeoutMs);
    const handler = () => {
      clearTimeout(timer);
      provider.events.removeHandler(event, handler);
      resolve(performance.now() - since);
    };
    provider.events.addHandler(event, handler);
  });
}

// ---- random flags and contexts ----------------------------------------------------------------

/** mulberry32: the same flags for the same seed (printed, so a failure can be replayed). */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return { next, int, pick, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof prng>;

const ATTRIBUTES = ["plan", "country", "age", "beta", "email", "tags", "score", "userId", "version", "signupAt", "account"];
const VERSIONS = ["1.2.3", "1.10.0", "2.0.0-rc.1", "2.0.0", "v1.2.3", "1.2", "not-a-version"];
const INSTANTS = ["2026-01-01T00:00:00Z", "2025-06-30T12:00:00+02:00", "2027-01-01T00:00:00.000Z", "yesterday", 1767225600000, 1767225599999];
const STRINGS = ["free", "pro", "team", "FR", "DE", "US", "a@example.com", "staff", "4.2", "", "Ünïcode"];
const NUMBERS = [0, 1, 17, 18, 42, 65, 99.5, -3, 1e21];

function condition(rng: Rng, forced?: Operator): Condition {
  const attribute = rng.pick(ATTRIBUTES);
  const operator = forced ?? (rng.pick(OPERATORS) as Operator);
  const scalar = () => (rng.chance(0.5) ? rng.pick(STRINGS) : rng.chance(0.7) ? rng.pick(NUMBERS) : rng.chance(0.5));
  switch (operator) {
    case "equals":
      return { attribute, operator, value: scalar() };
    case "not_equals":
      return { attribute, operator, value: rng.chance(0.5) ? rng.pick(STRINGS) : rng.pick(NUMBERS) };
    case "in":
    case "not_in":
      return { attribute, operator, value: Array.from({ length: 1 + rng.int(4) }, scalar) };
    case "contains":
    case "starts_with":
      return { attribute, operator, value: rng.pick(["a", "@example", "staff", "F", "4."]) };
    case "greater_than":
    case "less_than":
      return { attribute, operator, value: rng.pick(NUMBERS) };
    case "is_true":
    case "is_false":
      return rng.chance(0.5) ? { attribute, operator } : { attribute, operator, value: true };
    case "greater_than_or_equal":
    case "less_than_or_equal":
      return { attribute, operator, value: rng.pick(NUMBERS) };
    case "semver_equals":
    case "semver_greater_than":
    case "semver_less_than":
      return { attribute, operator, value: rng.pick(["1.2.3", "2.0.0", "2.0.0-rc.1", "1.10.0"]) };
    case "matches":
      return { attribute, operator, value: rng.pick(["^pro$", "@example\\.com$", "^[A-Z]{2}$", "(a+)+$", "^1\\.", "staff|team"]) };
    case "before":
    case "after":
      return { attribute, operator, value: rng.pick(["2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00", "2025-12-31T23:59:59.999Z"]) };
    case "in_segment":
    case "not_in_segment":
      return { attribute: "userId", operator, value: rng.pick(SEGMENTS).key };
  }
}

/**
 * The segments the differential's rules name (docs/targeting.md, Segments): ids the random
 * contexts use (targeting keys `user-N`, numbers in decimal form), conditions of their own.
 */
const SEGMENTS: (SegmentDefinition & { name: string; included: string[] })[] = [
  { key: "seg-ids", name: "ids", conditions: [], included: [...Array.from({ length: 5000 }, (_, i) => `user-${i * 20}`), "42", "1000000000000000000000", "0.5", "u7"], excluded: [] },
  {
    key: "seg-pro",
    name: "pro",
    conditions: [{ attribute: "plan", operator: "in", value: ["pro", "team"] }],
    included: Array.from({ length: 100 }, (_, i) => `user-${i * 7}`),
    excluded: Array.from({ length: 2000 }, (_, i) => `user-${i * 3}`),
  },
  { key: "seg-fr", name: "fr", conditions: [{ attribute: "country", operator: "equals", value: "FR" }, { attribute: "age", operator: "greater_than", value: 17 }], included: [], excluded: ["user-1"] },
];

/** Weights of `n` variants in thousandths summing to 100 (some with 3 decimals). */
function weights(rng: Rng, n: number): number[] {
  const cuts = Array.from({ length: n - 1 }, () => rng.int(100_001)).sort((a, b) => a - b);
  const bounds = [0, ...cuts, 100_000];
  return bounds.slice(1).map((b, i) => (b - bounds[i]!) / 1000);
}

/** `forced`: one more rule (last) with a condition of this operator: every operator comes up, whatever the seed. */
function randomFlag(rng: Rng, key: string, forced?: Operator) {
  const multi = rng.chance(0.5);
  const n = multi ? 2 + rng.int(3) : 0;
  const ws = multi && rng.chance(0.7) ? weights(rng, n) : null;
  const variants = Array.from({ length: n }, (_, i) => (ws ? { key: `v${i}`, weight: ws[i]! } : { key: `v${i}` }));
  const rules = Array.from({ length: rng.int(4) }, (_, i) => ({
    name: `r${i}`,
    enabled: rng.chance(0.85),
    variant: multi && rng.chance(0.5) ? `v${rng.int(n)}` : null,
    conditions: Array.from({ length: rng.int(4) }, () => condition(rng)),
  }));
  if (forced !== undefined) rules.push({ name: `every operator: ${forced}`, enabled: true, variant: null, conditions: [condition(rng, forced)] });
  const state = rng.chance(0.15)
    ? null // never set: disabled
    : {
        enabled: rng.chance(0.8),
        rolloutPercentage: rng.chance(0.4) ? null : rng.pick([0, 100, 50, 33.333, 12.5, rng.int(100_001) / 1000]),
      };
  const bucketBy = rng.chance(0.3) ? "account" : undefined;
  return { body: { key, name: key, variants, rules, ...(bucketBy ? { bucketBy } : {}) }, state };
}

/** One context as the server takes it (ours) and as the provider takes it (OpenFeature's). */
function randomContext(rng: Rng): { ours: EvalContext; of: EvaluationContext } {
  const attrs: Record<string, any> = {};
  for (const a of ["plan", "country", "age", "beta", "email", "tags", "score"]) {
    if (!rng.chance(0.7)) continue;
    if (a === "tags") attrs[a] = Array.from({ length: rng.int(3) }, () => rng.pick(STRINGS));
    else if (a === "beta") attrs[a] = rng.chance(0.8) ? rng.chance(0.5) : null;
    else if (a === "age" || a === "score") attrs[a] = rng.chance(0.8) ? rng.pick(NUMBERS) : rng.pick(STRINGS);
    else attrs[a] = rng.pick(STRINGS);
  }
  if (rng.chance(0.7)) attrs.version = rng.pick(VERSIONS);
  if (rng.chance(0.7)) attrs.signupAt = rng.pick(INSTANTS);
  if (rng.chance(0.7)) attrs.account = rng.chance(0.8) ? `acct-${rng.int(20)}` : rng.int(20);
  const kind = rng.pick(["targetingKey", "targetingKey", "userId", "anonymous"] as const);
  if (kind === "anonymous") return { ours: { ...attrs }, of: { ...attrs } };
  if (kind === "targetingKey") {
    const id = `user-${rng.int(100_000)}`;
    return { ours: { ...attrs, userId: id }, of: { ...attrs, targetingKey: id } };
  }
  // Our userId as such (a number too): OpenFeature's targetingKey is a string.
  const id = rng.chance(0.5) ? rng.int(1_000_000) : rng.pick([`u${rng.int(1000)}`, 1e21, 0.5]);
  return { ours: { ...attrs, userId: id }, of: { ...attrs, userId: id } };
}

/** What an OpenFeature client must answer for the server's result (through the same mapping the server's OFREP uses). */
function expectedDetails(result: EvaluationResult, def: FlagDefinition, ours: EvalContext, defaultValue: boolean | string) {
  const r = resolution(result, compileFlag(def, new Map(SEGMENTS.map((s) => [s.key, compileSegment(s)]))), isIdentified(ours), "production");
  if (isResolutionError(r)) return { value: defaultValue, reason: "ERROR", errorCode: r.errorCode };
  return { value: r.value ?? defaultValue, variant: r.variant, reason: r.reason, flagMetadata: r.metadata };
}

function details(d: { value: unknown; variant?: string; reason?: string; errorCode?: string; flagMetadata?: Record<string, unknown> }) {
  return d.errorCode ? { value: d.value, reason: d.reason, errorCode: d.errorCode } : { value: d.value, variant: d.variant, reason: d.reason, flagMetadata: { ...d.flagMetadata } };
}

// ---- the tests ---------------------------------------------------------------------------------

test(
  "differential: random flags, states and contexts; the provider answers as /v1/evaluate, ours and OpenFeature's",
  async () => {
    const seed = Number(process.env.PROVIDER_SEED ?? Date.now() % 1_000_000);
    console.log(`local-provider differential: seed ${seed} (PROVIDER_SEED=${seed} replays it)`);
    const rng = prng(seed);
    const defs = new Map<string, FlagDefinition>();
    const operators = new Set<string>();
    /** The longest prerequisite chain from each flag: a new flag takes prerequisites whose chains leave room. */
    const depth = new Map<string, number>();
    // Their own stream of numbers: the flags, states and contexts of a seed are the same as without them.
    const pre = prng(seed + 1);
    for (const segment of SEGMENTS) await api("POST", SEGMENTS_PATH, segment);
    // 60 random flags, then one more per operator (its random rules and a rule of that operator last).
    for (let i = 0; i < 60 + OPERATORS.length; i++) {
      const key = `rnd-${i}`;
      const { body, state } = randomFlag(rng, key, i >= 60 ? OPERATORS[i - 60] : undefined);
      // Prerequisites among the earlier flags (acyclic by construction), a variant named now and then.
      const earlier = [...defs.keys()].filter((k) => depth.get(k)! < 9);
      const prerequisites = i >= 5 && pre.chance(0.3) ? [...new Set(Array.from({ length: 1 + pre.int(2) }, () => pre.pick(earlier)))] : [];
      const withPrerequisites = prerequisites.map((flagKey) => {
        const variants = defs.get(flagKey)!.variants;
        return variants.length > 0 && pre.chance(0.5) ? { flagKey, variant: variants[pre.int(variants.length)]!.key } : { flagKey };
      });
      depth.set(key, Math.max(0, ...prerequisites.map((k) => depth.get(k)! + 1)));
      const created = await api("POST", FLAGS, withPrerequisites.length > 0 ? { ...body, prerequisites: withPrerequisites } : body);
      defs.set(key, { key, variants: created.variants, rules: created.rules, bucketBy: created.bucketBy, prerequisites: created.prerequisites });
      for (const rule of created.rules as FlagDefinition["rules"]) for (const c of rule.conditions) operators.add(c.operator);
      if (state) await api("PUT", `${FLAGS}/${key}/states/production`, state);
    }
    // And one flag on, without rules or variants (STATIC), whatever the seed made.
    const fixed = await api("POST", FLAGS, { key: "fixed-static", name: "fixed-static", variants: [], rules: [] });
    defs.set("fixed-static", { key: "fixed-static", variants: fixed.variants, rules: fixed.rules });
    await api("PUT", `${FLAGS}/fixed-static/states/production`, { enabled: true, rolloutPercentage: null });
    expect([...operators].sort()).toEqual([...OPERATORS].sort());
    const provider = await connect();
    // A segment changed after the provider loaded: the flags that use it are compiled again there.
    await api("PATCH", `${SEGMENTS_PATH}/seg-ids`, { included: [...SEGMENTS[0]!.included, ...Array.from({ length: 4990 }, (_, i) => `user-${i * 20 + 1}`)] });
    await caughtUp(provider);
    await OpenFeature.setProviderAndWait("differential", provider);
    const client: Client = OpenFeature.getClient("differential");
    try {
      expect(provider.version).toBeGreaterThan(0);
      expect(provider.environment).toBe("production");
      const keys = [...defs.keys(), "no-such-flag"];
      let compared = 0;
      const seen = new Map<string, number>();
      const tally = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);
      for (let c = 0; c < 80; c++) {
        const { ours, of } = randomContext(rng);
        const server = await serverAnswers(keys, ours);
        for (const key of keys) {
          const mine = withoutTime(provider.evaluate(key, of));
          tally(mine.reason);
          if (!Bun.deepEquals(mine, server[key])) expect({ key, context: ours, provider: mine }).toEqual({ key, context: ours, provider: server[key]! });
          const def = defs.get(key);
          if (def === undefined) continue;
          const multi = def.variants.length > 0;
          const got = multi ? await client.getStringDetails(key, "default", of) : await client.getBooleanDetails(key, false, of);
          const want = expectedDetails({ ...server[key]!, evaluatedAt: "" }, def, ours, multi ? "default" : false);
          tally(got.errorCode ?? got.reason ?? "none");
          if (!Bun.deepEquals(details(got), want)) expect({ key, context: ours, details: details(got) }).toEqual({ key, context: ours, details: want as never });
          compared++;
        }
      }
      expect(compared).toBe(80 * defs.size);
      console.log(`local-provider differential: ${compared} flag × context pairs, ${[...seen].map(([k, n]) => `${k} ${n}`).join(", ")}`);
      // Every reason of ours and every OpenFeature outcome came up.
      for (const r of ["FLAG_DISABLED", "PREREQUISITE_FAILED", "TARGETING_RULE_MATCH", "PERCENTAGE_ROLLOUT", "PERCENTAGE_ROLLOUT_EXCLUDED", "FLAG_ENABLED", "FLAG_NOT_FOUND"]) {
        expect(seen.get(r) ?? 0).toBeGreaterThan(0);
      }
      for (const r of ["STATIC", "DEFAULT", "TARGETING_MATCH", "SPLIT", "DISABLED", "TARGETING_KEY_MISSING"]) expect(seen.get(r) ?? 0).toBeGreaterThan(0);
      // A type mismatch and a missing flag, through the client.
      const bool = [...defs].find(([, d]) => d.variants.length === 0)![0];
      expect(await client.getStringDetails(bool, "x", { targetingKey: "u" })).toMatchObject({ value: "x", errorCode: "TYPE_MISMATCH" });
      expect(await client.getBooleanDetails("no-such-flag", true)).toMatchObject({ value: true, errorCode: "FLAG_NOT_FOUND" });
    } finally {
      await OpenFeature.clearProviders();
      // Dependants first: a flag that is another's prerequisite cannot be deleted.
      for (const key of [...defs.keys()].reverse()) await api("DELETE", `${FLAGS}/${key}`);
      for (const segment of SEGMENTS) await api("DELETE", `${SEGMENTS_PATH}/${segment.key}`);
    }
  },
  T,
);

test(
  "the bucketing vectors: provider, server and the contract agree",
  async () => {
    const { cases } = JSON.parse(readFileSync(join(import.meta.dir, "..", "fixtures", "bucketing-vectors.json"), "utf8")) as {
      cases: { flagKey: string; userId: string; rolloutPercentage: number; included: boolean; variants: { key: string; weight: number }[] | null; variant: string | null }[];
    };
    const provider = await connect();
    try {
      const made = new Set<string>();
      for (const v of cases) {
        // One case at a time: the flag (re)defined and its rollout set, then the provider told.
        const variants = v.variants ?? [];
        if (!made.has(v.flagKey)) {
          await api("POST", FLAGS, { key: v.flagKey, name: v.flagKey, variants });
          made.add(v.flagKey);
        } else await api("PATCH", `${FLAGS}/${v.flagKey}`, { variants });
        await api("PUT", `${FLAGS}/${v.flagKey}/states/production`, { enabled: true, rolloutPercentage: v.rolloutPercentage });
        await caughtUp(provider);
        const server = (await serverAnswers([v.flagKey], { userId: v.userId }))[v.flagKey]!;
        const mine = withoutTime(provider.evaluate(v.flagKey, { targetingKey: v.userId }));
        expect(mine).toEqual(server);
        expect({ case: v, included: mine.enabled, variant: mine.variant }).toEqual({ case: v, included: v.included, variant: v.variant });
      }
      for (const key of made) await api("DELETE", `${FLAGS}/${key}`);
    } finally {
      await provider.onClose();
    }
  },
  T,
);

/**
 * Waits until the provider holds what GET /v1/definitions says now (its version: the change
 * log's last position, which the last write made, to this environment).
 */
async function caughtUp(provider: Provider, timeoutMs = 10_000): Promise<void> {
  const { version } = await api("GET", "/v1/definitions", undefined, serverKey);
  const end = Date.now() + timeoutMs;
  while ((provider.version ?? 0) < version) {
    if (Date.now() > end) throw new Error(`the provider is at version ${provider.version}, the server at ${version}`);
    await Bun.sleep(10);
  }
}

test(
  "changes through the API reach the provider: update, state toggle, rollout, delete (ConfigurationChanged with the key)",
  async () => {
    const provider = await connect();
    const delays: Record<string, number> = {};
    try {
      let changed = changeOf(provider, "live");
      await api("POST", FLAGS, { key: "live", name: "Live", rules: [{ name: "pro", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] });
      delays.create = await changed;
      expect(provider.evaluate("live", { targetingKey: "u1", plan: "pro" }).reason).toBe("FLAG_DISABLED");

      changed = changeOf(provider, "live");
      await api("PUT", `${FLAGS}/live/states/production`, { enabled: true });
      delays.enable = await changed;
      expect(provider.resolveBooleanEvaluation("live", false, { targetingKey: "u1", plan: "pro" })).toMatchObject({ value: true, reason: "TARGETING_MATCH" });

      changed = changeOf(provider, "live");
      await api("PATCH", `${FLAGS}/live`, { rules: [{ name: "team", conditions: [{ attribute: "plan", operator: "equals", value: "team" }] }] });
      delays.update = await changed;
      expect(provider.resolveBooleanEvaluation("live", false, { targetingKey: "u1", plan: "pro" })).toMatchObject({ value: true, reason: "DEFAULT" });

      changed = changeOf(provider, "live");
      await api("PUT", `${FLAGS}/live/states/production`, { enabled: true, rolloutPercentage: 0 });
      delays.rollout = await changed;
      expect(provider.resolveBooleanEvaluation("live", true, { targetingKey: "u1", plan: "pro" })).toMatchObject({ value: false, reason: "SPLIT" });

      changed = changeOf(provider, "live");
      await api("PUT", `${FLAGS}/live/states/production`, { enabled: false });
      delays.disable = await changed;
      expect(provider.resolveBooleanEvaluation("live", true, { targetingKey: "u1" })).toMatchObject({ value: false, reason: "DISABLED" });

      // Another environment's state is not this provider's business.
      const before = provider.version;
      await api("PUT", `${FLAGS}/live/states/staging`, { enabled: true });
      changed = changeOf(provider, "live");
      await api("DELETE", `${FLAGS}/live`);
      delays.delete = await changed;
      expect(provider.version).toBeGreaterThan(before!);
      expect(provider.resolveBooleanEvaluation("live", true, {})).toMatchObject({ value: true, errorCode: "FLAG_NOT_FOUND" });
      console.log(`local-provider: change -> provider (ms, from the API request): ${Object.entries(delays).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ")}`);
      for (const ms of Object.values(delays)) expect(ms).toBeLessThan(5_000);
    } finally {
      await provider.onClose();
    }
  },
  T,
);

test(
  "a dropped connection: the last state meanwhile, STALE, then in sync with what changed meanwhile (a resume with Last-Event-ID)",
  async () => {
    await api("POST", FLAGS, { key: "drop", name: "Drop" });
    await api("PUT", `${FLAGS}/drop/states/production`, { enabled: true });
    const proxy = await tcpProxy(port);
    const provider = await connect({ via: proxy, staleAfterMs: 500 });
    try {
      expect(provider.resolveBooleanEvaluation("drop", false, {}).value).toBe(true);
      const stale = nextEvent(provider, ProviderEvents.Stale);
      proxy.cut();
      await stale;
      // Changed while it cannot hear: it keeps answering from what it had.
      await api("PUT", `${FLAGS}/drop/states/production`, { enabled: false });
      expect(provider.resolveBooleanEvaluation("drop", false, {})).toMatchObject({ value: true, reason: "STATIC" });
      const ready = nextEvent(provider, ProviderEvents.Ready);
      const changed = changeOf(provider, "drop");
      const connections = proxy.connections();
      proxy.restore();
      await changed;
      await ready;
      expect(proxy.connections()).toBeGreaterThan(connections);
      expect(provider.resolveBooleanEvaluation("drop", true, {})).toMatchObject({ value: false, reason: "DISABLED" });
    } finally {
      await provider.onClose();
      await proxy.close();
      await api("DELETE", `${FLAGS}/drop`);
    }
  },
  T,
);

test(
  "a connection that goes silent (no ping) is replaced after heartbeatTimeoutMs, and resumes",
  async () => {
    await api("POST", FLAGS, { key: "silent", name: "Silent" });
    const proxy = await tcpProxy(port);
    const provider = await connect({ via: proxy, heartbeatTimeoutMs: 1500, staleAfterMs: 60_000 });
    try {
      const connections = proxy.connections();
      proxy.blackhole();
      await api("PUT", `${FLAGS}/silent/states/production`, { enabled: true });
      const took = await changeOf(provider, "silent", performance.now(), 10_000);
      expect(proxy.connections()).toBeGreaterThan(connections);
      expect(took).toBeGreaterThan(1000);
      expect(provider.resolveBooleanEvaluation("silent", false, {}).value).toBe(true);
    } finally {
      await provider.onClose();
      await proxy.close();
      await api("DELETE", `${FLAGS}/silent`);
    }
  },
  T,
);

test(
  "a server restart: the last state meanwhile, STALE, then in sync again, with a change made while the provider could not connect",
  async () => {
    await api("POST", FLAGS, { key: "restart", name: "Restart", variants: [{ key: "a", weight: 50 }, { key: "b", weight: 50 }] });
    await api("PUT", `${FLAGS}/restart/states/production`, { enabled: true });
    const proxy = await tcpProxy(port);
    const provider = await connect({ via: proxy, staleAfterMs: 500 });
    try {
      const users = Array.from({ length: 50 }, (_, i) => `user-${i}`);
      const before = users.map((u) => provider.resolveStringEvaluation("restart", "none", { targetingKey: u }).value);
      expect(new Set(before)).toEqual(new Set(["a", "b"]));

      const stale = nextEvent(provider, ProviderEvents.Stale);
      expect(await srv.stop()).toBe(0);
      await stale;
      expect(users.map((u) => provider.resolveStringEvaluation("restart", "none", { targetingKey: u }).value)).toEqual(before);

      // Back on the same data dir and port, the provider kept away while a change is made.
      proxy.cut();
      srv = await start();
      await api("PUT", `${FLAGS}/restart/states/production`, { enabled: false });
      expect(users.map((u) => provider.resolveStringEvaluation("restart", "none", { targetingKey: u }).value)).toEqual(before);
      const ready = nextEvent(provider, ProviderEvents.Ready);
      const changed = changeOf(provider, "restart");
      proxy.restore();
      await changed;
      await ready;
      for (const u of users) {
        expect(provider.resolveStringEvaluation("restart", "none", { targetingKey: u })).toMatchObject({ value: "none", reason: "DISABLED" });
        expect(withoutTime(provider.evaluate("restart", { targetingKey: u }))).toEqual((await serverAnswers(["restart"], { userId: u })).restart!);
      }
    } finally {
      await provider.onClose();
      await proxy.close();
      await api("DELETE", `${FLAGS}/restart`);
    }
  },
  T,
);

test(
  "a refused key: initialize rejects (PROVIDER_FATAL); a client key (a web page's) is refused too (403); a key deleted while followed ends in PROVIDER_ERROR, fatal",
  async () => {
    const doomed = await api("POST", "/v1/projects/default/api-keys", { name: "doomed", scope: "test", environment: "production" });
    const followed = await connect({ apiKey: doomed.key });
    await OpenFeature.setProviderAndWait("doomed", followed);
    const client = OpenFeature.getClient("doomed");
    const errored = new Promise<Record<string, unknown>>((resolve) => followed.events.addHandler(ProviderEvents.Error, (d) => resolve((d ?? {}) as Record<string, unknown>)));
    await api("DELETE", `/v1/api-keys/${doomed.id}`);
    expect(await errored).toMatchObject({ errorCode: "PROVIDER_FATAL", message: expect.stringContaining("refused the API key (401") });
    expect(client.providerStatus).toBe(ProviderStatus.FATAL);
    expect(await client.getBooleanDetails("anything", true)).toMatchObject({ value: true, errorCode: "PROVIDER_FATAL" });
    await OpenFeature.clearProviders();

    const clientKey = (await api("POST", "/v1/projects/default/api-keys", { name: "web", scope: "client", environment: "production" })).key;
    for (const apiKey of ["svc_sk_mgmt_nonsense", clientKey]) {
      const provider = new mod.FlagsvcProvider({ baseUrl: srv.url, apiKey, fetch: insecureFetch, logger: silent });
      const error = await provider.initialize().catch((e) => e);
      expect(error).toMatchObject({ code: "PROVIDER_FATAL" });
      expect(error.message).toMatch(/refused the API key \((401|403)/);
      await provider.onClose();
    }
  },
  T,
);

test(
  "the bundle loads in Node (ESM), connects to the binary and evaluates",
  async () => {
    await api("POST", FLAGS, { key: "in-node", name: "In Node", variants: [{ key: "x" }, { key: "y" }] });
    await api("PUT", `${FLAGS}/in-node/states/production`, { enabled: true });
    const script = `
      const { OpenFeature } = await import("@openfeature/server-sdk");
      const { FlagsvcProvider } = await import(${JSON.stringify(BUNDLE)});
      const provider = new FlagsvcProvider({ baseUrl: ${JSON.stringify(srv.url)}, apiKey: ${JSON.stringify(serverKey)} });
      await OpenFeature.setProviderAndWait(provider);
      const details = await OpenFeature.getClient().getStringDetails("in-node", "none", { targetingKey: "someone" });
      console.log(JSON.stringify({ node: process.version, version: provider.version, details }));
      await OpenFeature.close();
    `;
    // The binary's own certificate as the CA (what the provider's README says to do), not NODE_TLS_REJECT_UNAUTHORIZED=0.
    const ca = join(dataDir, "tls", "cert.pem");
    const node = Bun.spawn(["node", "--input-type=module", "-e", script], { cwd: ROOT, env: baseEnv({ NODE_EXTRA_CA_CERTS: ca }), stdout: "pipe", stderr: "pipe" });
    const timer = setTimeout(() => node.kill(), 30_000);
    const [out, err, code] = await Promise.all([new Response(node.stdout).text(), new Response(node.stderr).text(), node.exited]);
    clearTimeout(timer);
    expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
    const answer = JSON.parse(out.trim().split("\n").pop()!);
    expect(answer.node).toMatch(/^v(1[89]|[2-9]\d)\./);
    expect(answer.version).toBeGreaterThan(0);
    expect(answer.details).toMatchObject({ flagKey: "in-node", value: "x", variant: "x", reason: "STATIC", flagMetadata: { reason: "FLAG_ENABLED", environment: "production" } });
    await api("DELETE", `${FLAGS}/in-node`);
  },
  T,
);
