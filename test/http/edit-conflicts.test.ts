/**
 * Edit conflicts (docs/decisions.md, "Edit conflicts"): flags, their states and segments answer a
 * strong ETag; a write sent with If-Match is made only when it names the current version, checked
 * in the write's transaction; otherwise 412 PRECONDITION_FAILED naming who changed it, when and
 * which fields, and nothing is written. Without If-Match, nothing changes for existing clients.
 */
import { afterEach, expect, test } from "bun:test";
import { bearer, json, lastPosition, seedAdminKey, testApp, userToken, type TestApp } from "../helpers";

let h: TestApp;
afterEach(() => h?.close());

async function setup() {
  h = await testApp({ SVC_RATE_LIMITS: "admin:100000,user:100000" });
  const admin = bearer(await seedAdminKey(h.ctx, "alice's key"));
  await json(await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "checkout", name: "Checkout", variants: [{ key: "a" }, { key: "b" }] } }), 201);
  return admin;
}

const ETAG = /^"[A-Za-z0-9_-]{27}"$/;
const flagPath = "/v1/projects/default/flags/checkout";
const statePath = `${flagPath}/states/production`;

test("a flag's ETag: on create, GET and PATCH; the same for the same flag; it moves with each change; If-None-Match is 304", async () => {
  const admin = await setup();
  const created = await h.request("POST", "/v1/projects/default/flags", { headers: admin, body: { key: "other", name: "Other" } });
  expect(created.status).toBe(201);
  expect(created.headers.get("etag")).toMatch(ETAG);
  const got = await h.request("GET", "/v1/projects/default/flags/other", { headers: admin });
  expect(got.headers.get("etag")).toBe(created.headers.get("etag"));
  const patched = await h.request("PATCH", "/v1/projects/default/flags/other", { headers: admin, body: { name: "Other 2" } });
  expect(patched.status).toBe(200);
  expect(patched.headers.get("etag")).toMatch(ETAG);
  expect(patched.headers.get("etag")).not.toBe(got.headers.get("etag"));
  expect((await h.request("GET", "/v1/projects/default/flags/other", { headers: admin })).headers.get("etag")).toBe(patched.headers.get("etag"));
  const notModified = await h.request("GET", "/v1/projects/default/flags/other", { headers: { ...admin, "if-none-match": patched.headers.get("etag")! } });
  expect(notModified.status).toBe(304);
  expect(await notModified.text()).toBe("");
  expect(notModified.headers.get("etag")).toBe(patched.headers.get("etag"));
  // A state change is not a change of the flag's definition: its ETag stays.
  await json(await h.request("PUT", "/v1/projects/default/flags/other/states/production", { headers: admin, body: { enabled: true } }), 200);
  expect((await h.request("GET", "/v1/projects/default/flags/other", { headers: admin })).headers.get("etag")).toBe(patched.headers.get("etag"));
});

test("PATCH with the current ETag: 200 and the new ETag; with a stale one: 412 naming the other user and the fields, nothing written", async () => {
  await setup();
  const alice = await userToken(h.ctx, "editor");
  const bob = await userToken(h.ctx, "editor");
  const aliceEmail = (await json(await h.request("GET", "/v1/auth/me", { headers: alice }), 200)).email as string;
  const loaded = (await h.request("GET", flagPath, { headers: bob })).headers.get("etag")!;
  const first = await h.request("PATCH", flagPath, { headers: { ...alice, "if-match": loaded }, body: { name: "Checkout v2", rules: [{ variant: "b" }] } });
  expect(first.status).toBe(200);
  const current = first.headers.get("etag")!;
  expect(current).not.toBe(loaded);
  const at = (await json(first, 200)).updatedAt;
  const before = await lastPosition(h.ctx);
  const second = await h.request("PATCH", flagPath, { headers: { ...bob, "if-match": loaded }, body: { description: "bob's" } });
  expect(await json(second, 412)).toEqual({
    error: "PRECONDITION_FAILED",
    message: `Flag checkout changed by ${aliceEmail} at ${at} (name, rules) since you loaded it: reload it and apply your change again`,
    details: [{ path: "headers.if-match", message: `Does not match the current ETag ${current}` }],
  });
  expect(second.headers.get("etag")).toBe(current);
  expect(await lastPosition(h.ctx)).toBe(before);
  const flag = await json(await h.request("GET", flagPath, { headers: bob }), 200);
  expect(flag.description).toBeUndefined();
  expect(flag.name).toBe("Checkout v2");
  // Reloaded, bob's change goes through.
  expect((await h.request("PATCH", flagPath, { headers: { ...bob, "if-match": current }, body: { description: "bob's" } })).status).toBe(200);
});

test("If-Match: * and lists match the current version; weak tags never do; a malformed one is a 400 and changes nothing", async () => {
  const admin = await setup();
  const etag = (await h.request("GET", flagPath, { headers: admin })).headers.get("etag")!;
  expect((await h.request("PATCH", flagPath, { headers: { ...admin, "if-match": "*" }, body: { name: "n1" } })).status).toBe(200);
  const now = (await h.request("GET", flagPath, { headers: admin })).headers.get("etag")!;
  expect((await h.request("PATCH", flagPath, { headers: { ...admin, "if-match": `${etag}, ${now}` }, body: { name: "n2" } })).status).toBe(200);
  const latest = (await h.request("GET", flagPath, { headers: admin })).headers.get("etag")!;
  expect((await h.request("PATCH", flagPath, { headers: { ...admin, "if-match": `W/${latest}` }, body: { name: "n3" } })).status).toBe(412);
  const before = await lastPosition(h.ctx);
  for (const bad of ["abc", '"unterminated', "W/abc", '"a" "b"']) {
    const res = await h.request("PATCH", flagPath, { headers: { ...admin, "if-match": bad }, body: { name: "n4" } });
    const body = await json(res, 400);
    expect(body.error).toBe("VALIDATION_ERROR");
    expect(body.details[0].path).toBe("headers.if-match");
  }
  expect(await lastPosition(h.ctx)).toBe(before);
  expect((await json(await h.request("GET", flagPath, { headers: admin }), 200)).name).toBe("n2");
});

