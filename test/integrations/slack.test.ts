/**
 * The slack connector against a local receiver that plays Slack twice: an incoming webhook
 * (POST /services/T.../B.../..., JSON { text, blocks }; 200 "ok"; plain-string errors:
 * 400 invalid_payload, 404 no_service for an unknown URL, 410 channel_is_archived, 500
 * rollup_error, 429 + Retry-After) and the Web API's chat.postMessage (Bearer bot token,
 * { channel, text, blocks }; HTTP 200 { ok: true } or { ok: false, error }).
 */
import Ajv2020 from "ajv/dist/2020";
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { CONNECTORS } from "../../src/modules/integrations/connectors";
import { slack, slackText, type SlackConfig } from "../../src/modules/integrations/connectors/slack";
import type { FlagChangeEvent } from "../../src/modules/integrations/connectors/types";
import { startReceiver } from "../webhook-receiver";
import { checkConfigSchema, flagChange, json, send } from "./vendor";

const HOOK_PATH = "/services/T0001/B0001/abcDEF123";
const TOKEN = "xoxb-1-good";
const CHANNEL = "C0123FLAGS";

type Mode = "normal" | "error500" | "rateLimited" | "archived" | "internalError";
let mode: Mode = "normal";
/** The messages Slack would show, in order. */
const posted: { channel: string; text: string }[] = [];

const text = (status: number, body: string, headers: Record<string, string> = {}) => new Response(body, { status, headers: { "content-type": "text/html", ...headers } });

const rx = startReceiver({
  answer: (request, n) => {
    const got = rx.received[n - 1]!;
    if (got.method !== "POST") return text(405, "method_not_allowed");
    if (mode === "rateLimited") return text(429, "rate_limited", { "retry-after": "30" });
    const body = got.json;
    const wellFormed = body && typeof body.text === "string" && body.text.length > 0 && Array.isArray(body.blocks) && body.blocks.every((b: any) => typeof b.type === "string");
    if (got.path === "/api/chat.postMessage") {
      if (request.headers.get("authorization") !== `Bearer ${TOKEN}`) return json(200, { ok: false, error: "invalid_auth" });
      if (mode === "internalError") return json(200, { ok: false, error: "internal_error" });
      if (!request.headers.get("content-type")?.startsWith("application/json")) return json(200, { ok: false, error: "invalid_form_data" });
      if (!wellFormed) return json(200, { ok: false, error: "no_text" });
      if (body.channel !== CHANNEL) return json(200, { ok: false, error: "channel_not_found" });
      posted.push({ channel: body.channel, text: body.text });
      return json(200, { ok: true, channel: CHANNEL, ts: `1732269600.${String(n).padStart(6, "0")}` });
    }
    if (got.path !== HOOK_PATH) return text(404, "no_service");
    if (mode === "error500") return text(500, "rollup_error");
    if (mode === "archived") return text(410, "channel_is_archived");
    if (!wellFormed) return text(400, "invalid_payload");
    posted.push({ channel: "#hook", text: body.text });
    return text(200, "ok");
  },
});
afterAll(() => rx.stop());
beforeEach(() => {
  mode = "normal";
  posted.length = 0;
  rx.received.length = 0;
});

const base = `http://127.0.0.1:${rx.port}`;
const viaHook: SlackConfig = { webhookUrl: `https://hooks.slack.com${HOOK_PATH}`, apiHost: base };
const viaBot: SlackConfig = { botToken: TOKEN, channel: CHANNEL, apiHost: base };

