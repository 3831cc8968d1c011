/**
 * The integrations thread (src/modules/integrations/thread.ts + worker.ts, a real worker over a
 * real SQLite file): batches reach the sender in the worker; beyond 16 batches not yet taken,
 * a batch is dropped on the main thread without a copy, and its records are counted in the
 * project's integrations' `failed` once the worker takes a batch again.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { DB_FILE, openDatabase } from "../../src/db/client";
import { migrate } from "../../src/db/migrate";
import { createLogger } from "../../src/lib/log";
import { IntegrationThread, MAX_BATCHES_IN_FLIGHT } from "../../src/modules/integrations/thread";
import { tempDir, until } from "../helpers";
import { startReceiver } from "../webhook-receiver";

const dir = tempDir();
const rx = startReceiver({ answer: (_req, n) => Response.json({ code: 200, num_records_imported: rx.received[n - 1]!.json.length, status: "OK" }) });
afterAll(() => {
  rx.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("batches past 16 waiting are dropped on the main thread and counted as failed; the others are sent", async () => {
  const { sqlite } = openDatabase(join(dir, DB_FILE));
  migrate(sqlite);
  const at = "2026-11-26T10:00:00.000Z";
  sqlite.run("INSERT INTO projects (id, slug, name, created_at, updated_at) VALUES ('p', 'p', 'p', ?, ?)", [at, at]);
  const config = JSON.stringify({ projectToken: "t", apiHost: `http://127.0.0.1:${rx.port}` });
  sqlite.run("INSERT INTO integrations (id, project_id, type, config, enabled, created_at, updated_at) VALUES ('int_1', 'p', 'mixpanel', ?, 1, ?, ?)", [config, at, at]);
  const log = createLogger({ level: "warn", format: "json", write: () => {} });
  const thread = new IntegrationThread({ file: join(dir, DB_FILE), config: loadConfig({ SVC_DATA_DIR: dir, SVC_OUTBOUND_ALLOWED_HOSTS: "loopback" }), log, node: "test-node" });
  try {
    const batch = (n: number) =>
      JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ flagKey: "f", environment: "production", enabled: true, variant: null, reason: "DEFAULT", ruleId: null, userId: `u${n}-${i}`, evaluatedAt: at })));
    // All in one turn of the event loop: no answer of the worker can come in between.
    for (let n = 0; n < 100; n++) thread.evaluations("p", batch(n), 10);
    const stats = () => sqlite.query<{ sent: number; failed: number; lastError: string | null }, []>("SELECT sent, failed, last_error AS lastError FROM integrations").get()!;
    await until("counted", () => stats().sent + stats().failed === 1000 && stats(), 15_000);
    expect(stats()).toEqual({ sent: MAX_BATCHES_IN_FLIGHT * 10, failed: (100 - MAX_BATCHES_IN_FLIGHT) * 10, lastError: expect.stringContaining("integrations thread is not keeping up") });
    const ids = new Set(rx.received.flatMap((r) => r.json.map((e: { properties: { $insert_id: string } }) => e.properties.$insert_id)));
    expect(ids.size).toBe(MAX_BATCHES_IN_FLIGHT * 10);
  } finally {
    await thread.stop();
    sqlite.close();
  }
}, 20_000);
