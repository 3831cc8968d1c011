/**
 * The plugin sandbox (src/plugins/sandbox.ts): what plugin code can reach, and that each way
 * of exhausting memory, CPU, the stack or the wall clock ends that plugin alone, with a reason.
 */
import { describe, expect, test } from "bun:test";
import { HookError, HookTimeout, loadPlugin, PluginDied, type HttpRequest, type LogLevel, type SandboxLimits } from "../../src/plugins/sandbox";

const LIMITS: SandboxLimits = { memoryMb: 32, cpuMs: 300, wallMs: 1500 };

function host(http?: (r: HttpRequest) => Promise<{ status: number; headers: Record<string, string>; body: string }>) {
  const logs: [LogLevel, string][] = [];
  return { logs, host: { log: (level: LogLevel, message: string) => void logs.push([level, message]), ...(http ? { http } : {}) } };
}

const load = (source: string, config: unknown = {}, h = host().host, limits = LIMITS) => loadPlugin(source, config, h, limits);

describe("hooks and ctx", () => {
  test("named exports are the hooks; activate gets ctx (log, config); others get their JSON and ctx; async hooks are awaited", async () => {
    const h = host();
    const plugin = await load(
      `let seen = 0;
       export function activate(ctx) { ctx.log("info", "hello " + ctx.config.name); }
       export function onEvent(event, ctx) { seen++; ctx.log("debug", event.flagKey); return { seen, key: event.flagKey }; }
       export async function onEvaluations(batch) { await null; return batch.length; }
       export const notAHook = 1;`,
      { name: "world" },
      h.host,
    );
    expect([...plugin.hooks].sort()).toEqual(["activate", "onEvaluations", "onEvent"]);
    expect(await plugin.call("activate")).toBeUndefined();
    expect(await plugin.call("onEvent", { flagKey: "a" })).toEqual({ seen: 1, key: "a" });
    expect(await plugin.call("onEvent", { flagKey: "b" })).toEqual({ seen: 2, key: "b" });
    expect(await plugin.call("onEvaluations", [1, 2, 3])).toBe(3);
    expect(await plugin.call("deactivate")).toBeUndefined(); // not exported: nothing to call
    expect(h.logs).toEqual([["info", "hello world"], ["debug", "a"], ["debug", "b"]]);
    plugin.dispose();
  });

  test("a default-exported object holding the hooks is accepted", async () => {
    const plugin = await load(`export default { onEvent(e) { return e.n * 2; } };`);
    expect([...plugin.hooks]).toEqual(["onEvent"]);
    expect(await plugin.call("onEvent", { n: 21 })).toBe(42);
  });

  test("ctx.http is performed by the host; its rejection is catchable in the plugin", async () => {
    const requests: HttpRequest[] = [];
    const h = host(async (r) => {
      requests.push(r);
      if (r.url.includes("fail")) throw new Error("refused by the outbound policy");
      return { status: 202, headers: { "content-type": "text/plain" }, body: "ok" };
    });
    const plugin = await load(
      `export async function onEvent(e, ctx) {
         const a = await ctx.http({ method: "POST", url: "https://example.com/ingest", headers: { authorization: "Bearer k" }, body: JSON.stringify(e) });
         let refused = null;
         try { await ctx.http({ method: "GET", url: "https://example.com/fail" }); } catch (err) { refused = err.message; }
         return { status: a.status, body: a.body, refused };
       }`,
      {},
      h.host,
    );
    expect(await plugin.call("onEvent", { flagKey: "x" })).toEqual({ status: 202, body: "ok", refused: "refused by the outbound policy" });
    expect(requests[0]).toEqual({ method: "POST", url: "https://example.com/ingest", headers: { authorization: "Bearer k" }, body: '{"flagKey":"x"}' });
  });

  test("a hook that throws is its own failure (HookError), not the plugin's death", async () => {
    const plugin = await load(`export function onEvent(e) { if (e.bad) throw new TypeError("bad event"); return "fine"; }`);
    await expect(plugin.call("onEvent", { bad: true })).rejects.toThrow(HookError);
    await expect(plugin.call("onEvent", { bad: true })).rejects.toThrow("TypeError: bad event");
    expect(await plugin.call("onEvent", {})).toBe("fine");
    expect(plugin.dead).toBeNull();
  });
});

