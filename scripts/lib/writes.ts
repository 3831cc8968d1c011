/**
 * Flag writes against a running binary, for the benches that measure them (writes.ts) or their
 * cost to evaluation (mixed.ts): a server seeded with flags, and writers that toggle states and
 * rename flags, each write a real change (a write that changes nothing is not stored).
 */
import type { Subprocess } from "bun";
import { apiClient, pool } from "./api";
import { launchBinary } from "./binary";

export const ADMIN_KEY = `svc_admin_${"w".repeat(40)}`;
const api = apiClient(ADMIN_KEY);
export const flagKey = (i: number) => `flag-${String(i).padStart(5, "0")}`;
const RULES = [
  { name: "internal", conditions: [{ attribute: "email", operator: "contains", value: "@example.internal" }, { attribute: "beta", operator: "is_true" }] },
  { name: "big accounts", conditions: [{ attribute: "country", operator: "in", value: ["US", "CA", "MX"] }, { attribute: "seats", operator: "greater_than", value: 500 }] },
];

export interface Seeded {
  proc: Subprocess;
  base: string;
  flags: number;
}

/**
 * Starts `binary` on `dataDir` with the admin key and every rate limit of `limits` raised out of
 * reach (the limiter still runs), and creates `flags` flags of two rules, enabled at 50 % in
 * production. No webhook is registered. `env`: more SVC_* settings (e.g. SVC_DATABASE_URL).
 */
export async function seededServer(binary: string, dataDir: string, flags: number, limits: string[], env: Record<string, string> = {}): Promise<Seeded> {
  const { proc, base } = await launchBinary(binary, dataDir, {
    SVC_LOG_LEVEL: "warn",
    SVC_ADMIN_KEY: ADMIN_KEY,
    SVC_RATE_LIMITS: limits.map((kind) => `${kind}:100000000`).join(","),
    ...env,
  });
  await pool(flags, 16, async (i) => {
    await api(base, "POST", "/v1/projects/default/flags", { key: flagKey(i), name: `Flag ${i}`, rules: RULES });
    await api(base, "PUT", `/v1/projects/default/flags/${flagKey(i)}/states/production`, { enabled: true, rolloutPercentage: 50 });
  });
  return { proc, base, flags };
}

export type WriteKind = "state" | "patch";

/** Per server, the flags whose `enabled` a writer flipped, and to what: the next writer flips it back. */
const flagsEnabled = new WeakMap<Seeded, Map<number, boolean>>();

/**
 * One writer's next write on flag `i`: a state PUT that flips `enabled` (every flag starts
 * enabled, and one writer at a time touches it, so the flip is always a change), or a PATCH that
 * renames the flag and, every other time, drops or restores its second rule (rules sent
 * without ids get new ones: every PATCH is a change). Returns the latency
 * in ms; anything but 200 throws.
 */
export function writer(server: Seeded) {
  const enabled = flagsEnabled.get(server) ?? flagsEnabled.set(server, new Map()).get(server)!;
  let revision = 0;
  return async function write(kind: WriteKind, i: number): Promise<number> {
    const key = flagKey(i);
    const t0 = performance.now();
    if (kind === "state") {
      const next = !(enabled.get(i) ?? true);
      enabled.set(i, next);
      await api(server.base, "PUT", `/v1/projects/default/flags/${key}/states/production`, { enabled: next });
    } else {
      revision++;
      await api(server.base, "PATCH", `/v1/projects/default/flags/${key}`, { name: `Flag ${i} r${revision}`, rules: revision % 2 === 0 ? RULES : RULES.slice(0, 1) });
    }
    return performance.now() - t0;
  };
}

/**
 * `clients` writers, each on its own flags (client c writes flags c, c + clients, ...), each
 * keeping one write of `kind` in flight, for `seconds`. Returns every write's latency in ms.
 */
export async function saturate(server: Seeded, kind: WriteKind, clients: number, seconds: number): Promise<number[]> {
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const write = writer(server);
      for (let i = c; performance.now() < until; i = (i + clients) % server.flags) latencies.push(await write(kind, i));
    }),
  );
  return latencies;
}

/**
 * Writes at `perSecond` until `stop()`, alternating state PUTs and PATCHes on flags in turn,
 * started on a fixed schedule (a slow answer does not delay the next start). Resolves, after
 * `stop()`, with every write's latency in ms and how many were started late because `maxInFlight`
 * writes were still unanswered.
 */
export function paced(server: Seeded, perSecond: number, maxInFlight = 16): { stop: () => Promise<{ latencies: number[]; skipped: number }> } {
  const write = writer(server);
  const latencies: number[] = [];
  const inFlight = new Set<Promise<void>>();
  let n = 0;
  let skipped = 0;
  let failure: unknown;
  const t0 = performance.now();
  const timer = setInterval(() => {
    // Catch up on ticks the timer fired late, so that the rate holds.
    const due = Math.floor(((performance.now() - t0) * perSecond) / 1000);
    while (n < due) {
      if (inFlight.size >= maxInFlight) {
        skipped += due - n;
        n = due;
        break;
      }
      const i = n++;
      const p: Promise<void> = write(i % 2 === 0 ? "state" : "patch", Math.floor(i / 2) % server.flags)
        .then((ms) => void latencies.push(ms), (e) => void (failure ??= e))
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
  }, 2);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
      if (failure) throw failure;
      return { latencies, skipped };
    },
  };
}
