/** @flagsvc/pagerduty against a receiver checking PagerDuty's Events API v2 change events. */
import { afterAll, expect, test } from "bun:test";
import { changeEvent, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const FOLDER = "pagerduty-1.0.0";
const ROUTING_KEY = "R0123456789abcdef0123456789ABCDE";
const accepted = () => Response.json({ message: "Change event processed", status: "success" }, { status: 202 });
const { receiver: pagerduty, baseUrl, sent } = vendor(accepted);
afterAll(() => pagerduty.stop());

test("activate refuses a routing key that is not a 32-character integration key, and a bad baseUrl or linkUrl", async () => {
  for (const bad of [{}, { routingKey: "u+abcdefgh" }, { routingKey: ROUTING_KEY, baseUrl: "events.pagerduty.com" }, { routingKey: ROUTING_KEY, linkUrl: "flags" }]) {
    expect(schemaAccepts(FOLDER, bad)).toBe(false);
    const { sandbox } = await loadUnchecked(FOLDER, bad);
    await expect(sandbox.call("activate")).rejects.toThrow(/config\.(routingKey|baseUrl|linkUrl) must be/);
  }
  const { sandbox, logs } = await loadPackage(FOLDER, { routingKey: ROUTING_KEY });
  await sandbox.call("activate");
  expect(logs).toEqual([["info", "sending flag changes as change events to https://events.pagerduty.com/v2/change/enqueue"]]);
});

test("onEvent enqueues a change event: routing key, summary, timestamp, source, custom details and the link", async () => {
  const { sandbox } = await loadPackage(FOLDER, { routingKey: ROUTING_KEY, baseUrl, source: "flagsvc-prod", linkUrl: "https://flags.example.com" });
  const [request] = await sent(() => sandbox.call("onEvent", changeEvent()));
  expect(request!.method).toBe("POST");
  expect(request!.path).toBe("/v2/change/enqueue");
  expect(request!.headers.get("content-type")).toBe("application/json");
  expect(request!.json).toEqual({
    routing_key: ROUTING_KEY,
    payload: {
      summary: "Feature flag checkout-v2 turned on in production (project shop)",
      timestamp: "2026-11-20T10:00:00.000Z",
      source: "flagsvc-prod",
      custom_details: { event: "flag.enabled", event_id: "evt_01", project: "shop", environment: "production", flag_key: "checkout-v2", previous_state: { enabled: false }, current_state: { enabled: true } },
    },
    links: [{ href: "https://flags.example.com", text: "flagsvc" }],
  });
});

test("summaries per kind of change, cut at the API's 1024 characters; no links unless configured; environments filter", async () => {
  const { sandbox } = await loadPackage(FOLDER, { routingKey: ROUTING_KEY, baseUrl, environments: ["production"] });
  const longKey = "k".repeat(1100);
  const rollout = changeEvent("flag.updated", { data: { flagKey: "checkout-v2", previousState: { enabled: true, rolloutPercentage: null }, currentState: { enabled: true, rolloutPercentage: 50 } } });
  const requests = await sent(async () => {
    await sandbox.call("onEvent", changeEvent("flag.disabled", { environment: "staging" })); // filtered out
    await sandbox.call("onEvent", changeEvent("flag.disabled"));
    await sandbox.call("onEvent", rollout);
    await sandbox.call("onEvent", changeEvent("flag.created", { data: { flagKey: longKey, previousState: { enabled: true }, currentState: { enabled: true } } }));
  });
  expect(requests.map((r) => r.json.payload.summary.slice(0, 80))).toEqual([
    "Feature flag checkout-v2 turned off in production (project shop)",
    "Feature flag checkout-v2 rollout unset -> 50% in production (project shop)",
    `Feature flag ${longKey.slice(0, 80 - 13)}`,
  ]);
  expect(requests[2]!.json.payload.summary.length).toBe(1024);
  expect(requests[0]!.json.payload.source).toBe("flagsvc");
  expect("links" in requests[0]!.json).toBe(false);
});

test("a non-2xx answer fails the hook with the status", async () => {
  const { sandbox, logs } = await loadPackage(FOLDER, { routingKey: ROUTING_KEY, baseUrl });
  pagerduty.answer = () => Response.json({ status: "invalid event", message: "Event object is invalid" }, { status: 400 });
  try {
    await expect(sandbox.call("onEvent", changeEvent())).rejects.toThrow("PagerDuty /v2/change/enqueue answered 400: ");
  } finally {
    pagerduty.answer = accepted;
  }
  expect(logs.at(-1)?.[0]).toBe("warn");
});
