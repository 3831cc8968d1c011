/**
 * The audit log on a log of 1,000,000 entries, through the compiled binary over HTTPS
 * keep-alive. The data dir is made by the binary (schema, the `default` project, the admin
 * key), then filled straight in SQL while the binary is stopped: 1,000,000 change_log entries in
 * transactions of 100,000 (about 70 % in `default`, the rest in three other projects and 2 %
 * instance-level), over 300 days, 2,000 flag keys a project, of which 10 "hot" keys hold about
 * 2 % of their project's entries each (long histories), flag and flag-state entries by 20 users.
 * The binary is started again on it and measured, `--clients` callers each keeping one request
 * in flight, `--requests` requests a case:
 *  - `GET /v1/projects/default/audit-log?resourceKey=KEY`, keys varied: half hot, half not
 *    (the target: p99 under 50 ms);
 *  - `GET /v1/audit-log`, the instance's first page, and a page deep in (a cursor in the middle
 *    of the log), and the project's deep page; filters without an index that match nothing
 *    near the top (each page examines its scan window, 10,000 entries, and stops);
 *  - the NDJSON export of the whole `default` log: its time, entries a second, and the
 *    server's peak resident memory before and after (it reads 500 entries at a time).
 * Server on CPU 0, this process on CPU 1 when the machine has two.
 * `--data DIR` keeps the data dir there and reuses it on the next run (built when DIR is absent).
 * Usage: scripts/bench/audit [--binary PATH] [--data DIR] [--entries N] [--requests N] [--clients N]
 */
import { Database } from "bun:sqlite";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { encodeCursor } from "../../src/modules/audit/service";
import { benchBinary, benchWorkspace, launchBinary } from "../lib/binary";
import { percentile, pinServer } from "../lib/wrk";
import { ADMIN_KEY } from "../lib/writes";
import { argOf } from "../lib/proc";

const ENTRIES = Number(argOf("--entries") ?? 1_000_000);
const REQUESTS = Number(argOf("--requests") ?? 2000);
const CLIENTS = Number(argOf("--clients") ?? 4);
const KEYS = 2000;
const HOT = 10;
const TARGET_P99_MS = 50;
const ENV = { SVC_LOG_LEVEL: "warn", SVC_ADMIN_KEY: ADMIN_KEY, SVC_RATE_LIMITS: "admin:100000000" };
const DAY = 86_400_000;

const binary = benchBinary(argOf("--binary"), "audit");
const { dir, live } = benchWorkspace("audit");
const dataDir = argOf("--data") ?? join(dir, "data");
const key = (i: number) => `flag-${String(i).padStart(4, "0")}`;

/** A deterministic generator (xorshift32): the same log on every run. */
let seed = 2463534242;
const random = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
};

/** The binary's own data dir (schema, `default`, admin key), stopped again. */
async function prepare(): Promise<void> {
  const { proc } = await launchBinary(binary, dataDir, ENV);
  proc.kill("SIGTERM");
  await proc.exited;
}

/** ENTRIES change-log entries, straight in SQL; the `default` project's id. */
function fill(): string {
  const db = new Database(join(dataDir, "flagsvc.db"));
  const defaultId = db.query<{ id: string }, []>("SELECT id FROM projects WHERE slug = 'default'").get()!.id;
  const projects = [
    { id: defaultId, slug: "default" },
    { id: "proj_bench_a", slug: "bench-a" },
    { id: "proj_bench_b", slug: "bench-b" },
    { id: "proj_bench_c", slug: "bench-c" },
  ];
  const insert = db.query(`INSERT INTO change_log
    (id, at, actor_type, actor_id, actor_label, request_id, project_id, project_slug, environment, resource_type, resource_id, resource_key, action, changes)
    VALUES (?1, ?2, 'user', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)`);
  const start = Date.now() - 300 * DAY;
  const BATCH = 100_000;
  for (let done = 0; done < ENTRIES; done += BATCH) {
    db.transaction(() => {
      for (let i = done; i < Math.min(done + BATCH, ENTRIES); i++) {
        const ms = start + Math.floor((i / ENTRIES) * 300 * DAY);
        const user = Math.floor(random() * 20);
        const r = random();
        const project = r < 0.02 ? null : r < 0.72 ? projects[0]! : projects[1 + Math.floor(random() * 3)]!;
        const k = random() < 0.2 ? Math.floor(random() * HOT) : HOT + Math.floor(random() * (KEYS - HOT));
        const state = random() < 0.6;
        const id = `aud_${String(i).padStart(8, "0")}${"x".repeat(22)}`;
        const actor = [`usr_bench${user}`, `user${user}@example.com`, `req_${i}`] as const;
        if (project === null) {
          insert.run(id, new Date(ms).toISOString(), ...actor, null, null, null, "user", `usr_t${k}`, `target${k}@example.com`, "updated", '{"role":{"before":"viewer","after":"editor"}}');
          continue;
        }
        const on = random() < 0.5;
        insert.run(
          id,
          new Date(ms).toISOString(),
          ...actor,
          project.id,
          project.slug,
          state ? ["development", "staging", "production"][i % 3]! : null,
          state ? "flag_state" : "flag",
          `flag_${project.slug}_${k}`,
          key(k),
          state ? (on ? "enabled" : "disabled") : "updated",
          state ? `{"enabled":{"before":${!on},"after":${on}}}` : `{"name":{"before":"Flag ${k} v${i - 1}","after":"Flag ${k} v${i}"}}`,
        );
      }
    })();
  }
  // The statistics a server that lived through this growth has (its PRAGMA optimize every 6
  // hours re-analyzes a table grown tenfold); those of the nearly empty log of the first start
  // would make SQLite scan the table for a deep page of the instance log (docs/decisions.md).
  db.run("ANALYZE");
  db.close();
  return defaultId;
}

