/**
 * Evaluation insights through the compiled binary (docs/insights.md): evaluations, a flush
 * interval (SVC_INSIGHTS_FLUSH_SECONDS=1 here), kill -9, restart on the same data dir: the
 * flushed counts are there, and what came after the last flush is all that may be lost. Then a
 * graceful stop (SIGTERM) loses nothing: it flushes last.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"insi".repeat(10)}`;
const FLAGS = "/v1/projects/default/flags";
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_INSIGHTS_FLUSH_SECONDS: "1", SVC_LOG_FORMAT: "json" };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

const call = async (srv: RunningBinary, method: string, path: string, body?: unknown, status = 200, key = ADMIN_KEY) => {
  const res = await callServer(srv.url, method, path, { key, body });
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
};
/** The flag's production counts of the last 24 hours, summed. */
async function totals(srv: RunningBinary): Promise<{ total: number; on: number; lastEvaluatedAt: string | null }> {
  const body = await call(srv, "GET", `${FLAGS}/checkout/insights?environment=production`);
  let total = 0;
  let on = 0;
  for (const p of body.points) {
    total += p.total;
    on += p.byVariant.on ?? 0;
  }
  return { total, on, lastEvaluatedAt: body.lastEvaluatedAt };
}

test(
  "kill -9 after a flush interval, restart: the counts are there; a graceful stop loses none",
  async () => {
    const cwd = tempDir();
    let srv = await startBinary({ cwd, env: ENV });
    try {
      await call(srv, "POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
      await call(srv, "PUT", `${FLAGS}/checkout/states/production`, { enabled: true });
      const evalKey = (await call(srv, "POST", "/v1/projects/default/api-keys", { name: "sdk", scope: "eval", environment: "production" }, 201)).key as string;
      const evaluate = async (n: number) => {
        for (let i = 0; i < n; i++) expect((await call(srv, "POST", "/v1/evaluate", { flagKey: "checkout", context: { userId: `u${i}` } }, 200, evalKey)).enabled).toBe(true);
      };

      await evaluate(25);
      // Shown at once (read-your-evaluations), before any flush.
      expect((await totals(srv)).total).toBe(25);
      await Bun.sleep(2_500); // more than a flush interval
      await evaluate(5); // after the last flush: these may be lost
      srv.proc.kill("SIGKILL");
      await srv.proc.exited;

      srv = await startBinary({ cwd, env: ENV });
      const afterCrash = await totals(srv);
      console.log(`insights e2e: ${afterCrash.total} of 30 evaluations kept across kill -9 (25 made before the last flush)`);
      expect(afterCrash.total).toBeGreaterThanOrEqual(25);
      expect(afterCrash.total).toBeLessThanOrEqual(30);
      expect(afterCrash.on).toBe(afterCrash.total);
      expect(afterCrash.lastEvaluatedAt).not.toBeNull();
      const states = await call(srv, "GET", `${FLAGS}/checkout/states`);
      expect(states.states.map((s: { environment: string; lastEvaluatedAt: string | null }) => [s.environment, s.lastEvaluatedAt !== null])).toEqual([
        ["development", false],
        ["staging", false],
        ["production", true],
      ]);

      await evaluate(7);
      expect(await srv.stop("SIGTERM")).toBe(0);
      srv = await startBinary({ cwd, env: ENV });
      expect((await totals(srv)).total).toBe(afterCrash.total + 7);
    } finally {
      await srv.stop();
    }
  },
  60_000,
);
