/**
 * The change log survives a crash (issue 21): 8 clients write to the compiled binary (state
 * PUTs and flag PATCHes, each request with its own X-Request-Id), the process is killed with
 * SIGKILL in the middle, and restarted. Then every acknowledged write (a 2xx the client got)
 * has its entry, and no entry lacks its write: the last entry of each flag and of each state
 * holds what the database holds (earlier ones were changed by a later entry). The log is read
 * with SQLite once the restarted server has stopped; when the audit API exists, it must list
 * the same entries.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, tempDir, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"crash".repeat(8)}`;
const CLIENTS = 8;
/** Each client writes only to its own flags, one request at a time: each write changes something. */
const FLAGS_PER_CLIENT = 2;
const ENVIRONMENTS = ["development", "staging", "production"];
const BASE = "/v1/projects/default/flags";
const ENV = { SVC_ADMIN_KEY: ADMIN_KEY, SVC_RATE_LIMITS: "eval:100000,test:100000,mgmt:100000,full:100000,admin:100000,user:100000,anonymous:100000" };

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

interface Write {
  requestId: string;
  acknowledged: boolean;
}

/** One client's writes until `stop()`: alternately a PATCH of one of its flags' name and a state PUT that flips it. */
async function client(srv: RunningBinary, c: number, stopped: () => boolean, writes: Write[]): Promise<void> {
  const enabled = new Map<string, boolean>();
  for (let n = 0; !stopped(); n++) {
    const key = `crash-${c}-${n % FLAGS_PER_CLIENT}`;
    const env = ENVIRONMENTS[n % ENVIRONMENTS.length]!;
    const requestId = `crash-${c}-${n}`;
    const write: Write = { requestId, acknowledged: false };
    writes.push(write);
    const stateKey = `${key}/${env}`;
    const next = !(enabled.get(stateKey) ?? false);
    const [method, path, body] =
      n % 2 === 0 ? ["PATCH", `${BASE}/${key}`, { name: `Crash ${c} write ${n}` }] : ["PUT", `${BASE}/${key}/states/${env}`, { enabled: next, rolloutPercentage: n % 100 }];
    try {
      const res = await callServer(srv.url, method, path, { key: ADMIN_KEY, body, headers: { "x-request-id": requestId } });
      if (res.status >= 200 && res.status < 300) {
        write.acknowledged = true;
        if (method === "PUT") enabled.set(stateKey, next);
      } else throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    } catch (e) {
      if (stopped()) return; // the server was killed under this request: not acknowledged
      throw e;
    }
  }
}

