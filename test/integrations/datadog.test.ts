/**
 * The datadog connector against a local receiver that plays Datadog's intake: POST
 * /api/v2/series (DD-API-KEY, { series: [{ metric, type, interval, points: [{ timestamp, value }],
 * tags }] }, at most 512000 bytes, 202 { errors: [] }) and POST /api/v2/events (DD-API-KEY,
 * { data: { type: "event", attributes: { category: "change", title, attributes: {
 * changed_resource: { type: "feature_flag" }, author, ... } } } }, 202). It stores metric points
 * as Datadog does: one value a series a second, the latest write overwriting the one before.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { datadog, DATADOG_METRIC, type DatadogConfig } from "../../src/modules/integrations/connectors/datadog";
import { startReceiver } from "../webhook-receiver";
import { checkConfigSchema, evaluation, flagChange, json, NOW, send } from "./vendor";

const KEY = "dd-api-key-1";

type Mode = "normal" | "error503" | "rateLimited" | "dropsPoints";
let mode: Mode = "normal";
/** series tags + timestamp -> value (last write wins). */
const points = new Map<string, number>();
const events: any[] = [];
const total = () => [...points.values()].reduce((a, b) => a + b, 0);

const AUTHOR_TYPES = ["user", "system", "api", "automation"];

const rx = startReceiver({
  answer: (request, n) => {
    const got = rx.received[n - 1]!;
    if (got.method !== "POST" || (got.path !== "/api/v2/series" && got.path !== "/api/v2/events")) return json(404, { errors: ["Not found"] });
    if (request.headers.get("dd-api-key") !== KEY) return json(403, { errors: ["Forbidden"] });
    if (mode === "error503") return json(503, { errors: ["Service Unavailable"] });
    if (mode === "rateLimited") return json(429, { errors: ["Too many requests"] }, { "x-ratelimit-reset": "12" });
    const body = got.json;
    if (got.path === "/api/v2/series") {
      if (got.bytes.length > 512_000) return json(413, { errors: ["Payload too large"] });
      const valid =
        Array.isArray(body?.series) &&
        body.series.every(
          (s: any) =>
            typeof s.metric === "string" &&
            [0, 1, 2, 3].includes(s.type) &&
            Array.isArray(s.tags) &&
            s.tags.every((t: unknown) => typeof t === "string") &&
            Array.isArray(s.points) &&
            s.points.every((p: any) => Number.isInteger(p.timestamp) && typeof p.value === "number"),
        );
      if (!valid) return json(400, { errors: ["Payload is not in the expected format"] });
      for (const s of body.series) for (const p of s.points) points.set(`${s.metric}|${s.tags.join(",")}|${p.timestamp}`, p.value);
      return json(202, { errors: mode === "dropsPoints" ? ["Point timestamp is more than 1 hour in the past"] : [] });
    }
    const a = body?.data?.attributes;
    const valid =
      body?.data?.type === "event" &&
      a?.category === "change" &&
      typeof a.title === "string" &&
      a.title.length <= 500 &&
      (a.message === undefined || (typeof a.message === "string" && a.message.length <= 4000)) &&
      a.attributes?.changed_resource?.type === "feature_flag" &&
      typeof a.attributes.changed_resource.name === "string" &&
      (a.attributes.author === undefined || AUTHOR_TYPES.includes(a.attributes.author.type));
    if (!valid) return json(400, { errors: [{ status: "400", title: "Bad Request", detail: "Missing required attribute in body" }] });
    events.push(body);
    return json(202, { data: { type: "event", attributes: { attributes: { evt: { id: String(events.length) } } } } });
  },
});
afterAll(() => rx.stop());
beforeEach(() => {
  mode = "normal";
  points.clear();
  events.length = 0;
  rx.received.length = 0;
});

const config: DatadogConfig = { apiKey: KEY, apiHost: `http://127.0.0.1:${rx.port}` };

