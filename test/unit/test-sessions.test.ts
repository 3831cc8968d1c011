/** The in-memory test-session store that evaluation reads (src/modules/testing/live.ts), and the edition helper. */
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/http/errors";
import { isPro, PRO_REQUIRED_MESSAGE, requirePro } from "../../src/http/edition";
import { LiveSessions, type LiveSession } from "../../src/modules/testing/live";

const T0 = Date.parse("2026-11-22T10:00:00.000Z");

function live(id: string, projectId: string, ttlMs: number, overrides: [string, boolean | string][] = []): LiveSession {
  return {
    id,
    token: `tok-${id}`,
    projectId,
    label: null,
    createdAt: new Date(T0).toISOString(),
    expiresAt: new Date(T0 + ttlMs).toISOString(),
    expiresAtMs: T0 + ttlMs,
    overrides: new Map(overrides),
  };
}

describe("LiveSessions", () => {
  test("overridesFor: the live session of that project by token; expired from expiresAt on; another project or an id: undefined", () => {
    const store = new LiveSessions();
    store.add(live("sess_a", "proj_1", 1000, [["f", true]]));
    expect(store.overridesFor("tok-sess_a", "proj_1", T0)?.get("f")).toBe(true);
    expect(store.overridesFor("tok-sess_a", "proj_1", T0 + 999)?.get("f")).toBe(true);
    expect(store.overridesFor("tok-sess_a", "proj_1", T0 + 1000)).toBeUndefined();
    expect(store.overridesFor("tok-sess_a", "proj_2", T0)).toBeUndefined();
    expect(store.overridesFor("sess_a", "proj_1", T0)).toBeUndefined();
    expect(store.overridesFor("", "proj_1", T0)).toBeUndefined();
    expect(store.live("sess_a", T0 + 999)?.id).toBe("sess_a");
    expect(store.live("sess_a", T0 + 1000)).toBeUndefined();
  });

  test("remove, removeProject and removeExpired drop both lookups", () => {
    const store = new LiveSessions();
    store.add(live("sess_a", "proj_1", 1000));
    store.add(live("sess_b", "proj_1", 5000));
    store.add(live("sess_c", "proj_2", 5000));
    store.add(live("sess_d", "proj_2", 9000));
    expect(store.size).toBe(4);
    expect(store.removeExpired(T0 + 1000)).toBe(1);
    expect(store.live("sess_a", T0)).toBeUndefined();
    store.removeProject("proj_1");
    expect(store.overridesFor("tok-sess_b", "proj_1", T0)).toBeUndefined();
    store.remove("sess_c");
    store.remove("sess_unknown");
    expect(store.overridesFor("tok-sess_c", "proj_2", T0)).toBeUndefined();
    expect(store.overridesFor("tok-sess_d", "proj_2", T0)).toBeDefined();
    expect(store.size).toBe(1);
  });
});

describe("editions", () => {
  test("requirePro throws 403 PRO_EDITION_REQUIRED on CE only", () => {
    expect(isPro({ edition: "pro" })).toBe(true);
    expect(isPro({ edition: "ce" })).toBe(false);
    expect(() => requirePro({ edition: "pro" })).not.toThrow();
    let thrown: unknown;
    try {
      requirePro({ edition: "ce" });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect((thrown as ApiError).status).toBe(403);
    expect((thrown as ApiError).body()).toEqual({ error: "PRO_EDITION_REQUIRED", message: PRO_REQUIRED_MESSAGE });
  });
});
