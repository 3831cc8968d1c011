/**
 * The evaluation snapshot kept up to date write by write must equal one built from scratch
 * from the database (what a restart builds), after any sequence of flag, state, environment
 * and project writes.
 */
import { afterEach, expect, test } from "bun:test";
import fc from "fast-check";
import { count } from "drizzle-orm";
import { environments, flags } from "../../src/db/schema";
import type { Snapshot } from "../../src/evaluation/snapshot";
import { loadSnapshot } from "../../src/modules/flags/snapshot";
import { SYSTEM } from "../../src/changes/entry";
import { testApp, type TestApp, sqliteOf } from "../helpers";

let h: TestApp | undefined;
afterEach(() => h?.close());

/** Everything evaluation can observe, per environment id, in a comparable form. */
function view(snapshot: Snapshot, environmentIds: string[]) {
  const out: Record<string, unknown> = {};
  for (const id of environmentIds) {
    const entries = snapshot.environment(id);
    if (!entries) continue;
    out[id] = Object.fromEntries(
      [...entries].sort(([a], [b]) => a.localeCompare(b)).map(([key, { flag, state }]) => [
        key,
        { rules: flag.rules.map((r) => [r.id, r.conditions.length, r.variant]), variants: flag.variants, weights: flag.cumulativeWeights, bucketBy: flag.bucketBy, state },
      ]),
    );
  }
  return out;
}

const KEYS = ["a", "b"];
const ENVS = ["development", "staging", "production", "qa"];
const op = fc.oneof(
  fc.record({ kind: fc.constant("create" as const), key: fc.constantFrom(...KEYS), weighted: fc.boolean() }),
  fc.record({ kind: fc.constant("patch" as const), key: fc.constantFrom(...KEYS), rules: fc.integer({ min: 0, max: 3 }), bucketBy: fc.constantFrom(undefined, null, "userId", "accountId") }),
  fc.record({ kind: fc.constant("state" as const), key: fc.constantFrom(...KEYS), env: fc.constantFrom(...ENVS), enabled: fc.boolean(), rollout: fc.option(fc.integer({ min: 0, max: 100_000 }).map((n) => n / 1000)) }),
  fc.record({ kind: fc.constant("delete" as const), key: fc.constantFrom(...KEYS) }),
  fc.record({ kind: fc.constant("addEnv" as const) }),
  fc.record({ kind: fc.constant("dropEnv" as const) }),
  fc.record({ kind: fc.constant("project" as const), create: fc.boolean() }),
);

test("incremental updates equal a rebuild from the database", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 60 }), async (ops) => {
      h?.close();
      h = await testApp({ SVC_LOG_LEVEL: "warn" });
      const ctx = h.ctx;
      const { flags: f, projects: p } = h.services;
      for (const o of ops) {
        try {
          for (const slug of ["default", "side"]) {
            switch (o.kind) {
              case "create":
                await f.createFlag(SYSTEM, slug, { key: o.key, name: o.key, variants: o.weighted ? [{ key: "x", weight: 25 }, { key: "y", weight: 75 }] : [] });
                break;
              case "patch":
                await f.updateFlag(SYSTEM, slug, o.key, { rules: Array.from({ length: o.rules }, (_, i) => ({ conditions: [{ attribute: "n", operator: "greater_than" as const, value: i }] })), bucketBy: o.bucketBy });
                break;
              case "state":
                await f.putState(SYSTEM, slug, o.key, o.env, { enabled: o.enabled, rolloutPercentage: o.rollout });
                break;
              case "delete":
                await f.deleteFlag(SYSTEM, slug, o.key);
                break;
              case "addEnv":
                await p.createEnvironment(SYSTEM, slug, { slug: "qa", name: "QA" });
                break;
              case "dropEnv":
                await p.deleteEnvironment(SYSTEM, slug, "qa");
                break;
              case "project":
                if (slug !== "side") break;
                if (o.create) await p.create(SYSTEM, { slug: "side", name: "Side" });
                else await p.delete(SYSTEM, "side");
            }
          }
        } catch (e) {
          // Refused writes (404, 409) are part of the sequence: they must change nothing.
          if (!(e instanceof Error && "status" in e)) throw e;
        }
      }
      const ids = sqliteOf(ctx).db.select({ id: environments.id }).from(environments).all().map((e) => e.id);
      expect(view(ctx.snapshot, ids)).toEqual(view(await loadSnapshot(ctx.stores.flags), ids));
      expect(ctx.snapshot.flagCount()).toBe(sqliteOf(ctx).db.select({ n: count() }).from(flags).get()!.n);
    }),
    { numRuns: 25 },
  );
  // 25 apps on real SQLite files: about 5 s here, more on a busy machine.
}, 60_000);