describe("datadog connector", () => {
  test("its configSchema is valid JSON Schema, defaults included; the site picks Datadog's hosts", () => {
    checkConfigSchema(datadog, { apiKey: "k" }, ["apiKey", "applicationKey"]);
    expect(datadog.category).toBe("monitoring");
    const eu = { apiKey: "k", site: "datadoghq.eu" } as const;
    expect(datadog.evaluations!([evaluation()], eu, NOW)[0]!.url).toBe("https://api.datadoghq.eu/api/v2/series");
    expect(datadog.changes!([flagChange()], eu)[0]!.url).toBe("https://event-management-intake.datadoghq.eu/api/v2/events");
    expect(datadog.evaluations!([evaluation()], { apiKey: "k" }, NOW)[0]!.url).toBe("https://api.datadoghq.com/api/v2/series");
    expect(datadog.evaluations!([evaluation()], { ...config, trackEvaluations: false }, NOW)).toEqual([]);
    expect(datadog.changes!([flagChange()], { ...config, trackChanges: false })).toEqual([]);
  });

  test("evaluations: one count point a series (flag, env, variant, enabled, reason), at the hand-over's second, the sum of its records", async () => {
    const records = [
      evaluation({ evaluatedAt: "2026-11-22T10:00:00.100Z" }),
      evaluation({ evaluatedAt: "2026-11-22T10:00:00.900Z" }),
      evaluation({ evaluatedAt: "2026-11-22T10:00:00.500Z" }),
      evaluation({ evaluatedAt: "2026-11-22T10:00:01.000Z" }),
      evaluation({ variant: "Treatment A", evaluatedAt: "2026-11-22T10:00:00.000Z" }),
    ];
    expect(datadog.everySecond).toBe(true);
    const [request, ...more] = datadog.evaluations!(records, { ...config, tags: ["team:payments"] }, NOW);
    expect(more).toEqual([]);
    expect(request!.headers["dd-api-key"]).toBe(KEY);
    expect(request!.events).toBe(5);
    const second = Math.floor(NOW / 1000);
    expect(JSON.parse(request!.body)).toEqual({
      series: [
        {
          metric: DATADOG_METRIC,
          type: 1,
          interval: 1,
          points: [{ timestamp: second, value: 4 }],
          tags: ["flag:checkout-v2", "env:production", "variant:none", "enabled:true", "reason:rule_match", "team:payments"],
        },
        {
          metric: DATADOG_METRIC,
          type: 1,
          interval: 1,
          points: [{ timestamp: second, value: 1 }],
          tags: ["flag:checkout-v2", "env:production", "variant:treatment_a", "enabled:true", "reason:rule_match", "team:payments"],
        },
      ],
    });
    expect(datadog.outcome(request!, await send(request!))).toEqual({ kind: "sent", accepted: 5, rejected: 0, error: null });
    expect(total()).toBe(5);
  });

  test("two hand-overs in different seconds: different timestamps, each the sum of its records, both kept", async () => {
    const first = [evaluation(), evaluation(), evaluation({ evaluatedAt: "2026-11-22T09:59:59.000Z" })];
    const second = [evaluation(), evaluation()];
    const [a] = datadog.evaluations!(first, config, NOW);
    const [b] = datadog.evaluations!(second, config, NOW + 1_000);
    const pointOf = (r: { body: string }) => JSON.parse(r.body).series[0].points[0];
    expect(pointOf(a!)).toEqual({ timestamp: Math.floor(NOW / 1000), value: 3 });
    expect(pointOf(b!)).toEqual({ timestamp: Math.floor(NOW / 1000) + 1, value: 2 });
    for (const r of [a!, b!]) expect(datadog.outcome(r, await send(r)).kind).toBe("sent");
    expect(points.size).toBe(2);
    expect(total()).toBe(5);
    // Why the sender hands over once a second: a second sent twice overwrites itself.
    const [again] = datadog.evaluations!([evaluation()], config, NOW + 1_400);
    expect(datadog.outcome(again!, await send(again!)).kind).toBe("sent");
    expect(total()).toBe(4);
  });

  test("20,000 evaluations over 5,000 flags: split under the 500 KB payload limit, every one counted", async () => {
    const records = Array.from({ length: 20_000 }, (_, i) => evaluation({ flagKey: `flag-${i % 5_000}`, evaluatedAt: `2026-11-22T10:00:0${i % 4}.000Z` }));
    const requests = datadog.evaluations!(records, config, NOW);
    expect(requests.length).toBeGreaterThan(1);
    expect(requests.every((r) => Buffer.byteLength(r.body) <= 512_000)).toBe(true);
    expect(requests.reduce((n, r) => n + r.events, 0)).toBe(20_000);
    for (const r of requests) expect(datadog.outcome(r, await send(r)).kind).toBe("sent");
    expect(total()).toBe(20_000);
  });

  test("deterministic; a resend after a 503 (and of a request already taken) is the same body and overwrites its own points: counted once", async () => {
    const records = Array.from({ length: 100 }, (_, i) => evaluation({ enabled: i % 3 === 0, evaluatedAt: `2026-11-22T10:00:0${i % 5}.000Z` }));
    const [request] = datadog.evaluations!(records, config, NOW);
    expect(datadog.evaluations!(records, config, NOW)[0]!.body).toBe(request!.body);
    mode = "error503";
    expect(datadog.outcome(request!, await send(request!))).toMatchObject({ kind: "retry", retryAfterMs: null });
    mode = "normal";
    expect(datadog.outcome(request!, await send(request!)).kind).toBe("sent");
    expect(datadog.outcome(request!, await send(request!)).kind).toBe("sent");
    expect(total()).toBe(100);
  });

  test("a flag change: a Change Tracking event, the actor as author, before and after", async () => {
    const change = flagChange({ actor: { type: "api_key", id: "key_9", label: "ci-deployer" } });
    const [request, ...more] = datadog.changes!([change], { ...config, service: "checkout-api", applicationKey: "app-key" });
    expect(more).toEqual([]);
    expect(request!.headers["dd-application-key"]).toBe("app-key");
    expect(request!.events).toBe(1);
    const body = JSON.parse(request!.body);
    expect(body).toEqual({
      data: {
        type: "event",
        attributes: {
          aggregation_key: "flagsvc:evt_01JD5Q2M7W3K9X",
          category: "change",
          title: "Feature flag checkout-v2 enabled in production",
          message: "ci-deployer enabled checkout-v2 in production (project shop): off, rollout 10% -> on, rollout 50%",
          timestamp: "2026-11-22T10:00:00.000Z",
          tags: ["env:production", "project:shop", "flag:checkout-v2", "source:flagsvc"],
          attributes: {
            author: { name: "ci-deployer", type: "api" },
            changed_resource: { name: "checkout-v2", type: "feature_flag" },
            prev_value: { enabled: false, rolloutPercentage: 10 },
            new_value: { enabled: true, rolloutPercentage: 50 },
            change_metadata: {
              flagsvc_event_id: "evt_01JD5Q2M7W3K9X",
              flagsvc_event: "flag.enabled",
              project: "shop",
              environment: "production",
              actor_id: "key_9",
              actor_type: "api_key",
            },
            impacted_resources: [{ name: "checkout-api", type: "service" }],
          },
        },
      },
    });
    expect(datadog.outcome(request!, await send(request!))).toEqual({ kind: "sent", accepted: 1, rejected: 0, error: null });
    expect(events.length).toBe(1);
    const two = datadog.changes!([change, flagChange({ id: "evt_2", event: "flag.created", actor: { type: "user", id: "u", label: "bob@example.com" } })], config);
    expect(two.length).toBe(2);
    expect(JSON.parse(two[1]!.body).data.attributes.attributes.author).toEqual({ name: "bob@example.com", type: "user" });
    expect(two[0]!.headers["dd-application-key"]).toBeUndefined();
  });

  test("403 bad key: failed, bad credentials; 429: retry (Retry-After, else X-RateLimit-Reset); 202 with dropped points: sent, the error kept; 400: failed", async () => {
    const [metrics] = datadog.evaluations!([evaluation()], { ...config, apiKey: "wrong" }, NOW);
    const forbidden = datadog.outcome(metrics!, await send(metrics!));
    expect(forbidden).toEqual({ kind: "failed", error: "bad credentials: Datadog answered HTTP 403: Forbidden", credentials: true });
    const [change] = datadog.changes!([flagChange()], { ...config, apiKey: "wrong" });
    expect(datadog.outcome(change!, await send(change!)).kind).toBe("failed");

    const [good] = datadog.evaluations!([evaluation()], config, NOW);
    mode = "rateLimited";
    expect(datadog.outcome(good!, await send(good!))).toMatchObject({ kind: "retry", retryAfterMs: 12_000 });
    expect(datadog.outcome(good!, { status: 429, headers: { "Retry-After": "3", "x-ratelimit-reset": "12" }, body: "" })).toMatchObject({ retryAfterMs: 3_000 });

    mode = "dropsPoints";
    expect(datadog.outcome(good!, await send(good!))).toEqual({ kind: "sent", accepted: 1, rejected: 0, error: "Datadog: Point timestamp is more than 1 hour in the past" });

    mode = "normal";
    const broken = { ...good!, body: JSON.stringify({ series: [{ metric: DATADOG_METRIC }] }) };
    expect(datadog.outcome(broken, await send(broken))).toEqual({ kind: "failed", error: "Datadog answered HTTP 400: Payload is not in the expected format" });
  });
});
