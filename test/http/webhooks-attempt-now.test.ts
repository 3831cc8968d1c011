/**
 * POST /v1/webhook-deliveries/{id}/attempt-now (issue 20, point 6): a pending delivery waiting
 * for a retry is attempted now, as its next attempt on the schedule; never twice at once.
 * Through HTTP over a real database, delivering to a real receiver on 127.0.0.1; time is the
 * injected clock (a retry is not due until the test moves it).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { MESSAGES } from "../../src/http/access";
import type { DeliveryDispatcher } from "../../src/modules/webhooks/dispatcher";
import { bearer, json, seedAdminKey, seedApiKey, testApp, userToken, type TestApp, rawRows } from "../helpers";
import { startReceiver, type Receiver } from "../webhook-receiver";

const FLAGS = "/v1/projects/default/flags";

let h: TestApp;
let admin: Record<string, string>;
let rx: Receiver;

async function start(timeoutMs = 300) {
  h = await testApp({ SVC_OUTBOUND_ALLOWED_HOSTS: "loopback", SVC_WEBHOOK_TIMEOUT_MS: String(timeoutMs) });
  admin = bearer(await seedAdminKey(h.ctx));
}
beforeEach(() => {
  rx = startReceiver();
});
afterEach(() => {
  h.close();
  rx.stop();
});

const call = async (method: string, path: string, body?: unknown, status = 200, headers = admin) => json(await h.request(method, path, { body, headers }), status);
const attemptNow = (id: string, status = 202, headers = admin) => call("POST", `/v1/webhook-deliveries/${id}/attempt-now`, undefined, status, headers);
const settle = () => h.ctx.deliveries.drain();
const at = (ms: number) => new Date(ms).toISOString();
const fail500 = () => new Response("nope", { status: 500 });
/** Every delivery row as stored: what a refused request must leave alone. */
const rows = async () => (await rawRows(h.ctx, "SELECT * FROM webhook_deliveries ORDER BY id"));

/** A flag.enabled delivery whose first attempt got a 500: pending, retry due in a minute. */
async function pendingDelivery() {
  rx.answer = fail500;
  await call("POST", FLAGS, { key: "checkout", name: "Checkout" }, 201);
  const hook = await call("POST", "/v1/projects/default/webhooks", { url: rx.url, events: ["flag.enabled"], secret: "a-webhook-secret-of-some-length" }, 201);
  await call("PUT", `${FLAGS}/checkout/states/production`, { enabled: true });
  await settle();
  const { deliveries } = await call("GET", `/v1/webhooks/${hook.id}/deliveries`);
  expect(deliveries[0]).toMatchObject({ status: "pending", attempts: 1, nextAttemptAt: at(h.clock.now() + 60_000) });
  return { hook, delivery: deliveries[0] as Record<string, any> };
}
const latest = async (hookId: string) => (await call("GET", `/v1/webhooks/${hookId}/deliveries`)).deliveries[0] as Record<string, any>;