const get = async (base: string, path: string) => {
  const t0 = performance.now();
  const res = await fetch(base + path, { headers: { authorization: `Bearer ${ADMIN_KEY}` }, tls: { rejectUnauthorized: false } });
  const body = (await res.json()) as { entries: unknown[] };
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(body)}`);
  return { ms: performance.now() - t0, entries: body.entries.length };
};

/** REQUESTS calls of `path(i)`, CLIENTS at a time: latencies in ms, and entries answered on average. */
async function measure(base: string, path: (i: number) => string): Promise<{ latencies: number[]; entries: number }> {
  const latencies: number[] = [];
  let entries = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < REQUESTS) {
        const r = await get(base, path(next++));
        latencies.push(r.ms);
        entries += r.entries;
      }
    }),
  );
  return { latencies, entries: entries / REQUESTS };
}

const peakRss = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

console.log(`audit log bench: ${ENTRIES.toLocaleString("en")} entries, ${REQUESTS} requests a case, ${CLIENTS} clients, HTTPS keep-alive, admin key`);
let t0 = performance.now();
if (existsSync(dataDir)) console.log(`  reusing the log in ${dataDir}`);
else {
  await prepare();
  fill();
  console.log(`  log built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
const { proc, base } = await launchBinary(binary, dataDir, ENV);
live.add(proc);
const cpu = pinServer(proc.pid);
if (cpu !== undefined) Bun.spawnSync(["taskset", "-a", "-cp", String(cpu), String(process.pid)], { stdout: "ignore" });
console.log(cpu === undefined ? "  (one CPU: server and clients share it)" : `  server on CPU 0, clients on CPU ${cpu}`);

// Warm-up: every kind of statement compiled, the pages of the indexes in the cache as in use.
await measure(base, (i) => `/v1/projects/default/audit-log?resourceKey=${key(i % KEYS)}`);

const cases: [string, (i: number) => string][] = [
  ["project, resourceKey (half hot keys)", (i) => `/v1/projects/default/audit-log?resourceKey=${key(i % 2 === 0 ? i % HOT : HOT + ((i * 7919) % (KEYS - HOT)))}`],
  ["project, resourceKey, hot keys only", (i) => `/v1/projects/default/audit-log?resourceKey=${key(i % HOT)}`],
  ["instance, first page", () => "/v1/audit-log"],
  ["instance, deep page (cursor at the middle)", (i) => `/v1/audit-log?cursor=${encodeCursor(Math.floor(ENTRIES / 2) - i)}`],
  ["project, deep page (cursor at the middle)", (i) => `/v1/projects/default/audit-log?cursor=${encodeCursor(Math.floor(ENTRIES / 2) - i)}`],
  ["instance, actorId of no entry (a scan window a page)", (i) => `/v1/audit-log?actorId=usr_nobody${i}`],
  ["instance, until 200 days ago (a scan window a page)", () => `/v1/audit-log?until=${new Date(Date.now() - 200 * DAY).toISOString()}`],
  ["project, resourceKey, deep (cursor at the middle)", (i) => `/v1/projects/default/audit-log?resourceKey=${key(i % HOT)}&cursor=${encodeCursor(Math.floor(ENTRIES / 2) - i)}`],
];
for (const [label, path] of cases) {
  const { latencies, entries } = await measure(base, path);
  const p99 = percentile(latencies, 99);
  const verdict = label.startsWith("project, resourceKey (half") ? (p99 < TARGET_P99_MS ? `  target p99 < ${TARGET_P99_MS} ms: met` : `  target p99 < ${TARGET_P99_MS} ms: NOT met`) : "";
  console.log(`  ${label.padEnd(54)} p50 ${percentile(latencies, 50).toFixed(2)} ms   p99 ${p99.toFixed(2)} ms   ${entries.toFixed(0)} entries/answer${verdict}`);
}

// The export: the whole `default` log as NDJSON, read as it comes.
const before = peakRss(proc.pid);
t0 = performance.now();
const res = await fetch(`${base}/v1/projects/default/audit-log`, { headers: { authorization: `Bearer ${ADMIN_KEY}`, accept: "application/x-ndjson" }, tls: { rejectUnauthorized: false } });
let lines = 0;
let bytes = 0;
const reader = res.body!.getReader();
for (let read = await reader.read(); !read.done; read = await reader.read()) {
  bytes += read.value.byteLength;
  for (const b of read.value) if (b === 10) lines++;
}
const seconds = (performance.now() - t0) / 1000;
console.log(
  `  NDJSON export of default: ${lines.toLocaleString("en")} entries, ${(bytes / 1048576).toFixed(0)} MiB in ${seconds.toFixed(1)} s (${Math.round(lines / seconds).toLocaleString("en")} entries/s); server peak RSS ${before.toFixed(0)} MiB before, ${peakRss(proc.pid).toFixed(0)} MiB after`,
);
proc.kill("SIGTERM");
await proc.exited;
