/**
 * The flag.updated of a rollout-only state PUT carries `rolloutPercentage` in `previousState`
 * and `currentState` (issue 20, point 6), after `enabled`; every other event's payload stays
 * exactly as it was (receivers and black-box tests compare it byte for byte). Delivered to a
 * real receiver on 127.0.0.1, on the stepped clock of the other webhook tests.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { bearer, json, seedAdminKey, testApp, type TestApp, rawRows } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

const FLAGS = "/v1/projects/default/flags";
const ALL_EVENTS = ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled"];

let h: TestApp;
let admin: Record<string, string>;
let rx: Receiver;

beforeEach(async () => {
  h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_TIMEOUT_MS: "2000" });
  admin = bearer(await seedAdminKey(h.ctx));
  rx = startReceiver();
});
afterEach(() => {
  h.close();
  rx.stop();
});

const call = async (method: string, path: string, body?: unknown, status = 200) => json(await h.request(method, path, { body, headers: admin }), status);
/** Runs the change, then every due delivery; returns the bodies that arrived for it, as text. */
async function sent(change: () => Promise<unknown>): Promise<string[]> {
  const before = rx.received.length;
  await change();
  await h.ctx.deliveries.drain();
  return rx.received.slice(before).map((m) => new TextDecoder().decode(m.bytes));
}
const putState = (env: string, body: unknown) => () => call("PUT", `${FLAGS}/checkout/states/${env}`, body);
/** The payload a receiver gets, as the service writes it (keys in this order). */
const payload = (text: string, data: unknown) => {
  const { id, event, environment, timestamp } = JSON.parse(text);
  return JSON.stringify({ id, event, projectSlug: "default", environment, timestamp, data });
};

beforeEach(async () => {
  await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ALL_EVENTS, secret: "a-webhook-secret-of-some-length", environments: ["production"] }, 201);
});

test("a rollout-only state PUT: flag.updated with rolloutPercentage before and after, enabled kept, in that order", async () => {
  await sent(() => call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201));
  // No state row yet: disabled with no rollout before; only the rollout changes.
  const [first] = await sent(putState("production", { enabled: false, rolloutPercentage: 10 }));
  expect(first).toBe(payload(first!, { flagKey: "checkout", previousState: { enabled: false, rolloutPercentage: null }, currentState: { enabled: false, rolloutPercentage: 10 } }));
  expect(JSON.parse(first!).event).toBe("flag.updated");
  await sent(putState("production", { enabled: true }));
  const [raised] = await sent(putState("production", { enabled: true, rolloutPercentage: 25.5 }));
  expect(raised).toBe(payload(raised!, { flagKey: "checkout", previousState: { enabled: true, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: 25.5 } }));
  const [cleared] = await sent(putState("production", { enabled: true, rolloutPercentage: null }));
  expect(cleared).toBe(payload(cleared!, { flagKey: "checkout", previousState: { enabled: true, rolloutPercentage: 25.5 }, currentState: { enabled: true, rolloutPercentage: null } }));
  // What a receiver reading only `enabled` reads is unchanged.
  expect(rx.received.map((m) => [m.json.event, m.json.data.previousState.enabled, m.json.data.currentState.enabled])).toEqual([
    ["flag.created", false, false],
    ["flag.updated", false, false],
    ["flag.enabled", false, true],
    ["flag.updated", true, true],
    ["flag.updated", true, true],
  ]);
  // The stored event holds the same text (every retry and redelivery sends it).
  const stored = (await rawRows(h.ctx, "SELECT payload FROM webhook_events WHERE event = 'flag.updated'")) as { payload: string }[];
  expect(stored.map((r) => r.payload).sort()).toEqual([first!, raised!, cleared!].sort());
});

test("every other event keeps its payload exactly: enabled only", async () => {
  const enabledOnly = (previous: boolean, current: boolean) => ({ flagKey: "checkout", previousState: { enabled: previous }, currentState: { enabled: current } });
  const [created] = await sent(() => call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201));
  expect(created).toBe(payload(created!, enabledOnly(false, false)));
  // enabled and rollout change together: flag.enabled, without the rollout.
  const [enabled] = await sent(putState("production", { enabled: true, rolloutPercentage: 30 }));
  expect(enabled).toBe(payload(enabled!, enabledOnly(false, true)));
  const [patched] = await sent(() => call("PATCH", `${FLAGS}/checkout`, { description: "described" }));
  expect(patched).toBe(payload(patched!, enabledOnly(true, true)));
  expect(JSON.parse(patched!).event).toBe("flag.updated");
  const [disabled] = await sent(putState("production", { enabled: false, rolloutPercentage: 40 }));
  expect(disabled).toBe(payload(disabled!, enabledOnly(true, false)));
  const [deleted] = await sent(() => call("DELETE", `${FLAGS}/checkout`, undefined, 204));
  expect(deleted).toBe(payload(deleted!, enabledOnly(false, false)));
  expect(rx.received.map((m) => m.json.event)).toEqual(["flag.created", "flag.enabled", "flag.updated", "flag.disabled", "flag.deleted"]);
});
