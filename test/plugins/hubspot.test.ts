/** @flagsvc/hubspot against a receiver checking HubSpot's CRM v3 contacts batch upsert. */
import { afterAll, expect, test } from "bun:test";
import { evaluation, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const FOLDER = "hubspot-1.0.0";
const ok = () => Response.json({ status: "COMPLETE", results: [] });
const { receiver: hubspot, baseUrl, sent } = vendor(ok);
afterAll(() => hubspot.stop());

test("activate refuses a config without token, or property names HubSpot would refuse", async () => {
  for (const bad of [{}, { accessToken: "pat", idProperty: "E-mail" }, { accessToken: "pat", propertyPrefix: "Flag-" }, { accessToken: "pat", environments: "production" }]) {
    expect(schemaAccepts(FOLDER, bad)).toBe(false);
    const { sandbox } = await loadUnchecked(FOLDER, bad);
    await expect(sandbox.call("activate")).rejects.toThrow(/config\.(accessToken|idProperty|propertyPrefix|environments)/);
  }
  const { sandbox, logs } = await loadPackage(FOLDER, { accessToken: "pat" });
  await sandbox.call("activate");
  expect(logs).toEqual([["info", "upserting contacts by email with flagsvc_<flag> properties at https://api.hubapi.com"]]);
});

test("onEvaluations upserts one input per contact with the latest value of each flag, bearer token, by idProperty", async () => {
  const { sandbox } = await loadPackage(FOLDER, { accessToken: "pat-na1-secret", baseUrl, environments: ["production"] });
  const batch = [
    evaluation({ userId: "ada@example.com", evaluatedAt: "2026-11-20T10:00:02.000Z" }),
    evaluation({ userId: "ada@example.com", variant: "green", evaluatedAt: "2026-11-20T10:00:01.000Z" }), // older: loses
    evaluation({ userId: "ada@example.com", flagKey: "New.Nav", variant: null, enabled: false }),
    evaluation({ userId: "bob@example.com", variant: null, enabled: true }),
    evaluation({ userId: "bob@example.com", flagKey: "ghost", variant: null, enabled: false, reason: "FLAG_NOT_FOUND" }), // no such flag
    evaluation({ userId: null }), // no contact
    evaluation({ userId: "eve@example.com", environment: "staging" }), // filtered out
  ];
  const [request, ...more] = await sent(() => sandbox.call("onEvaluations", batch));
  expect(more).toEqual([]);
  expect(request!.method).toBe("POST");
  expect(request!.path).toBe("/crm/v3/objects/contacts/batch/upsert");
  expect(request!.headers.get("authorization")).toBe("Bearer pat-na1-secret");
  expect(request!.headers.get("content-type")).toBe("application/json");
  expect(request!.json).toEqual({
    inputs: [
      { idProperty: "email", id: "ada@example.com", properties: { flagsvc_checkout_v2: "blue", flagsvc_new_nav: "false" } },
      { idProperty: "email", id: "bob@example.com", properties: { flagsvc_checkout_v2: "true" } },
    ],
  });
});

test("more than 100 contacts are split at HubSpot's batch limit of 100 inputs", async () => {
  const { sandbox } = await loadPackage(FOLDER, { accessToken: "pat", baseUrl, idProperty: "flagsvc_user_id", propertyPrefix: "ff_" });
  const batch = Array.from({ length: 250 }, (_, i) => evaluation({ userId: `u${i}` }));
  const requests = await sent(() => sandbox.call("onEvaluations", batch));
  expect(requests.map((r) => r.json.inputs.length)).toEqual([100, 100, 50]);
  expect(requests[2]!.json.inputs.at(-1)).toEqual({ idProperty: "flagsvc_user_id", id: "u249", properties: { ff_checkout_v2: "blue" } });
  // A batch with no contact to update sends nothing.
  expect(await sent(() => sandbox.call("onEvaluations", [evaluation({ userId: null })]))).toEqual([]);
});

test("a non-2xx answer fails the hook with the status; a 207 (some contacts refused) is a warning only", async () => {
  const { sandbox, logs } = await loadPackage(FOLDER, { accessToken: "pat", baseUrl });
  hubspot.answer = () => Response.json({ status: "error", message: "Authentication credentials not found" }, { status: 401 });
  try {
    await expect(sandbox.call("onEvaluations", [evaluation()])).rejects.toThrow("HubSpot contacts batch upsert answered 401: ");
    hubspot.answer = () => Response.json({ status: "COMPLETE", numErrors: 1, errors: [{ message: "Property values were not valid" }] }, { status: 207 });
    expect(await sandbox.call("onEvaluations", [evaluation()])).toBeUndefined();
    expect(logs.at(-1)).toEqual(["warn", expect.stringContaining("HubSpot upserted part of 1 contacts")]);
  } finally {
    hubspot.answer = ok;
  }
});
