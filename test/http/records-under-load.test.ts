/**
 * Readers of the evaluation records while the request thread is busy (issue 29): a plugin on
 * `onEvaluations`, fed by evaluations through HTTP, gets one batch a second and counts the rest in
 * `evaluationsDropped`; not busy, it gets every batch it can take. `recordsBusy` stands in for the
 * server's gauge (lib/scheduling's busyGauge, tested in test/unit/evaluation-records.test.ts).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_BATCH } from "../../src/modules/evaluation/records";
import { bearer, json, seedAdminKey, seedApiKey, testApp, until, type TestApp } from "../helpers";

const NAME = "@test/counter";
let busy = false;
let h: TestApp;
let admin: Record<string, string>;
let evalKey: string;
let id: string;

beforeAll(async () => {
  h = await testApp({}, undefined, { recordsBusy: () => busy });
  admin = bearer(await seedAdminKey(h.ctx));
  evalKey = (await seedApiKey(h.ctx, "eval")).secret;
  const folder = join(h.dir, "marketplace", "counter");
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "index.js"), `let n = 0;\nexport function onEvaluations(batch, ctx) { n += batch.length; ctx.log("info", batch[0].userId + " " + n); }`);
  const configSchema = { type: "object", properties: {}, additionalProperties: false };
  const manifest = { packageName: NAME, name: "Counter", description: "Counts records", category: "analytics", version: "1.0.0", author: "tests", entry: "index.js", hooks: ["onEvaluations"], configSchema, publishedAt: "2026-11-28T00:00:00.000Z" };
  writeFileSync(join(folder, "plugin.json"), JSON.stringify(manifest));
  await until("the package", () => h.ctx.catalog.get(NAME, "1.0.0"));
  id = (await json(await h.request("POST", "/v1/projects/default/plugins", { body: { packageName: NAME, config: {} }, headers: admin }), 201)).id;
  await until("active", async () => (await status()).status === "active");
});

afterAll(async () => {
  await h.ctx.plugins.stopAll();
  h.close();
});

const status = async () => json(await h.request("GET", `/v1/projects/default/plugins/${id}/status`, { headers: admin }), 200);
const lines = async () => ((await status()).logs as { message: string }[]).map((l) => l.message);
const flags = Array.from({ length: 50 }, (_, i) => `f${i}`);

/** One batch of the stream: ten batch evaluations of 50 flags, for user `user`. */
async function batchOf(user: string): Promise<void> {
  for (let i = 0; i < MAX_BATCH / flags.length; i++) {
    const res = await h.request("POST", "/v1/evaluate/batch", { body: { flags, context: { userId: user } }, headers: bearer(evalKey) });
    expect(res.status).toBe(200);
  }
}

test("busy: one batch a second reaches the plugin, the others are counted as dropped; not busy: every batch", async () => {
  busy = true;
  for (const user of ["a", "b", "c", "d"]) await batchOf(user);
  await until("the first batch", async () => (await lines()).includes("a 500"));
  expect((await status()).stats.evaluationsDropped).toBe(3 * MAX_BATCH);
  // A second later a busy server hands it one more.
  await Bun.sleep(1100);
  await batchOf("e");
  await batchOf("f");
  await until("the batch after a second", async () => (await lines()).includes("e 1000"));
  expect((await status()).stats.evaluationsDropped).toBe(4 * MAX_BATCH);
  // Not busy: each batch, once the plugin took the last one.
  busy = false;
  for (const [user, n] of [["g", 1500], ["h", 2000], ["i", 2500]] as const) {
    await batchOf(user);
    await until(`batch ${user}`, async () => (await lines()).includes(`${user} ${n}`));
  }
  expect((await status()).stats.evaluationsDropped).toBe(4 * MAX_BATCH);
  expect((await lines()).filter((l) => /^[a-i] \d+$/.test(l))).toEqual(["a 500", "e 1000", "g 1500", "h 2000", "i 2500"]);
});
