/**
 * OpenFeature's stock OFREP providers, unmodified, against the compiled binary: the server
 * provider (`@openfeature/ofrep-provider` with `@openfeature/server-sdk`) for boolean and string
 * flags, every reason, a missing and a disabled flag, a test session's override and a 429 it
 * honours; the web provider (`@openfeature/ofrep-web-provider` with `@openfeature/web-sdk`),
 * polling, whose unchanged bulk refetches get 304. (The web provider in a real browser, with the
 * change stream: test/browser/.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { OFREPProvider } from "@openfeature/ofrep-provider";
import { OFREPWebProvider } from "@openfeature/ofrep-web-provider";
import { OpenFeature, type Client } from "@openfeature/server-sdk";
import { OpenFeature as WebOpenFeature } from "@openfeature/web-sdk";
import { bucketOf } from "../../src/evaluation/engine";
import { callServer } from "../helpers";
import { binaryPath, cleanup, startBinary, type RunningBinary } from "./binary";

const ADMIN_KEY = `svc_admin_${"ofr".repeat(12)}`;
/** The binary's certificate is self-signed: the providers' fetch trusts it. */
const insecureFetch = ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, { ...init, tls: { rejectUnauthorized: false } })) as typeof fetch;

let srv: RunningBinary;
let evalKey: string;
let testKey: string;
let ruleId: string;

const admin = (method: string, path: string, body?: unknown) => callServer(srv.url, method, path, { key: ADMIN_KEY, body });

async function flag(body: Record<string, unknown>, state?: Record<string, unknown>) {
  expect((await admin("POST", "/v1/projects/default/flags", { name: String(body.key), ...body })).status).toBe(201);
  if (state) expect((await admin("PUT", `/v1/projects/default/flags/${body.key}/states/development`, state)).status).toBe(200);
}

async function apiKey(scope: string): Promise<string> {
  const res = await admin("POST", "/v1/projects/default/api-keys", { name: scope, scope, environment: "development" });
  expect(res.status).toBe(201);
  return res.body.key;
}

function userFor(key: string, percent: number, included: boolean): string {
  for (let i = 0; ; i++) if (bucketOf(key, `u${i}`) < percent * 1000 === included) return `u${i}`;
}

beforeAll(async () => {
  await binaryPath();
  srv = await startBinary({ env: { SVC_ADMIN_KEY: ADMIN_KEY } });
  await flag({ key: "on" }, { enabled: true });
  await flag({ key: "off" });
  await flag({ key: "ruled", rules: [{ name: "pro", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }] }] }, { enabled: true });
  await flag({ key: "half" }, { enabled: true, rolloutPercentage: 50 });
  await flag({ key: "theme", variants: [{ key: "dark" }, { key: "light" }], rules: [{ name: "night", conditions: [{ attribute: "hour", operator: "greater_than", value: 20 }], variant: "dark" }] }, { enabled: true });
  await flag({ key: "paused-theme", variants: [{ key: "dark" }, { key: "light" }] });
  ruleId = (await admin("GET", "/v1/projects/default/flags/ruled")).body.rules[0].id;
  evalKey = await apiKey("eval");
  testKey = await apiKey("test");
}, 120_000);
afterAll(async () => {
  await OpenFeature.close();
  await srv?.stop();
  cleanup();
});