describe("attempt-now", () => {
  beforeEach(() => start());

  test("202 with the same delivery, due now; it is attempted at once, without moving the clock, and succeeds", async () => {
    const { hook, delivery } = await pendingDelivery();
    h.clock.advance(5_000);
    rx.answer = () => new Response("ok");
    const answer = await attemptNow(delivery.id);
    expect(answer).toEqual({ ...delivery, nextAttemptAt: at(h.clock.now()) });
    const [first, second] = await rx.waitFor(2); // sent without a drain: the write woke the sender
    expect(second!.headers.get("x-service-delivery")).toBe(delivery.id);
    expect(Buffer.from(second!.bytes).equals(Buffer.from(first!.bytes))).toBe(true);
    await settle();
    expect(await latest(hook.id)).toEqual({
      ...delivery,
      status: "succeeded",
      attempts: 2,
      nextAttemptAt: null,
      lastAttemptAt: at(h.clock.now()),
      responseStatus: 200,
      error: null,
      durationMs: expect.any(Number),
    });
    // One delivery: no new one was made.
    expect((await call("GET", `/v1/webhooks/${hook.id}/deliveries`)).deliveries.length).toBe(1);
  });

  test("the attempt is the next of the schedule: a failure schedules the following retry from it, the one due before is not made too, the 5th failure is final", async () => {
    const { hook, delivery } = await pendingDelivery();
    const t0 = h.clock.now();
    h.clock.advance(10_000);
    await attemptNow(delivery.id);
    await settle();
    // Attempt 2 failed 10 s in: retry 2 is due 5 minutes (the second delay) after it.
    expect(await latest(hook.id)).toMatchObject({ status: "pending", attempts: 2, lastAttemptAt: at(t0 + 10_000), nextAttemptAt: at(t0 + 10_000 + 300_000) });
    h.clock.ms = t0 + 60_000; // when retry 1 was due before: nothing more is sent
    await settle();
    expect(rx.received.length).toBe(2);
    for (const n of [3, 4, 5]) {
      await attemptNow(delivery.id);
      await settle();
      expect(rx.received.length).toBe(n);
    }
    expect(await latest(hook.id)).toMatchObject({ status: "failed", attempts: 5, nextAttemptAt: null, responseStatus: 500 });
    const before = await rows();
    expect(await attemptNow(delivery.id, 409)).toEqual({
      error: "CONFLICT",
      message: `Delivery ${delivery.id} has failed and is not attempted again: redeliver it (POST /v1/webhook-deliveries/${delivery.id}/redeliver)`,
    });
    expect((await rows())).toEqual(before);
    await settle();
    expect(rx.received.length).toBe(5);
  });

  test("409 on a succeeded delivery and on a disabled webhook; 404 unknown; nothing changes", async () => {
    const { hook, delivery } = await pendingDelivery();
    await call("PATCH", `/v1/webhooks/${hook.id}`, { enabled: false });
    let before = await rows();
    expect(await attemptNow(delivery.id, 409)).toEqual({ error: "CONFLICT", message: `Webhook ${hook.id} is disabled: enable it to resume its pending deliveries` });
    expect((await rows())).toEqual(before);
    expect(await attemptNow("del_nope", 404)).toMatchObject({ error: "NOT_FOUND" });
    expect((await rows())).toEqual(before);

    rx.answer = () => new Response("ok");
    await call("PATCH", `/v1/webhooks/${hook.id}`, { enabled: true });
    h.clock.advance(60_000);
    await settle();
    expect(await latest(hook.id)).toMatchObject({ status: "succeeded", attempts: 2 });
    before = await rows();
    expect(await attemptNow(delivery.id, 409)).toEqual({ error: "CONFLICT", message: `Delivery ${delivery.id} has succeeded: nothing is left to attempt` });
    expect((await rows())).toEqual(before);
    expect(rx.received.length).toBe(2);
  });

  test("who may: as redeliver (an API key of another project 403, a viewer 403, an editor and a mgmt key of the project 202)", async () => {
    const { delivery } = await pendingDelivery();
    const before = await rows();
    await call("POST", "/v1/projects", { slug: "other", name: "Other" }, 201);
    expect(await attemptNow(delivery.id, 403, bearer((await seedApiKey(h.ctx, "mgmt", "other")).secret))).toEqual({ error: "FORBIDDEN", message: MESSAGES.otherProject });
    expect((await attemptNow(delivery.id, 403, await userToken(h.ctx, "viewer"))).error).toBe("FORBIDDEN");
    expect((await attemptNow(delivery.id, 403, bearer((await seedApiKey(h.ctx, "eval")).secret))).error).toBe("FORBIDDEN");
    expect((await rows())).toEqual(before);
    expect((await attemptNow(delivery.id, 202, await userToken(h.ctx, "editor"))).id).toBe(delivery.id);
    expect((await attemptNow(delivery.id, 202, bearer((await seedApiKey(h.ctx, "mgmt")).secret))).id).toBe(delivery.id);
    await settle();
  });

  test("the API document describes it", async () => {
    const op = (await call("GET", "/v1/openapi.json")).paths["/v1/webhook-deliveries/{deliveryId}/attempt-now"].post;
    expect(op.tags).toEqual(["Webhooks"]);
    expect(op.description).toContain("next one on the schedule");
    expect(op.description).toContain("never twice at the same time");
    expect(Object.keys(op.responses)).toContain("202");
  });
});

describe("attempt-now while an attempt of it is in flight", () => {
  beforeEach(() => start(5_000));

  test("202 as it is, and no second attempt", async () => {
    const { hook, delivery } = await pendingDelivery();
    h.clock.advance(60_000); // retry 1 due: its attempt starts and hangs until the test answers
    let answer!: (r: Response) => void;
    rx.answer = () => new Promise<Response>((resolve) => (answer = resolve));
    h.ctx.deliveries.kick();
    await rx.waitFor(2);
    const stored = await rows();
    expect(await attemptNow(delivery.id)).toEqual({ ...delivery, nextAttemptAt: at(h.clock.now()) }); // due since this moment
    expect(await attemptNow(delivery.id)).toEqual({ ...delivery, nextAttemptAt: at(h.clock.now()) });
    expect((await rows())).toEqual(stored); // nothing written
    for (let i = 0; i < 5; i++) (h.ctx.deliveries as DeliveryDispatcher).pump();
    await Bun.sleep(50);
    expect(rx.received.length).toBe(2);
    answer(fail500());
    await settle();
    expect(rx.received.length).toBe(2);
    expect(await latest(hook.id)).toMatchObject({ status: "pending", attempts: 2, nextAttemptAt: at(h.clock.now() + 300_000) });
    // Once that attempt is recorded, attempt-now attempts again.
    rx.answer = () => new Response("ok");
    await attemptNow(delivery.id);
    await rx.waitFor(3);
    await settle();
    expect(await latest(hook.id)).toMatchObject({ status: "succeeded", attempts: 3 });
  });
});