test("kill -9 during a write load, restart: every acknowledged write has its entry, every entry its write", async () => {
  const cwd = tempDir();
  const dataDir = join(cwd, "data");
  let srv = await startBinary({ cwd, env: ENV, args: ["--data-dir", dataDir] });
  for (let c = 0; c < CLIENTS; c++) {
    for (let f = 0; f < FLAGS_PER_CLIENT; f++) {
      expect((await callServer(srv.url, "POST", BASE, { key: ADMIN_KEY, body: { key: `crash-${c}-${f}`, name: "Crash" } })).status).toBe(201);
    }
  }
  let killed = false;
  const writes: Write[] = [];
  const load = Array.from({ length: CLIENTS }, (_, c) => client(srv, c, () => killed, writes));
  await Bun.sleep(1_500);
  killed = true;
  srv.proc.kill("SIGKILL");
  await Promise.all([srv.proc.exited, ...load]);
  const acknowledged = writes.filter((w) => w.acknowledged).map((w) => w.requestId);
  expect(acknowledged.length).toBeGreaterThan(100);

  // Restarted on the same data dir: the log through the API (when it exists), then with SQLite once stopped.
  srv = await startBinary({ cwd, env: ENV, args: ["--data-dir", dataDir] });
  const viaApi = await auditApiRequestIds(srv);
  expect(await srv.stop()).toBe(0);

  const db = new Database(join(dataDir, "flagsvc.db"), { readonly: true });
  try {
    const entries = db
      .query("SELECT request_id, resource_type, resource_key, environment, action, changes FROM change_log WHERE request_id LIKE 'crash-%' ORDER BY position")
      .all() as { request_id: string; resource_type: string; resource_key: string; environment: string | null; changes: string }[];
    const logged = entries.map((e) => e.request_id);
    // Each write changes one resource: one entry, never two.
    expect(new Set(logged).size).toBe(logged.length);
    // Every acknowledged write has its entry.
    const inLog = new Set(logged);
    expect(acknowledged.filter((id) => !inLog.has(id))).toEqual([]);
    // Entries of writes the client never heard back about: at most the one in flight of each client.
    const sent = new Set(writes.map((w) => w.requestId));
    expect(logged.every((id) => sent.has(id))).toBe(true);
    expect(logged.length - acknowledged.length).toBeLessThanOrEqual(CLIENTS);
    expect(logged.length - acknowledged.length).toBeGreaterThanOrEqual(0);
    console.log(`audit-crash: ${writes.length} writes sent, ${acknowledged.length} acknowledged, ${logged.length} entries (${logged.length - acknowledged.length} of writes in flight at the kill)`);

    // No entry lacks its write: the last entry of each flag and each state holds what is stored.
    const last = new Map<string, Record<string, { after: unknown }>>();
    for (const e of entries) last.set(`${e.resource_type} ${e.resource_key} ${e.environment ?? ""}`, { ...last.get(`${e.resource_type} ${e.resource_key} ${e.environment ?? ""}`), ...JSON.parse(e.changes) });
    const names = db.query("SELECT key, name FROM flags").all() as { key: string; name: string }[];
    const states = db
      .query("SELECT f.key AS key, e.slug AS environment, s.enabled AS enabled, s.rollout_percentage AS rollout FROM flag_states s JOIN flags f ON f.id = s.flag_id JOIN environments e ON e.id = s.environment_id")
      .all() as { key: string; environment: string; enabled: number; rollout: number | null }[];
    let checked = 0;
    for (const [what, changes] of last) {
      const [type, key, environment] = what.split(" ") as [string, string, string];
      if (type === "flag") {
        expect({ what, name: changes.name!.after }).toEqual({ what, name: names.find((f) => f.key === key)!.name });
      } else {
        const row = states.find((s) => s.key === key && s.environment === environment)!;
        expect({ what, enabled: changes.enabled!.after, rollout: changes.rolloutPercentage!.after }).toEqual({ what, enabled: row.enabled === 1, rollout: row.rollout });
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(CLIENTS * FLAGS_PER_CLIENT);
    // And no stored write is without an entry: every flag renamed, every state set, has one.
    for (const f of names.filter((f) => f.name !== "Crash")) expect(last.has(`flag ${f.key} `)).toBe(true);
    for (const s of states) expect(last.has(`flag_state ${s.key} ${s.environment}`)).toBe(true);

    if (viaApi) expect(viaApi.sort()).toEqual([...logged].sort());
  } finally {
    db.close();
  }
}, 120_000);

/** The request ids of the project's log through GET /v1/projects/default/audit-log, or null while that route does not exist. */
async function auditApiRequestIds(srv: RunningBinary): Promise<string[] | null> {
  const doc = await callServer(srv.url, "GET", "/v1/openapi.json", { key: ADMIN_KEY });
  if (!("/v1/projects/{slug}/audit-log" in doc.body.paths)) return null;
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await callServer(srv.url, "GET", `/v1/projects/default/audit-log?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key: ADMIN_KEY });
    expect(res.status).toBe(200);
    for (const e of res.body.entries as { requestId: string | null }[]) if (e.requestId?.startsWith("crash-")) ids.push(e.requestId);
    cursor = res.body.nextCursor;
  } while (cursor);
  return ids;
}