describe("the stock server provider (@openfeature/ofrep-provider)", () => {
  let client: Client;
  beforeAll(async () => {
    await OpenFeature.setProviderAndWait(
      "flagsvc",
      new OFREPProvider({ baseUrl: srv.url, headers: [["Authorization", `Bearer ${evalKey}`]], fetchImplementation: insecureFetch }),
    );
    client = OpenFeature.getClient("flagsvc");
  });

  test("boolean flags, every reason, flagsvc's reason and rule in the metadata", async () => {
    const on = await client.getBooleanDetails("on", false, { targetingKey: "u1" });
    expect(on).toMatchObject({ value: true, reason: "STATIC", flagMetadata: { reason: "FLAG_ENABLED", environment: "development" } });
    expect(on.errorCode).toBeUndefined();
    expect(await client.getBooleanDetails("off", true, { targetingKey: "u1" })).toMatchObject({ value: false, reason: "DISABLED", flagMetadata: { reason: "FLAG_DISABLED" } });
    expect(await client.getBooleanDetails("ruled", false, { targetingKey: "u1", plan: "pro" })).toMatchObject({
      value: true,
      reason: "TARGETING_MATCH",
      flagMetadata: { reason: "TARGETING_RULE_MATCH", ruleId },
    });
    expect(await client.getBooleanDetails("ruled", false, { targetingKey: "u1", plan: "free" })).toMatchObject({ value: true, reason: "DEFAULT" });
    expect(await client.getBooleanDetails("half", false, { targetingKey: userFor("half", 50, true) })).toMatchObject({
      value: true,
      reason: "SPLIT",
      flagMetadata: { reason: "PERCENTAGE_ROLLOUT" },
    });
    expect(await client.getBooleanDetails("half", true, { targetingKey: userFor("half", 50, false) })).toMatchObject({
      value: false,
      reason: "SPLIT",
      flagMetadata: { reason: "PERCENTAGE_ROLLOUT_EXCLUDED" },
    });
  });

  test("string flags: the served variant; none served: the code default", async () => {
    expect(await client.getStringDetails("theme", "light", { targetingKey: "u1", hour: 22 })).toMatchObject({ value: "dark", variant: "dark", reason: "TARGETING_MATCH" });
    // Past the rule: the first variant (no weights), the default of the flag.
    expect(await client.getStringDetails("theme", "light", { targetingKey: "u1", hour: 9 })).toMatchObject({ value: "dark", variant: "dark", reason: "DEFAULT" });
    // Disabled: no value in the answer, the application's default applies.
    expect((await client.getStringDetails("paused-theme", "system", { targetingKey: "u1" })).value).toBe("system");
  });

  test("errors: a missing flag, a rollout without a targeting key, a type mismatch: the default, with OpenFeature's error code", async () => {
    expect(await client.getBooleanDetails("nope", true, { targetingKey: "u1" })).toMatchObject({ value: true, reason: "ERROR", errorCode: "FLAG_NOT_FOUND" });
    expect(await client.getBooleanDetails("half", true, { plan: "pro" })).toMatchObject({ value: true, reason: "ERROR", errorCode: "TARGETING_KEY_MISSING" });
    expect(await client.getStringDetails("on", "x", { targetingKey: "u1" })).toMatchObject({ value: "x", reason: "ERROR", errorCode: "TYPE_MISMATCH" });
  });

  test("a test session's override applies (X-Service-Session)", async () => {
    const session = await callServer(srv.url, "POST", "/v1/testing/sessions", { key: testKey, body: { projectId: "default" } });
    expect(session.status).toBe(201);
    for (const [key, value] of [["on", false], ["theme", "light"]] as const) {
      const put = await callServer(srv.url, "PUT", `/v1/testing/sessions/${session.body.id}/overrides/${key}`, { key: testKey, body: { value } });
      expect(put.status).toBe(200);
    }
    await OpenFeature.setProviderAndWait(
      "session",
      new OFREPProvider({
        baseUrl: srv.url,
        headers: [["X-API-Key", evalKey], ["X-Service-Session", session.body.token]],
        fetchImplementation: insecureFetch,
      }),
    );
    const inSession = OpenFeature.getClient("session");
    expect(await inSession.getBooleanDetails("on", true, { targetingKey: "u1" })).toMatchObject({ value: false, reason: "STATIC", flagMetadata: { reason: "TEST_OVERRIDE" } });
    expect(await inSession.getStringDetails("theme", "dark", { targetingKey: "u1", hour: 22 })).toMatchObject({ value: "light", reason: "STATIC" });
  });

  test("a 429 is honoured: the provider pauses until Retry-After, without calling", async () => {
    const limited = await startBinary({ env: { SVC_ADMIN_KEY: ADMIN_KEY, SVC_RATE_LIMITS: "eval:2" } });
    try {
      const key = (await callServer(limited.url, "POST", "/v1/projects/default/api-keys", { key: ADMIN_KEY, body: { name: "e", scope: "eval", environment: "development" } })).body.key;
      await OpenFeature.setProviderAndWait("limited", new OFREPProvider({ baseUrl: limited.url, headers: [["Authorization", `Bearer ${key}`]], fetchImplementation: insecureFetch }));
      const c = OpenFeature.getClient("limited");
      for (let i = 0; i < 2; i++) expect((await c.getBooleanDetails("x", true, { targetingKey: "u" })).errorCode).toBe("FLAG_NOT_FOUND" as never);
      const refused = await c.getBooleanDetails("x", true, { targetingKey: "u" });
      expect(refused).toMatchObject({ value: true, reason: "ERROR" });
      const requests = () => (limited.output().match(/"path":"\/ofrep\/v1\/evaluate\/flags\/:key"/g) ?? []).length;
      // The three requests made (two answered, one refused) are all in the log before counting on.
      await limited.waitFor(/(?:"path":"\/ofrep\/v1\/evaluate\/flags\/:key"[^\n]*\n[^]*){3}/, 5_000);
      const seen = requests();
      expect(seen).toBe(3);
      const paused = await c.getBooleanDetails("x", true, { targetingKey: "u" });
      expect(paused.errorMessage).toContain("TooManyRequests");
      await Bun.sleep(200); // the access log line of a request that would have been made
      expect(requests()).toBe(seen);
    } finally {
      await limited.stop();
    }
  });
});

describe("the stock web provider (@openfeature/ofrep-web-provider), polling", () => {
  test("an unchanged bulk refetch gets 304; a change comes through on the next poll", async () => {
    await WebOpenFeature.setContext({ targetingKey: "u1", plan: "pro" });
    const provider = new OFREPWebProvider({
      baseUrl: srv.url,
      headers: [["X-API-Key", evalKey]],
      changeDetection: "polling",
      pollInterval: 150,
      fetchImplementation: insecureFetch,
    });
    await WebOpenFeature.setProviderAndWait(provider);
    try {
      const client = WebOpenFeature.getClient();
      expect(client.getBooleanValue("ruled", false)).toBe(true);
      const bulkAnswers = () => [...srv.output().matchAll(/"path":"\/ofrep\/v1\/evaluate\/flags","status":(\d+)/g)].map((m) => Number(m[1]));
      const deadline = Date.now() + 5_000;
      while (!bulkAnswers().includes(304) && Date.now() < deadline) await Bun.sleep(50);
      expect(bulkAnswers()).toContain(304);
      expect((await admin("PUT", "/v1/projects/default/flags/ruled/states/development", { enabled: false })).status).toBe(200);
      const changed = Date.now() + 5_000;
      while (client.getBooleanValue("ruled", true) !== false && Date.now() < changed) await Bun.sleep(50);
      expect(client.getBooleanValue("ruled", true)).toBe(false);
    } finally {
      await WebOpenFeature.close();
      await admin("PUT", "/v1/projects/default/flags/ruled/states/development", { enabled: true });
    }
  });
});
