/**
 * GET /metrics (docs/metrics.md) through HTTP over a real database, scraped with a real
 * Prometheus text parser (parse-prometheus-text-format): every documented metric is there, the
 * counts move as the test drives requests, access is as documented, and no label holds a raw
 * path, a user id or a key.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import parse, { type MetricFamily, type Sample } from "parse-prometheus-text-format";
import { VERSION } from "../../src/version";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

const FLAGS = "/v1/projects/default/flags";
const TOKEN = "metrics-token-0123456789abcdefghijklmnop";
const apps: TestApp[] = [];
const receivers: Receiver[] = [];
afterEach(() => {
  for (const a of apps.splice(0)) a.close();
  for (const r of receivers.splice(0)) r.stop();
});

async function app(env: Record<string, string> = {}) {
  const h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", ...env });
  apps.push(h);
  return { h, admin: bearer(await seedAdminKey(h.ctx)) };
}

async function scrape(h: TestApp, headers: Record<string, string>): Promise<{ text: string; families: Map<string, MetricFamily> }> {
  const res = await h.request("GET", "/metrics", { headers });
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  return { text, families: new Map(parse(text).map((f) => [f.name, f])) };
}

/** The samples of `name` whose labels include `labels`. */
function samples(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): Sample[] {
  const family = families.get(name);
  if (!family) throw new Error(`no metric ${name}`);
  return family.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
}
const value = (families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}) =>
  samples(families, name, labels).reduce((sum, m) => sum + Number(m.value ?? m.count), 0);

