/**
 * OFREP single evaluation against `/v1/evaluate`, through the compiled binary, in the same run
 * (issue 30; target: OFREP at least 90 % of /v1/evaluate's throughput). One server with 100
 * flags (each on in production at a 50 % rollout); wrk -t1 -c50 over HTTPS keep-alive, nothing
 * pinned (pinning the server's threads beside wrk made rounds collapse on this VM); paired rounds
 * alternating which route goes first,
 * the figure the median of the rounds' ratios (the VM's drift cancels within a round). The
 * OFREP body is what the stock providers send (`{"context":{"targetingKey":…}}`), the
 * /v1/evaluate body its equivalent (`{"flagKey":…,"context":{"userId":…}}`). Also, for
 * reference: the OFREP bulk evaluation (all 100 flags) and its 304 (If-None-Match).
 * Usage: scripts/bench/ofrep [--binary PATH] [--rounds N] [--seconds N]
 */
import { join } from "node:path";
import { benchBinary, benchWorkspace, flagKey, flaggedServer } from "../lib/binary";
import { argOf } from "../lib/proc";
import { ensureWrk, pairedRounds, runWrk } from "../lib/wrk";

const ROUNDS = Number(argOf("--rounds") ?? 6);
const SECONDS = Number(argOf("--seconds") ?? 5);
const ADMIN_KEY = `svc_admin_${"o".repeat(40)}`;
ensureWrk();

const binary = benchBinary(argOf("--binary"), "ofrep");
const { dir, live } = benchWorkspace("ofrep");
const s = await flaggedServer({ binary, dataDir: join(dir, "server"), adminKey: ADMIN_KEY, flags: 100, live });
const auth = { authorization: `Bearer ${s.evalKey}` };
const key = flagKey(42);

const evaluate = () => runWrk({ url: `${s.base}/v1/evaluate`, seconds: SECONDS, method: "POST", headers: auth, body: JSON.stringify({ flagKey: key, context: { userId: "user-4711" } }) });
const ofrep = () => runWrk({ url: `${s.base}/ofrep/v1/evaluate/flags/${key}`, seconds: SECONDS, method: "POST", headers: auth, body: JSON.stringify({ context: { targetingKey: "user-4711" } }) });

// Warm-up: both routes compiled and the connections' TLS sessions set up.
await evaluate();
await ofrep();
const { a, b, ratio } = await pairedRounds(ROUNDS, evaluate, ofrep);
const show = (name: string, runs: typeof a) =>
  console.log(`${name.padEnd(32)} ${runs.map((r) => Math.round(r.rps)).join(" ")} req/s; p99 ${runs.map((r) => r.p99Ms.toFixed(2)).join(" ")} ms; non-2xx ${runs.reduce((n, r) => n + r.non2xx, 0)}`);
show("POST /v1/evaluate", a);
show("POST /ofrep/v1/evaluate/flags/{key}", b);
console.log(`OFREP single / /v1/evaluate: ${(ratio * 100).toFixed(1)} % (median of ${ROUNDS} paired rounds; target >= 90 %)`);

const bulkBody = JSON.stringify({ context: { targetingKey: "user-4711" } });
const bulk = await runWrk({ url: `${s.base}/ofrep/v1/evaluate/flags`, seconds: SECONDS, method: "POST", headers: auth, body: bulkBody });
const etag = (await fetch(`${s.base}/ofrep/v1/evaluate/flags`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: bulkBody, tls: { rejectUnauthorized: false } })).headers.get("etag")!;
const unchanged = await runWrk({ url: `${s.base}/ofrep/v1/evaluate/flags`, seconds: SECONDS, method: "POST", headers: { ...auth, "if-none-match": etag }, body: bulkBody });
console.log(`OFREP bulk (100 flags): ${Math.round(bulk.rps)} req/s, p99 ${bulk.p99Ms.toFixed(2)} ms; with If-None-Match (304): ${Math.round(unchanged.rps)} req/s, p99 ${unchanged.p99Ms.toFixed(2)} ms`);
process.exit(0);