describe("no ambient capability", () => {
  test("fetch, process, Bun, require, module, timers, console, WebAssembly are not declared; the Function constructor reaches nothing", async () => {
    const plugin = await load(
      `export function onEvent(e, ctx) {
         const names = ["fetch", "process", "Bun", "require", "module", "setTimeout", "setInterval", "console", "WebAssembly", "Deno", "globalThis.Buffer"];
         const seen = names.map((n) => { try { return n + ":" + typeof eval(n); } catch (err) { return n + ":" + err.name; } });
         const escaped = ctx.log.constructor("return typeof Bun + '/' + typeof process + '/' + typeof fetch")();
         const viaGlobal = globalThis.constructor.constructor("return this")();
         return { seen, escaped, globalKeys: Object.getOwnPropertyNames(viaGlobal).filter((k) => /fetch|Bun|process|require/.test(k)) };
       }`,
    );
    expect(await plugin.call("onEvent", {})).toEqual({
      // Not declared at all: naming them is a ReferenceError.
      seen: [...["fetch", "process", "Bun", "require", "module", "setTimeout", "setInterval", "console", "WebAssembly", "Deno"].map((n) => `${n}:ReferenceError`), "globalThis.Buffer:undefined"],
      escaped: "undefined/undefined/undefined",
      globalKeys: [],
    });
  });

  test("static and dynamic imports fail: a static one at load, a dynamic one in the hook", async () => {
    await expect(load(`import fs from "fs"; export function activate() {}`)).rejects.toThrow(PluginDied);
    const plugin = await load(
      `export async function onEvent() {
         const out = [];
         for (const m of ["bun", "node:child_process", "fs", "./other.js", "data:text/javascript,export default 1"]) {
           try { await import(m); out.push(m + ": loaded"); } catch (err) { out.push(m + ": refused"); }
         }
         return out;
       }`,
    );
    expect(await plugin.call("onEvent", {})).toEqual(["bun: refused", "node:child_process: refused", "fs: refused", "./other.js: refused", "data:text/javascript,export default 1: refused"]);
  });
});

describe("caps: each ends that plugin alone, with a reason", () => {
  const died = async (source: string, reason: RegExp, hook = "onEvent", limits = LIMITS) => {
    const started = performance.now();
    let error: unknown;
    try {
      const plugin = await load(source, {}, host().host, limits);
      await plugin.call(hook, {});
      // A plugin that survived its call must fail every later one: it did not.
      throw new Error("the plugin survived");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PluginDied);
    expect((error as Error).message).toMatch(reason);
    return performance.now() - started;
  };

  test("an infinite loop: in a hook, after an await, in the module body, in a getter of the returned value", async () => {
    expect(await died(`export function onEvent() { while (true) {} }`, /CPU slice/)).toBeLessThan(3000);
    await died(`export async function onEvent() { await null; while (true) {} }`, /CPU slice/);
    await died(`export async function onEvent() { while (true) await null; }`, /CPU slice/);
    await died(`while (true) {} export function onEvent() {}`, /CPU slice/);
    await died(`export function onEvent() { return { get x() { while (true) {} } }; }`, /CPU slice/);
    await died(`export function onEvent() { return { toJSON() { for (;;) {} } }; }`, /CPU slice/);
  });

  test("memory bombs: arrays, typed arrays, strings, objects", async () => {
    await died(`export function onEvent() { const a = []; for (;;) a.push(new Array(1e5).fill(1)); }`, /out of memory|CPU slice/);
    await died(`export function onEvent() { const a = []; for (;;) a.push(new Uint8Array(1 << 20)); }`, /out of memory|RangeError|CPU slice/);
    await died(`export function onEvent() { let s = "x"; for (;;) s += s; }`, /out of memory|string too long|RangeError|CPU slice/);
    await died(`export function onEvent() { const m = new Map(); for (let i = 0; ; i++) m.set(i, { i, s: "v" + i }); }`, /out of memory|CPU slice/);
  });

  test("a bomb grows the instance's memory up to its cap, never past it", async () => {
    const plugin = await load(`export function onEvent() { const a = []; for (;;) a.push(new Array(1e5).fill(1)); }`);
    const before = plugin.memoryBytes;
    await expect(plugin.call("onEvent", {})).rejects.toThrow(PluginDied);
    expect(before).toBeLessThan(LIMITS.memoryMb << 20);
    expect(plugin.memoryBytes).toBeGreaterThan(before);
    expect(plugin.memoryBytes).toBeLessThanOrEqual(LIMITS.memoryMb << 20);
  });

  test("a stack overflow", async () => {
    await died(`function f(n) { return f(n + 1) + 1; } export function onEvent() { return f(0); }`, /stack overflow|InternalError/);
  });

  test("a hook that never settles fails at its wall limit, and the plugin lives on", async () => {
    const plugin = await load(`export function onEvent(e) { return e.hang ? new Promise(() => {}) : "ok"; }`, {}, host().host, LIMITS);
    const started = performance.now();
    const error = await plugin.call("onEvent", { hang: true }).catch((e: unknown) => e);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1400);
    expect(error).toBeInstanceOf(HookTimeout);
    expect((error as Error).message).toBe("onEvent did not settle within 1500 ms");
    expect(plugin.dead).toBeNull();
    expect(await plugin.call("onEvent", {})).toBe("ok");
  });

  test("a dead plugin fails every later call at once; another plugin keeps working beside it", async () => {
    const good = await load(`let n = 0; export function onEvent() { return ++n; }`);
    const bad = await load(`export function onEvent(e) { if (e.loop) for (;;) {} return "ok"; }`);
    expect(await bad.call("onEvent", {})).toBe("ok");
    await expect(bad.call("onEvent", { loop: true })).rejects.toThrow(PluginDied);
    await expect(bad.call("onEvent", {})).rejects.toThrow(/CPU slice/);
    expect(bad.dead).toBeInstanceOf(PluginDied);
    expect(await good.call("onEvent", {})).toBe(1);
    expect(await good.call("onEvent", {})).toBe(2);
  });
});
