/** @flagsvc/grafana against a receiver checking Grafana's annotations HTTP API. */
import { afterAll, expect, test } from "bun:test";
import { changeEvent, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const FOLDER = "grafana-1.0.0";
const { receiver: grafana, baseUrl, sent } = vendor(() => Response.json({ message: "Annotation added", id: 1 }));
afterAll(() => grafana.stop());

test("activate refuses a config without baseUrl or token, or a panelId without a dashboard", async () => {
  for (const bad of [{ token: "glsa_x" }, { baseUrl }, { baseUrl, token: "glsa_x", panelId: 2 }, { baseUrl, token: "glsa_x", tags: "flagsvc" }]) {
    const { sandbox } = await loadUnchecked(FOLDER, bad);
    await expect(sandbox.call("activate")).rejects.toThrow(/config\.(baseUrl|token|panelId|tags)/);
  }
  expect(schemaAccepts(FOLDER, { baseUrl })).toBe(false);
  expect(schemaAccepts(FOLDER, { baseUrl, token: "glsa_x", tags: "flagsvc" })).toBe(false);
  const { sandbox, logs } = await loadPackage(FOLDER, { baseUrl, token: "glsa_x", dashboardUID: "abc123" });
  await sandbox.call("activate");
  expect(logs).toEqual([["info", `annotating flag changes in ${baseUrl} (dashboard abc123)`]]);
});

test("onEvent posts an annotation with the bearer token, the change's time, tags and text", async () => {
  const { sandbox } = await loadPackage(FOLDER, { baseUrl, token: "glsa_secret", dashboardUID: "abc123", panelId: 2, tags: ["flags", "release"] });
  const [request] = await sent(() => sandbox.call("onEvent", changeEvent()));
  expect(request!.method).toBe("POST");
  expect(request!.path).toBe("/api/annotations");
  expect(request!.headers.get("authorization")).toBe("Bearer glsa_secret");
  expect(request!.headers.get("content-type")).toBe("application/json");
  expect(request!.json).toEqual({
    time: Date.parse("2026-11-20T10:00:00.000Z"),
    tags: ["flags", "release", "flag.enabled", "flag:checkout-v2", "environment:production", "project:shop"],
    text: "Flag checkout-v2 turned on in production (project shop)",
    dashboardUID: "abc123",
    panelId: 2,
  });
});

test("each kind of change reads as it should; without a dashboard the annotation is organization-wide", async () => {
  const { sandbox } = await loadPackage(FOLDER, { baseUrl, token: "glsa_x" });
  const rollout = changeEvent("flag.updated", { data: { flagKey: "checkout-v2", previousState: { enabled: true, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: 25 } } });
  const created = changeEvent("flag.created", { data: { flagKey: "checkout-v2", previousState: { enabled: false }, currentState: { enabled: false } } });
  const requests = await sent(async () => {
    for (const e of [changeEvent("flag.disabled"), created, changeEvent("flag.deleted"), rollout, changeEvent("flag.updated")]) await sandbox.call("onEvent", e);
  });
  expect(requests.map((r) => r.json.text)).toEqual([
    "Flag checkout-v2 turned off in production (project shop)",
    "Flag checkout-v2 created in production (project shop), off",
    "Flag checkout-v2 deleted in production (project shop)",
    "Flag checkout-v2 rollout 10% -> 25% in production (project shop)",
    "Flag checkout-v2 updated in production (project shop)",
  ]);
  expect(requests[0]!.json.tags).toEqual(["flagsvc", "flag.disabled", "flag:checkout-v2", "environment:production", "project:shop"]);
  expect("dashboardUID" in requests[0]!.json).toBe(false);
  expect("panelId" in requests[0]!.json).toBe(false);
});

test("environments filters the changes annotated", async () => {
  const { sandbox } = await loadPackage(FOLDER, { baseUrl, token: "glsa_x", environments: ["production"] });
  const requests = await sent(async () => {
    await sandbox.call("onEvent", changeEvent("flag.enabled", { environment: "staging" }));
    await sandbox.call("onEvent", changeEvent("flag.enabled"));
  });
  expect(requests.map((r) => r.json.tags[3])).toEqual(["environment:production"]);
});

test("a non-2xx answer fails the hook with the status", async () => {
  const { sandbox, logs } = await loadPackage(FOLDER, { baseUrl, token: "glsa_revoked" });
  grafana.answer = () => Response.json({ message: "Unauthorized" }, { status: 401 });
  try {
    await expect(sandbox.call("onEvent", changeEvent())).rejects.toThrow('Grafana /api/annotations answered 401: {"message":"Unauthorized"}');
  } finally {
    grafana.answer = () => Response.json({ message: "Annotation added", id: 1 });
  }
  expect(logs.at(-1)?.[0]).toBe("warn");
});
