/**
 * An endpoint that echoes the request (a proxy in `apiHost`, a misbehaving vendor) must not put
 * a secret into `stats.lastError`: each of the six types (Slack in both modes) created through
 * the API against a local receiver that answers every request 400 with its credentials, URL and
 * body; the integration's `lastError` in the API answer holds none of the config's secrets in
 * any form they travelled in (raw, base64 of the Basic credential, URL-encoded, JSON-escaped),
 * nor any six characters of one (a cut must not leave part of a secret).
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { SECRET } from "../../src/changes/entry";
import { integrationsApp, json, type TestApp, until } from "../helpers";
import { startReceiver } from "../webhook-receiver";

/** Every request answered 400: what it carried, as a careless endpoint writes it back. */
const rx = startReceiver({
  answer: (request, n) => {
    const carried = ["authorization", "dd-api-key", "dd-application-key"].flatMap((h) => (request.headers.has(h) ? [`${h}=${request.headers.get(h)} `] : [])).join("");
    return new Response(`echo ${carried}url=${request.url} body=${rx.received[n - 1]!.text}`, { status: 400 });
  },
});
const HOST = () => `http://127.0.0.1:${rx.port}`;

/** Secrets with characters that differ in every encoding: a space, a quote, a slash, a plus, & and =. */
const CASES: { name: string; type: string; config: () => Record<string, unknown>; secrets: string[] }[] = [
  { name: "mixpanel (Basic, token as user)", type: "mixpanel", config: () => ({ projectToken: 'mpZ81 t"k/+&=q', apiHost: HOST() }), secrets: ['mpZ81 t"k/+&=q'] },
  { name: "amplitude (key in the JSON body)", type: "amplitude", config: () => ({ apiKey: 'amQ42 k"y/+&=w', apiHost: HOST() }), secrets: ['amQ42 k"y/+&=w'] },
  { name: "segment (Basic, write key as user)", type: "segment", config: () => ({ writeKey: 'sgW93 k"y/+&=e', apiHost: HOST() }), secrets: ['sgW93 k"y/+&=e'] },
  { name: "braze (Bearer)", type: "braze", config: () => ({ apiKey: 'brX64 k"y/+&=r', apiHost: HOST() }), secrets: ['brX64 k"y/+&=r'] },
  {
    name: "datadog (DD-API-KEY, DD-APPLICATION-KEY)",
    type: "datadog",
    config: () => ({ apiKey: 'ddA15 k"y/+&=t', applicationKey: 'ddP26 a"p/+&=y', apiHost: HOST() }),
    secrets: ['ddA15 k"y/+&=t', 'ddP26 a"p/+&=y'],
  },
  { name: "slack (bot token)", type: "slack", config: () => ({ botToken: 'xoxb-SLb37 t"k/+&=u', channel: "C0123", apiHost: HOST() }), secrets: ['xoxb-SLb37 t"k/+&=u'] },
  { name: "slack (webhook URL)", type: "slack", config: () => ({ webhookUrl: `${HOST()}/services/T0S/B0S/whK48s"c+&=i` }), secrets: [`${HOST()}/services/T0S/B0S/whK48s"c+&=i`] },
  {
    name: "slack (webhook URL behind apiHost: only its path travels)",
    type: "slack",
    config: () => ({ webhookUrl: 'https://hooks.slack.com/services/T0P/B0P/whP59s"c+&=o', apiHost: HOST() }),
    secrets: ['https://hooks.slack.com/services/T0P/B0P/whP59s"c+&=o'],
  },
];

const b64 = (text: string) => Buffer.from(text).toString("base64");

/**
 * Each form a secret travels in, and every six characters of the value (of a URL: of its path
 * and query, the secret part) as text, URL-encoded and JSON-escaped; base64 letters depend on
 * their neighbours: the whole forms, and the first 12 letters of each (only the value's bits).
 */
function forbidden(secret: string): string[] {
  const secretPart = secret.startsWith("http") ? secret.slice(new URL(secret).origin.length) : secret;
  const texts = [secretPart, encodeURIComponent(secretPart), new URLSearchParams({ v: secretPart }).toString().slice(2), JSON.stringify(secretPart).slice(1, -1)];
  if (secret !== secretPart) texts.push(new URL(secret).pathname);
  const base64 = [b64(`${secret}:`), b64(`:${secret}`), b64(secret)];
  const forms = new Set([secret, ...texts, ...base64, ...base64.map((b) => b.slice(0, 12))]);
  for (const text of texts) for (let i = 0; i + 6 <= text.length; i++) forms.add(text.slice(i, i + 6));
  return [...forms];
}

let h: TestApp;
let admin: Record<string, string>;
let sdk: Record<string, string>;
let flagNo = 0;

beforeAll(async () => {
  ({ h, admin, sdk } = await integrationsApp());
});
afterAll(() => {
  h.close();
  rx.stop();
});
afterEach(async () => {
  const { integrations } = await json(await h.request("GET", "/v1/projects/default/integrations", { headers: admin }), 200);
  for (const i of integrations) await h.request("DELETE", `/v1/projects/default/integrations/${i.id}`, { headers: admin });
});

describe.each(CASES.map((c) => [c.name, c] as const))("%s", (_name, c) => {
  test("stats.lastError in the API answer holds no secret in any form", async () => {
    const id = (await json(await h.request("POST", "/v1/projects/default/integrations", { headers: admin, body: { type: c.type, config: c.config() } }), 201)).id;
    const flag = `echo-${++flagNo}`;
    await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: flag, name: flag } }), 201);
    await json(await h.request("PUT", `/v1/projects/default/flags/${flag}/states/production`, { headers: admin, body: { enabled: true } }), 200);
    for (let i = 0; i < 3; i++) await json(await h.request("POST", "/v1/evaluate", { headers: sdk, body: { flagKey: flag, context: { userId: `u-${i}` } } }), 200);
    const answer = await until(`${c.name}: lastError`, async () => {
      const r = await json(await h.request("GET", `/v1/projects/default/integrations/${id}`, { headers: admin }), 200);
      return r.stats.lastError !== null && r;
    }, 10_000);
    const list = await json(await h.request("GET", "/v1/projects/default/integrations", { headers: admin }), 200);
    const lastError: string = answer.stats.lastError;
    // The echo is there (not vacuous), its secrets masked.
    expect(lastError).toContain("echo");
    expect(lastError).toContain(SECRET);
    const shown = [lastError, ...list.integrations.map((i: { stats: { lastError: string | null } }) => i.stats.lastError ?? ""), JSON.stringify(answer), JSON.stringify(list)];
    for (const text of shown) for (const secret of c.secrets) for (const form of forbidden(secret)) expect(text, `${form} of ${secret}`).not.toContain(form);
  }, 15_000);
});
