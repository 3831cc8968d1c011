/** @flagsvc/customerio against a receiver checking Customer.io's Track API v2 batch endpoint. */
import { afterAll, expect, test } from "bun:test";
import { evaluation, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const FOLDER = "customerio-1.0.0";
const { receiver: customerio, baseUrl, sent } = vendor(() => Response.json({}));
afterAll(() => customerio.stop());

test("activate refuses a config without site id or key, or an unknown identifier", async () => {
  for (const bad of [{ apiKey: "k" }, { siteId: "s" }, { siteId: "s", apiKey: "k", identifier: "cio_id" }, { siteId: "s", apiKey: "k", baseUrl: "track.customer.io" }]) {
    expect(schemaAccepts(FOLDER, bad)).toBe(false);
    const { sandbox } = await loadUnchecked(FOLDER, bad);
    await expect(sandbox.call("activate")).rejects.toThrow(/config\.(siteId|apiKey|identifier|baseUrl)/);
  }
  const { sandbox, logs } = await loadPackage(FOLDER, { siteId: "s", apiKey: "k" });
  await sandbox.call("activate");
  expect(logs).toEqual([["info", "identifying people by id with flagsvc_<flag> attributes at https://track.customer.io/api/v2/batch"]]);
});

test("onEvaluations identifies each person once with the latest value of each flag, Basic site_id:api_key", async () => {
  const { sandbox } = await loadPackage(FOLDER, { siteId: "site-1", apiKey: "trk-é-secret", baseUrl, environments: ["production"] });
  const batch = [
    evaluation({ userId: "42" }),
    evaluation({ userId: "42", variant: "green", evaluatedAt: "2026-11-20T09:59:59.000Z" }), // older: loses
    evaluation({ userId: "42", flagKey: "new-nav", variant: null, enabled: false }),
    evaluation({ userId: "43", variant: null }),
    evaluation({ userId: "43", flagKey: "ghost", reason: "FLAG_NOT_FOUND" }),
    evaluation({ userId: null }),
    evaluation({ userId: "44", environment: "staging" }),
  ];
  const [request, ...more] = await sent(() => sandbox.call("onEvaluations", batch));
  expect(more).toEqual([]);
  expect(request!.method).toBe("POST");
  expect(request!.path).toBe("/api/v2/batch");
  // The sandbox has no btoa: the plugin's own base64 of the UTF-8 bytes must match.
  expect(request!.headers.get("authorization")).toBe(`Basic ${Buffer.from("site-1:trk-é-secret").toString("base64")}`);
  expect(request!.headers.get("content-type")).toBe("application/json");
  expect(request!.json).toEqual({
    batch: [
      { type: "person", identifiers: { id: "42" }, action: "identify", attributes: { "flagsvc_checkout-v2": "blue", "flagsvc_new-nav": false } },
      { type: "person", identifiers: { id: "43" }, action: "identify", attributes: { "flagsvc_checkout-v2": true } },
    ],
  });
});

test("identifier email, another prefix; a batch over 500 KB is split into requests under it", async () => {
  const { sandbox } = await loadPackage(FOLDER, { siteId: "s", apiKey: "k", baseUrl, identifier: "email", attributePrefix: "ff_" });
  const [small] = await sent(() => sandbox.call("onEvaluations", [evaluation({ userId: "ada@example.com" })]));
  expect(small!.json.batch).toEqual([{ type: "person", identifiers: { email: "ada@example.com" }, action: "identify", attributes: { "ff_checkout-v2": "blue" } }]);
  // 500 people with a 2 KB variant each: about 1 MB of entries.
  const big = Array.from({ length: 500 }, (_, i) => evaluation({ userId: `user-${i}@example.com`, variant: "v".repeat(2000) }));
  const requests = await sent(() => sandbox.call("onEvaluations", big));
  expect(requests.length).toBeGreaterThanOrEqual(3);
  for (const r of requests) expect(r.bytes.length).toBeLessThanOrEqual(500_000);
  expect(requests.flatMap((r) => r.json.batch.map((e: any) => e.identifiers.email))).toEqual(big.map((r) => r.userId));
});

test("a non-2xx answer fails the hook with the status", async () => {
  const { sandbox, logs } = await loadPackage(FOLDER, { siteId: "s", apiKey: "wrong", baseUrl });
  customerio.answer = () => Response.json({ meta: { error: "Unauthorized request" } }, { status: 401 });
  try {
    await expect(sandbox.call("onEvaluations", [evaluation()])).rejects.toThrow("Customer.io /api/v2/batch answered 401: ");
  } finally {
    customerio.answer = () => Response.json({});
  }
  expect(logs.at(-1)?.[0]).toBe("warn");
});