test("without If-Match a PATCH answers as before (body byte for byte), plus the ETag", async () => {
  const admin = await setup();
  const res = await h.request("PATCH", flagPath, { headers: admin, body: { name: "plain" } });
  const text = await res.text();
  const got = await h.request("GET", flagPath, { headers: admin });
  expect(text).toBe(await got.text());
  expect(res.headers.get("etag")).toBe(got.headers.get("etag"));
  // A stale entry of the flag since (not an edit) does not matter: no If-Match, no check.
  expect((await h.request("PATCH", flagPath, { headers: admin, body: { name: "plain 2" } })).status).toBe(200);
});

test("states: GET and PUT carry the state's ETag; a stale If-Match on PUT is 412 naming who and what; the state is unchanged", async () => {
  await setup();
  const alice = await userToken(h.ctx, "admin");
  const bob = await userToken(h.ctx, "editor");
  const aliceEmail = (await json(await h.request("GET", "/v1/auth/me", { headers: alice }), 200)).email as string;
  const got = await h.request("GET", statePath, { headers: bob });
  const loaded = got.headers.get("etag")!;
  expect(loaded).toMatch(ETAG);
  expect((await h.request("GET", statePath, { headers: { ...bob, "if-none-match": loaded } })).status).toBe(304);
  const put = await h.request("PUT", statePath, { headers: { ...alice, "if-match": loaded }, body: { enabled: true, rolloutPercentage: 30 } });
  const at = (await json(put, 200)).updatedAt;
  const current = put.headers.get("etag")!;
  expect(current).not.toBe(loaded);
  expect((await h.request("GET", statePath, { headers: bob })).headers.get("etag")).toBe(current);
  const stale = await h.request("PUT", statePath, { headers: { ...bob, "if-match": loaded }, body: { enabled: false } });
  expect((await json(stale, 412)).message).toBe(
    `Flag checkout's state in production changed by ${aliceEmail} at ${at} (enabled, rolloutPercentage) since you loaded it: reload it and apply your change again`,
  );
  expect(stale.headers.get("etag")).toBe(current);
  const state = await json(await h.request("GET", statePath, { headers: bob }), 200);
  expect([state.enabled, state.rolloutPercentage]).toEqual([true, 30]);
  // Another environment's state is its own: its ETag did not move.
  const staging = await h.request("GET", `${flagPath}/states/staging`, { headers: bob });
  expect((await h.request("PUT", `${flagPath}/states/staging`, { headers: { ...bob, "if-match": staging.headers.get("etag")! }, body: { enabled: true } })).status).toBe(200);
});

test("segments: POST, GET and PATCH carry the ETag; a stale If-Match on PATCH is 412 naming who and what; nothing written", async () => {
  const admin = await setup();
  const editor = await userToken(h.ctx, "editor");
  const created = await h.request("POST", "/v1/projects/default/segments", { headers: admin, body: { key: "beta", name: "Beta", conditions: [], included: ["u1"] } });
  const loaded = created.headers.get("etag")!;
  expect(loaded).toMatch(ETAG);
  const path = "/v1/projects/default/segments/beta";
  expect((await h.request("GET", path, { headers: editor })).headers.get("etag")).toBe(loaded);
  expect((await h.request("GET", path, { headers: { ...editor, "if-none-match": loaded } })).status).toBe(304);
  const patched = await h.request("PATCH", path, { headers: { ...admin, "if-match": loaded }, body: { included: ["u1", "u2"] } });
  const at = (await json(patched, 200)).updatedAt;
  const before = await lastPosition(h.ctx);
  const stale = await h.request("PATCH", path, { headers: { ...editor, "if-match": loaded }, body: { excluded: ["u3"] } });
  expect((await json(stale, 412)).message).toBe(`Segment beta changed by alice's key at ${at} (included) since you loaded it: reload it and apply your change again`);
  expect(await lastPosition(h.ctx)).toBe(before);
  expect((await json(await h.request("GET", path, { headers: editor }), 200)).excluded).toEqual([]);
});

test("two PATCHes sent at once with the same ETag: exactly one is written, the other is 412", async () => {
  const admin = await setup();
  const etag = (await h.request("GET", flagPath, { headers: admin })).headers.get("etag")!;
  const before = await lastPosition(h.ctx);
  const answers = await Promise.all(
    ["first", "second", "third"].map((name) => h.request("PATCH", flagPath, { headers: { ...admin, "if-match": etag }, body: { name } })),
  );
  expect(answers.map((r) => r.status).sort()).toEqual([200, 412, 412]);
  expect(await lastPosition(h.ctx)).toBe(before + 1);
  const winner = await json(answers.find((r) => r.status === 200)!, 200);
  expect((await json(await h.request("GET", flagPath, { headers: admin }), 200)).name).toBe(winner.name);
});

test("If-Match on a flag that does not exist is its 404", async () => {
  const admin = await setup();
  expect((await h.request("PATCH", "/v1/projects/default/flags/nope", { headers: { ...admin, "if-match": '"x"' }, body: { name: "n" } })).status).toBe(404);
});