describe("slack connector", () => {
  test("its configSchema is valid JSON Schema, defaults included; a webhook URL or a bot token with a channel is required", () => {
    checkConfigSchema(slack, { webhookUrl: "https://hooks.slack.com/services/T/B/X" }, ["webhookUrl", "botToken"]);
    checkConfigSchema(slack, { botToken: "xoxb-1", channel: "C1" }, ["webhookUrl", "botToken"]);
    const ajv = new Ajv2020({ strict: true });
    ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });
    const validate = ajv.compile(JSON.parse(JSON.stringify(slack.configSchema)));
    expect(validate({})).toBe(false);
    expect(validate({ botToken: "xoxb-1" })).toBe(false);
    expect(validate({ channel: "C1" })).toBe(false);
    expect(slack.category).toBe("notifications");
    expect(slack.evaluations).toBeUndefined();
  });

  test("one message in flight at a time (a channel reads in order); every other connector keeps the sender's default", () => {
    expect(slack.concurrency).toBe(1);
    expect(Object.values(CONNECTORS).filter((c) => c.concurrency !== undefined).map((c) => c.type)).toEqual(["slack"]);
    expect(Object.values(CONNECTORS).filter((c) => c.everySecond).map((c) => c.type)).toEqual(["datadog"]);
  });

  test("the text says who, what, which environment, before -> after, for every kind of change and actor", () => {
    expect(slackText(flagChange())).toBe("alice@example.com turned on flag *checkout-v2* in *production* (project shop): off, rollout 10% → on, rollout 50%");
    const cases: [Partial<FlagChangeEvent>, string][] = [
      [{ event: "flag.disabled", data: { flagKey: "dark-mode", previousState: { enabled: true }, currentState: { enabled: false } } }, "alice@example.com turned off flag *dark-mode* in *production* (project shop): on → off"],
      [{ event: "flag.updated", environment: "staging", actor: { type: "api_key", id: "k", label: "ci-deployer" }, data: { flagKey: "f", previousState: { enabled: true, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: 25 } } }, "API key “ci-deployer” updated flag *f* in *staging* (project shop): on, rollout 10% → on, rollout 25%"],
      [{ event: "flag.created", actor: { type: "admin_key", id: "a", label: "ops" }, data: { flagKey: "new", previousState: { enabled: false }, currentState: { enabled: false } } }, "admin key “ops” created flag *new* in *production* (project shop): off → off"],
      [{ event: "flag.deleted", actor: { type: "cli", id: "cli:root", label: "root" }, data: { flagKey: "old", previousState: { enabled: true }, currentState: { enabled: false } } }, "root (CLI) deleted flag *old* in *production* (project shop): on → off"],
      [{ actor: { type: "system", id: "system", label: "flagsvc" }, data: { flagKey: "<b>&x", previousState: { enabled: false }, currentState: { enabled: true } } }, "flagsvc (system) turned on flag *&lt;b&gt;&amp;x* in *production* (project shop): off → on"],
    ];
    for (const [overrides, expected] of cases) expect(slackText(flagChange(overrides))).toBe(expected);
  });

  test("incoming webhook: one message a change, posted to the webhook's path; environments filter", async () => {
    const changes = [flagChange(), flagChange({ id: "evt_2", environment: "development" }), flagChange({ id: "evt_3", event: "flag.disabled" })];
    const requests = slack.changes!(changes, viaHook);
    expect(requests.length).toBe(3);
    expect(requests[0]!.url).toBe(`${base}${HOOK_PATH}`);
    expect(requests[0]!.headers).toEqual({ "content-type": "application/json" });
    expect(JSON.parse(requests[0]!.body)).toEqual({
      text: slackText(changes[0]!),
      blocks: [
        { type: "section", text: { type: "mrkdwn", text: slackText(changes[0]!) } },
        { type: "context", elements: [{ type: "mrkdwn", text: "2026-11-22T10:00:00.000Z · flag.enabled · evt_01JD5Q2M7W3K9X" }] },
      ],
    });
    for (const r of requests) expect(slack.outcome(r, await send(r))).toEqual({ kind: "sent", accepted: 1, rejected: 0, error: null });
    expect(posted.map((p) => p.text)).toEqual(changes.map(slackText));
    expect(slack.changes!(changes, { ...viaHook, environments: ["production"] }).length).toBe(2);
    // Without apiHost the webhook URL is used as it is.
    expect(slack.changes!(changes, { webhookUrl: `https://hooks.slack.com${HOOK_PATH}` })[0]!.url).toBe(`https://hooks.slack.com${HOOK_PATH}`);
  });

  test("bot token + channel: chat.postMessage with Bearer auth; ok false answers read by their error code", async () => {
    const [request] = slack.changes!([flagChange()], viaBot);
    expect(request!.url).toBe(`${base}/api/chat.postMessage`);
    expect(request!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(JSON.parse(request!.body)).toMatchObject({ channel: CHANNEL, unfurl_links: false, text: slackText(flagChange()) });
    expect(slack.outcome(request!, await send(request!))).toEqual({ kind: "sent", accepted: 1, rejected: 0, error: null });
    expect(posted).toEqual([{ channel: CHANNEL, text: slackText(flagChange()) }]);
    expect(slack.changes!([flagChange()], { botToken: TOKEN, channel: CHANNEL })[0]!.url).toBe("https://slack.com/api/chat.postMessage");

    const [badToken] = slack.changes!([flagChange()], { ...viaBot, botToken: "xoxb-revoked" });
    expect(slack.outcome(badToken!, await send(badToken!))).toEqual({ kind: "failed", error: "bad credentials: Slack answered HTTP 200: invalid_auth", credentials: true });
    const [badChannel] = slack.changes!([flagChange()], { ...viaBot, channel: "C-GONE" });
    expect(slack.outcome(badChannel!, await send(badChannel!))).toEqual({ kind: "failed", error: "Slack answered HTTP 200: channel_not_found" });
    mode = "internalError";
    expect(slack.outcome(request!, await send(request!))).toMatchObject({ kind: "retry", error: "Slack answered HTTP 200: internal_error" });
    mode = "rateLimited";
    expect(slack.outcome(request!, await send(request!))).toMatchObject({ kind: "retry", retryAfterMs: 30_000 });
  });

  test("webhook errors: 500 and 429 retried (Retry-After), an unknown webhook is bad credentials, archived and malformed fail", async () => {
    const [request] = slack.changes!([flagChange()], viaHook);
    mode = "error500";
    expect(slack.outcome(request!, await send(request!))).toMatchObject({ kind: "retry", retryAfterMs: null });
    mode = "rateLimited";
    expect(slack.outcome(request!, await send(request!))).toMatchObject({ kind: "retry", retryAfterMs: 30_000 });
    mode = "archived";
    expect(slack.outcome(request!, await send(request!))).toEqual({ kind: "failed", error: "Slack answered HTTP 410: channel_is_archived" });
    mode = "normal";
    const [unknown] = slack.changes!([flagChange()], { ...viaHook, webhookUrl: "https://hooks.slack.com/services/T0001/B0001/revoked" });
    expect(slack.outcome(unknown!, await send(unknown!))).toEqual({ kind: "failed", error: "bad credentials: Slack answered HTTP 404: no_service", credentials: true });
    const malformed = { ...request!, body: JSON.stringify({ text: "" }) };
    expect(slack.outcome(malformed, await send(malformed))).toEqual({ kind: "failed", error: "Slack answered HTTP 400: invalid_payload" });
    // After the 500, the same request again posts the message (Slack offers no dedupe: one message, as it was never posted).
    expect(slack.outcome(request!, await send(request!)).kind).toBe("sent");
    expect(posted.length).toBe(1);
  });
});