/** The metric names docs/metrics.md documents (its `### flagsvc_...` headings). */
const DOCUMENTED = [...readFileSync(join(import.meta.dir, "../../docs/metrics.md"), "utf8").matchAll(/^### `(flagsvc_[a-z_]+)`/gm)].map((m) => m[1]!);

describe("GET /metrics", () => {
  test("every documented metric is there, with the process defaults and the build info", async () => {
    const { h, admin } = await app();
    const { families } = await scrape(h, admin);
    // The list, all documented.
    expect(DOCUMENTED.sort()).toEqual([
      "flagsvc_build_info", "flagsvc_change_log_position", "flagsvc_database_bytes", "flagsvc_evaluations_total", "flagsvc_http_request_duration_seconds",
      "flagsvc_http_requests_total", "flagsvc_integration_events_total", "flagsvc_login_refused_total", "flagsvc_plugins", "flagsvc_schedules_pending",
      "flagsvc_streams_connected", "flagsvc_webhook_deliveries_pending", "flagsvc_webhook_deliveries_total",
    ]);
    for (const name of DOCUMENTED) expect(families.has(name), name).toBe(true);
    for (const name of ["process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_heap_size_used_bytes"]) expect(families.has(name), name).toBe(true);
    expect(samples(families, "flagsvc_build_info")[0]!.labels).toEqual({ version: VERSION, edition: "ce" });
    expect(value(families, "flagsvc_database_bytes")).toBeGreaterThan(0);
    expect(value(families, "flagsvc_change_log_position")).toBeGreaterThan(0); // bootstrap wrote entries
    expect(samples(families, "flagsvc_plugins").map((m) => m.labels!.status).sort()).toEqual(["active", "disabled", "error", "installing"]);
    expect(samples(families, "flagsvc_login_refused_total").map((m) => m.labels!.cause).sort()).toEqual(["bad_credentials", "busy", "locked_out"]);
  });

  test("evaluations by flag, variant and reason; requests by route template; a deleted flag's series go", async () => {
    const { h, admin } = await app();
    const evalKey = bearer((await seedApiKey(h.ctx, "eval", "default", "development")).secret);
    json(await h.request("POST", FLAGS, { body: { key: "checkout", name: "Checkout" }, headers: admin }), 201);
    json(await h.request("POST", FLAGS, { body: { key: "banner", name: "Banner" }, headers: admin }), 201);
    json(await h.request("PUT", `${FLAGS}/checkout/states/development`, { body: { enabled: true }, headers: admin }), 200);
    const evaluate = async (flagKey: string) => json(await h.request("POST", "/v1/evaluate", { body: { flagKey, context: { userId: "user-secret-4711" } }, headers: evalKey }), 200);
    for (let i = 0; i < 3; i++) await evaluate("checkout");
    for (let i = 0; i < 2; i++) await evaluate("banner");
    json(await h.request("GET", `${FLAGS}/checkout`, { headers: admin }), 200);
    expect((await h.request("GET", "/v1/no/such/raw-path-xyz", { headers: admin })).status).toBe(404);

    let { text, families } = await scrape(h, admin);
    const at = { project: "default", environment: "development" };
    expect(value(families, "flagsvc_evaluations_total", { ...at, flag: "checkout", variant: "on", reason: "FLAG_ENABLED" })).toBe(3);
    expect(value(families, "flagsvc_evaluations_total", { ...at, flag: "banner", variant: "off", reason: "FLAG_DISABLED" })).toBe(2);
    expect(samples(families, "flagsvc_evaluations_total", { flag: "checkout" })).toHaveLength(1);
    // The hot route (native) and an Elysia route, each by its template; the 404 as `unmatched`.
    expect(value(families, "flagsvc_http_requests_total", { method: "POST", route: "/v1/evaluate", status: "200" })).toBe(5);
    expect(value(families, "flagsvc_http_requests_total", { method: "GET", route: "/v1/projects/:slug/flags/:key", status: "200" })).toBe(1);
    expect(value(families, "flagsvc_http_requests_total", { method: "PUT", route: "/v1/projects/:slug/flags/:key/states/:environment" })).toBe(1);
    expect(value(families, "flagsvc_http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1);
    // The parser merges a labelled histogram's series into one (prom2json's shape): its lines are read here.
    expect(families.get("flagsvc_http_request_duration_seconds")!.type).toBe("HISTOGRAM");
    expect(text).toContain('flagsvc_http_request_duration_seconds_count{method="POST",route="/v1/evaluate"} 5\n');
    expect(text).toContain('flagsvc_http_request_duration_seconds_bucket{method="POST",route="/v1/evaluate",le="+Inf"} 5\n');
    expect(text).toMatch(/flagsvc_http_request_duration_seconds_sum\{method="POST",route="\/v1\/evaluate"\} 0\.\d+/);
    // Bounded labels: no raw path, user id or key anywhere.
    for (const secret of ["raw-path-xyz", "user-secret-4711", evalKey.authorization!.slice(7), admin.authorization!.slice(7)]) expect(text).not.toContain(secret);
    for (const family of families.values()) for (const m of family.metrics) for (const v of Object.values(m.labels ?? {})) expect(v).not.toMatch(/^\/v1\/projects\/default/);

    expect((await h.request("DELETE", `${FLAGS}/checkout`, { headers: admin })).status).toBe(204);
    ({ families } = await scrape(h, admin));
    expect(samples(families, "flagsvc_evaluations_total", { flag: "checkout" })).toEqual([]);
    expect(value(families, "flagsvc_evaluations_total", { flag: "banner" })).toBe(2);
  });

  test("webhook deliveries to a real receiver, login refusals, streams connected, schedules pending", async () => {
    const { h, admin } = await app();
    const rx = startReceiver();
    receivers.push(rx);
    json(await h.request("POST", "/v1/projects/default/webhooks", { body: { url: rx.url, events: ["flag.created"], secret: "a-webhook-secret-of-some-length" }, headers: admin }), 201);
    json(await h.request("POST", FLAGS, { body: { key: "a", name: "A" }, headers: admin }), 201);
    let { families } = await scrape(h, admin);
    expect(value(families, "flagsvc_webhook_deliveries_pending")).toBe(3); // one per environment
    await h.ctx.deliveries.drain();
    expect(rx.received).toHaveLength(3);

    expect((await h.request("POST", "/v1/auth/login", { body: { email: "admin@localhost", password: "not the password" } })).status).toBe(401);
    json(await h.request("POST", `${FLAGS}/a/schedules`, { body: { environment: "production", at: "2030-01-01T00:00:00.000Z", state: { enabled: true } }, headers: admin }), 201);
    const full = bearer((await seedApiKey(h.ctx, "full", "default", "production")).secret);
    const stream = await h.request("GET", "/v1/definitions/stream", { headers: full });
    expect(stream.status).toBe(200);

    ({ families } = await scrape(h, admin));
    expect(value(families, "flagsvc_webhook_deliveries_total", { outcome: "succeeded" })).toBe(3);
    expect(value(families, "flagsvc_webhook_deliveries_total", { outcome: "failed" })).toBe(0);
    expect(value(families, "flagsvc_webhook_deliveries_pending")).toBe(0);
    expect(value(families, "flagsvc_login_refused_total", { cause: "bad_credentials" })).toBe(1);
    expect(value(families, "flagsvc_streams_connected", { kind: "definitions" })).toBe(1);
    expect(value(families, "flagsvc_streams_connected", { kind: "changes" })).toBe(0);
    expect(value(families, "flagsvc_schedules_pending")).toBe(1);
    await stream.body!.cancel();
  });
});

test("the Grafana dashboard (docs/grafana-dashboard.json) is JSON whose queries use documented metrics only", () => {
  const dashboard = JSON.parse(readFileSync(join(import.meta.dir, "../../docs/grafana-dashboard.json"), "utf8"));
  const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) => p.targets.map((t) => t.expr));
  expect(exprs.length).toBeGreaterThanOrEqual(10);
  const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\b(flagsvc_[a-z_]+?)(?:_bucket)?\b/g)].map((m) => m[1]!)));
  for (const name of used) expect(DOCUMENTED, name).toContain(name);
  for (const name of ["flagsvc_evaluations_total", "flagsvc_http_requests_total", "flagsvc_http_request_duration_seconds", "flagsvc_webhook_deliveries_total", "flagsvc_streams_connected", "flagsvc_plugins", "flagsvc_database_bytes"]) {
    expect(used.has(name), name).toBe(true);
  }
});

