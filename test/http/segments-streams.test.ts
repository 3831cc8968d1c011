/**
 * Segments and the streams (docs/streams.md): the definitions payload carries the segments its
 * flags use; a segment change is a change of every flag that uses it on the OFREP change stream
 * and the definitions stream (a patch with those flags and the segments); a resume after it too.
 */
import { afterEach, expect, test } from "bun:test";
import { SYSTEM } from "../../src/changes/entry";
import type { ApiKeyPrincipal } from "../../src/http/access";
import { bearer, json, lastPosition, seedAdminKey, testApp, type TestApp } from "../helpers";
import { SseReader, type SseEvent } from "../sse";

let h: TestApp;
afterEach(() => h?.close());

async function setup() {
  h = await testApp({ SVC_RATE_LIMITS: "eval:100000,mgmt:100000,full:100000,admin:100000" });
  const admin = bearer(await seedAdminKey(h.ctx));
  const made = await json(await h.request("POST", "/v1/projects/default/api-keys", { headers: admin, body: { name: "k", scope: "mgmt", environment: "production" } }), 201);
  return { admin, key: made.key as string, headers: bearer(made.key) };
}

const segment = (key: string, included: string[] = []) => h.services.segments.createSegment(SYSTEM, "default", { key, name: key, conditions: [], included });
const flag = (key: string, segmentKey?: string) =>
  h.services.flags.createFlag(SYSTEM, "default", { key, name: key, rules: segmentKey ? [{ conditions: [{ attribute: "userId", operator: "in_segment", value: segmentKey }] }] : [] });
const definitions = (headers: Record<string, string>) => h.request("GET", "/v1/definitions", { headers });
const stream = (headers: Record<string, string>, lastEventId?: string) =>
  h.request("GET", "/v1/definitions/stream", { headers: { ...headers, ...(lastEventId ? { "last-event-id": lastEventId } : {}) } });

async function open(res: Response): Promise<SseReader> {
  expect(res.status).toBe(200);
  const r = new SseReader(res);
  expect(await r.next()).toEqual({ retry: "1000" });
  return r;
}

const data = (e: SseEvent | "end") => {
  if (e === "end") throw new Error("the stream ended");
  return { event: e.event, id: e.id, data: JSON.parse(e.data!) };
};

const record = (s: { key: string; conditions: unknown[]; included: string[]; excluded: string[] }) => ({ key: s.key, conditions: s.conditions, included: s.included, excluded: s.excluded });

test("GET /v1/definitions carries the segments the flags use (and only those); the ETag moves with them", async () => {
  const { headers } = await setup();
  const used = await segment("used", ["u1"]);
  await segment("unused");
  await flag("a", "used");
  await flag("b");
  const first = await definitions(headers);
  const body = await json(first, 200);
  expect(body.segments).toEqual([record(used)]);
  const etag = first.headers.get("etag")!;
  await h.services.segments.updateSegment(SYSTEM, "default", "unused", { included: ["x"] });
  expect((await h.request("GET", "/v1/definitions", { headers: { ...headers, "if-none-match": etag } })).status).toBe(304);
  await h.services.segments.updateSegment(SYSTEM, "default", "used", { included: ["u2"] });
  expect((await h.request("GET", "/v1/definitions", { headers: { ...headers, "if-none-match": etag } })).status).toBe(200);
});

test("a segment change: a patch with every flag that uses it and the segments; the OFREP stream is told", async () => {
  const { headers, admin } = await setup();
  const made = await json(await h.request("POST", "/v1/projects/default/api-keys", { headers: admin, body: { name: "e", scope: "eval", environment: "production" } }), 201);
  const key = made.key as string;
  await segment("beta");
  await flag("one", "beta");
  await flag("two", "beta");
  await flag("three");
  const r = await open(await stream(headers));
  expect(data(await r.next()).event).toBe("put");
  const principal = (await h.ctx.credentials.resolve(`Bearer ${key}`)).principal as ApiKeyPrincipal;
  const token = h.ctx.streamTokens.issue(principal, h.clock.now());
  const ofrep = new SseReader(await h.request("GET", `/ofrep/v1/events?token=${encodeURIComponent(token)}`));
  expect(await ofrep.next()).toEqual({ retry: "1000" });

  const updated = await h.services.segments.updateSegment(SYSTEM, "default", "beta", { included: ["u1"] });
  const patch = data(await r.next());
  const current = await json(await definitions(headers), 200);
  expect(patch).toEqual({
    event: "patch",
    id: String(await lastPosition(h.ctx)),
    data: { version: await lastPosition(h.ctx), flags: current.flags.filter((f: { key: string }) => f.key !== "three"), deleted: [], segments: [record(updated)] },
  });
  const message = await ofrep.next();
  if (message === "end") throw new Error("ended");
  expect(message.id).toBe(String(await lastPosition(h.ctx)));
  // A client refetching at the message evaluates the new state.
  const answer = await json(await h.request("POST", "/v1/evaluate", { body: { flagKey: "one", context: { userId: "u1" } }, headers: bearer(key) }), 200);
  expect(answer.reason).toBe("FLAG_DISABLED"); // never enabled in production: the rule is not reached, yet the snapshot holds it
  expect(h.ctx.snapshot.environment(principal.environmentId)!.get("one")!.flag.rules[0]!.conditions[0]!.value).toMatchObject({ key: "beta" });
  await r.cancel();
  await ofrep.cancel();
});

test("resume after a segment change: one patch with the flags that use it and the segment", async () => {
  const { headers } = await setup();
  await segment("beta");
  await flag("one", "beta");
  await flag("two");
  const first = await open(await stream(headers));
  const version = data(await first.next()).id!;
  await first.cancel();
  const updated = await h.services.segments.updateSegment(SYSTEM, "default", "beta", { excluded: ["x"] });
  const resumed = await open(await stream(headers, version));
  const patch = data(await resumed.next());
  const current = await json(await definitions(headers), 200);
  expect(patch).toEqual({
    event: "patch",
    id: String(await lastPosition(h.ctx)),
    data: { version: await lastPosition(h.ctx), flags: current.flags.filter((f: { key: string }) => f.key === "one"), deleted: [], segments: [record(updated)] },
  });
  await resumed.cancel();
});
