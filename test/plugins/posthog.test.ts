/** @flagsvc/posthog 1.0.0 and 1.1.0 against a receiver checking PostHog's capture batch API. */
import { afterAll, describe, expect, test } from "bun:test";
import { changeEvent, evaluation, loadPackage, loadUnchecked, schemaAccepts, vendor } from "./harness";

const { receiver: posthog, baseUrl, sent } = vendor();
afterAll(() => posthog.stop());

describe.each(["posthog-1.0.0", "posthog-1.1.0"])("%s", (folder) => {
  test("activate refuses a config without apiKey or with a bad baseUrl, and logs where it sends", async () => {
    for (const bad of [{}, { apiKey: "" }, { apiKey: "phc_x", baseUrl: "ftp://x" }]) {
      expect(schemaAccepts(folder, bad)).toBe(false);
      const { sandbox } = await loadUnchecked(folder, bad);
      await expect(sandbox.call("activate")).rejects.toThrow(/config\.(apiKey|baseUrl)/);
    }
    const { sandbox, logs } = await loadPackage(folder, { apiKey: "phc_test", baseUrl });
    await sandbox.call("activate");
    expect(logs).toEqual([["info", expect.stringContaining(`${baseUrl}/batch/`)]]);
  });

  test("onEvaluations posts $feature_flag_called events to /batch/, one per user, flag and value; none without a user", async () => {
    const { sandbox } = await loadPackage(folder, { apiKey: "phc_test", baseUrl: `${baseUrl}/` });
    const batch = [
      evaluation(),
      evaluation({ evaluatedAt: "2026-11-20T10:00:01.000Z" }), // same user, flag and value: reported once
      evaluation({ flagKey: "new-nav", variant: null, enabled: false, reason: "FLAG_DISABLED", ruleId: null }),
      evaluation({ userId: null }),
    ];
    const [request, ...more] = await sent(() => sandbox.call("onEvaluations", batch));
    expect(more).toEqual([]);
    expect(request!.method).toBe("POST");
    expect(request!.path).toBe("/batch/");
    expect(request!.headers.get("content-type")).toBe("application/json");
    expect(request!.json.api_key).toBe("phc_test");
    expect(request!.json.batch).toEqual([
      {
        event: "$feature_flag_called",
        distinct_id: "user-42",
        timestamp: "2026-11-20T10:00:00.000Z",
        properties: { $feature_flag: "checkout-v2", $feature_flag_response: "blue", "$feature/checkout-v2": "blue", flagsvc_environment: "production", flagsvc_reason: "TARGETING_RULE_MATCH", flagsvc_rule_id: "rule_1" },
      },
      {
        event: "$feature_flag_called",
        distinct_id: "user-42",
        timestamp: "2026-11-20T10:00:00.000Z",
        properties: { $feature_flag: "new-nav", $feature_flag_response: false, "$feature/new-nav": false, flagsvc_environment: "production", flagsvc_reason: "FLAG_DISABLED", flagsvc_rule_id: null },
      },
    ]);
    // A batch of anonymous evaluations sends nothing.
    expect(await sent(() => sandbox.call("onEvaluations", [evaluation({ userId: null })]))).toEqual([]);
  });

  test("a non-2xx answer fails the hook with the status, logged as a warning", async () => {
    const { sandbox, logs } = await loadPackage(folder, { apiKey: "phc_test", baseUrl });
    posthog.answer = () => new Response("invalid api key", { status: 401 });
    try {
      await expect(sandbox.call("onEvaluations", [evaluation()])).rejects.toThrow("PostHog /batch/ answered 401: invalid api key");
    } finally {
      posthog.answer = () => new Response("ok");
    }
    expect(logs.at(-1)).toEqual(["warn", "PostHog /batch/ answered 401: invalid api key"]);
    expect(sandbox.dead).toBeNull();
  });
});

describe("the versions differ as documented", () => {
  test("1.0.0 has no onEvent and no personProperties option; 1.1.0 has both", async () => {
    const v1 = await loadPackage("posthog-1.0.0", { apiKey: "phc_test", baseUrl });
    expect([...v1.sandbox.hooks].sort()).toEqual(["activate", "onEvaluations"]);
    expect(schemaAccepts("posthog-1.0.0", { apiKey: "phc_test", personProperties: true })).toBe(false);
    const v11 = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl, personProperties: true });
    expect([...v11.sandbox.hooks].sort()).toEqual(["activate", "onEvaluations", "onEvent"]);
  });

  test("1.1.0 with personProperties $sets the value on the person; without, as 1.0.0, it does not", async () => {
    const withSet = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl, personProperties: true });
    const [a] = await sent(() => withSet.sandbox.call("onEvaluations", [evaluation()]));
    expect(a!.json.batch[0].properties.$set).toEqual({ "$feature/checkout-v2": "blue" });
    const without = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl });
    const [b] = await sent(() => without.sandbox.call("onEvaluations", [evaluation()]));
    expect(b!.json.batch[0].properties.$set).toBeUndefined();
  });

  test("1.1.0 onEvent captures the change, named after it, with no person profile", async () => {
    const { sandbox } = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl, changesDistinctId: "flag-bot" });
    const [enabled] = await sent(() => sandbox.call("onEvent", changeEvent()));
    expect(enabled!.path).toBe("/batch/");
    expect(enabled!.json).toEqual({
      api_key: "phc_test",
      batch: [
        {
          event: "flag.enabled",
          distinct_id: "flag-bot",
          timestamp: "2026-11-20T10:00:00.000Z",
          properties: { $feature_flag: "checkout-v2", $process_person_profile: false, flagsvc_event_id: "evt_01", flagsvc_project: "shop", flagsvc_environment: "production", flagsvc_previous_enabled: false, flagsvc_current_enabled: true },
        },
      ],
    });
    const rollout = changeEvent("flag.updated", { data: { flagKey: "checkout-v2", previousState: { enabled: true, rolloutPercentage: 10 }, currentState: { enabled: true, rolloutPercentage: null } } });
    const [updated] = await sent(() => sandbox.call("onEvent", rollout));
    expect(updated!.json.batch[0].properties).toMatchObject({ flagsvc_previous_rollout_percentage: 10, flagsvc_current_rollout_percentage: null });
    // The default distinct id.
    const plain = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl });
    const [c] = await sent(() => plain.sandbox.call("onEvent", changeEvent("flag.deleted")));
    expect(c!.json.batch[0]).toMatchObject({ event: "flag.deleted", distinct_id: "flagsvc" });
  });

  test("1.1.0 onEvent on a non-2xx answer throws with the status", async () => {
    const { sandbox } = await loadPackage("posthog-1.1.0", { apiKey: "phc_test", baseUrl });
    posthog.answer = () => new Response("busy", { status: 503 });
    try {
      await expect(sandbox.call("onEvent", changeEvent())).rejects.toThrow("PostHog /batch/ answered 503: busy");
    } finally {
      posthog.answer = () => new Response("ok");
    }
  });
});