describe("access", () => {
  test("an admin key; without credential 401, an API key or a login token 403, in the documented shape", async () => {
    const { h, admin } = await app();
    await scrape(h, admin);
    const none = await h.request("GET", "/metrics");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({
      error: "UNAUTHORIZED",
      message: "Invalid or missing credential: GET /metrics takes Authorization: Bearer <SVC_METRICS_TOKEN> or an admin key",
      details: [{ path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" }],
    });
    const wrong = await h.request("GET", "/metrics", { headers: bearer(TOKEN) });
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).error).toBe("UNAUTHORIZED");
    const key = await h.request("GET", "/metrics", { headers: bearer((await seedApiKey(h.ctx, "full")).secret) });
    expect(key.status).toBe(403);
    expect(await key.json()).toEqual({ error: "FORBIDDEN", message: "GET /metrics takes Authorization: Bearer <SVC_METRICS_TOKEN> or an admin key" });
  });

  test("SVC_METRICS_TOKEN: the token is taken, a wrong one is not, admin keys still are", async () => {
    const { h, admin } = await app({ SVC_METRICS_TOKEN: TOKEN });
    await scrape(h, bearer(TOKEN));
    await scrape(h, admin);
    expect((await h.request("GET", "/metrics", { headers: bearer(`${TOKEN}x`) })).status).toBe(401);
    expect((await h.request("GET", "/metrics", { headers: { authorization: TOKEN } })).status).toBe(401);
    expect((await h.request("GET", "/metrics")).status).toBe(401);
  });

  test("SVC_METRICS_PUBLIC=true: no credential needed", async () => {
    const { h } = await app({ SVC_METRICS_PUBLIC: "true" });
    const { families } = await scrape(h, {});
    expect(families.has("flagsvc_evaluations_total")).toBe(true);
  });
});
