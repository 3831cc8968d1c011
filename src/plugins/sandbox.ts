/**
 * The plugin sandbox (docs: the plugin-sandbox guide's findings): plugin code runs in QuickJS
 * compiled to WebAssembly, one WASM instance per plugin, so that it has no ambient capability
 * (only ECMAScript built-ins, no `fetch`, `process`, `Bun`, `require`, `import`, timers) and
 * hard caps:
 *  - memory: the instance's `WebAssembly.Memory` is created with a `maximum`, so the engine
 *    refuses to grow it past the cap (QuickJS then throws "out of memory"); a QuickJS memory
 *    limit alone is no cap under emscripten, and instances sharing one heap would starve
 *    each other;
 *  - CPU: an interrupt handler ends any synchronous run into the VM (evaluation, a hook call,
 *    its pending jobs, reading its result, whose getters are plugin code) past its slice;
 *  - wall time: a hook that does not settle within its limit (awaiting forever) fails with a
 *    `HookTimeout` (decisions §11: "a hook that takes over 5 s is a failure"); the plugin lives
 *    on, and the host counts the failure like a thrown error.
 * A memory or CPU cap hit, a stack overflow or an internal error is the plugin's death: the
 * instance is dropped whole and every later call fails at once with `PluginDied`. The host API is exactly
 * what `SandboxHost` gives: `ctx.log`, `ctx.config`, and `ctx.http` when the host offers it.
 *
 * This file runs plugin code on the thread that loads it: the plugin host runs it inside
 * worker threads, never on the thread that answers requests.
 */
import releaseSync from "@jitl/quickjs-wasmfile-release-sync";
import wasmPath from "@jitl/quickjs-wasmfile-release-sync/wasm" with { type: "file" };
import { runnableTimer, threadCpuMs } from "../lib/scheduling";
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from "quickjs-emscripten-core";

export type LogLevel = "debug" | "info" | "warn" | "error";
const LOG_LEVELS: readonly string[] = ["debug", "info", "warn", "error"];

export interface HttpRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What the plugin's `ctx` reaches, all provided by the host. */
export interface SandboxHost {
  log(level: LogLevel, message: string): void;
  /** `ctx.http`: performed by the host (its outbound policy, timeout and size cap); absent, no `ctx.http`. */
  http?(request: HttpRequest): Promise<HttpResponse>;
}

export interface SandboxLimits {
  /** The instance's whole WebAssembly memory, QuickJS included (at least 17 MiB: it starts at 16). */
  memoryMb: number;
  /** CPU per synchronous run into the VM; under ~250 ms a garbage collection (uninterruptible) could hit it. */
  cpuMs: number;
  /** Wall time of a hook call, awaits included. */
  wallMs: number;
}

export const DEFAULT_LIMITS: SandboxLimits = { memoryMb: 64, cpuMs: 500, wallMs: 5000 };

/** The plugin is dead (a cap hit, a crash): its instance is gone and every later call fails. */
export class PluginDied extends Error {}

/** A hook's argument given as JSON text already (an event's payload, a batch of records): parsed inside the VM as it is. */
export class JsonText {
  constructor(readonly text: string) {}
}

const PAGE = 64 * 1024;
/** What QuickJS throws when the interrupt handler stops it. */
const INTERRUPTED = "InternalError: interrupted";
const INITIAL_PAGES = 256; // the QuickJS build's own initial memory: 16 MiB
const MAX_STACK = 512 * 1024;


let compiled: Promise<WebAssembly.Module> | undefined;
/**
 * The QuickJS WASM module, compiled once per process (from the file embedded in the binary),
 * unless `provideWasmModule` gave one: the plugin host compiles it once on the main thread and
 * posts it to each worker (a `WebAssembly.Module` crosses `postMessage`), saving each worker
 * the compilation (33–100 ms) and its memory.
 */
export const wasmModule = () => (compiled ??= Bun.file(wasmPath).arrayBuffer().then((bytes) => WebAssembly.compile(bytes)));

/** Uses `module` (compiled elsewhere, from the same file) instead of compiling it here. */
export function provideWasmModule(module: WebAssembly.Module): void {
  compiled ??= Promise.resolve(module);
}

/**
 * Loads an ES module plugin (`source`) into its own instance and returns it with its hooks: the
 * module's named exports that are functions, or those of its default-exported object.
 */
export async function loadPlugin(source: string, config: unknown, host: SandboxHost, limits: SandboxLimits = DEFAULT_LIMITS): Promise<Sandbox> {
  if (limits.memoryMb * 1024 * 1024 <= INITIAL_PAGES * PAGE) throw new RangeError(`memoryMb must be over ${(INITIAL_PAGES * PAGE) >> 20}`);
  const wasmMemory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: Math.floor((limits.memoryMb * 1024 * 1024) / PAGE) });
  const qjs = await newQuickJSWASMModuleFromVariant(newVariant(releaseSync, { wasmModule: await wasmModule(), wasmMemory }));
  const sandbox = new Sandbox(qjs.newRuntime(), wasmMemory, host, limits);
  sandbox.load(source, config);
  return sandbox;
}

export class Sandbox {
  private readonly vm: QuickJSContext;
  /** The run under way: when it started, on the wall clock and in this thread's CPU time (ms). */
  private sliceWall = Number.POSITIVE_INFINITY;
  private sliceCpu = 0;
  private interrupted = false;
  private death: PluginDied | null = null;
  private exports: QuickJSHandle | null = null;
  private ctx: QuickJSHandle | null = null;
  private readonly hookNames = new Set<string>();
  /** The VM's own JSON.parse, taken before any plugin code ran (a plugin may replace the global). */
  private readonly parseJson: QuickJSHandle;

  constructor(
    private readonly runtime: QuickJSRuntime,
    private readonly memory: WebAssembly.Memory,
    private readonly host: SandboxHost,
    private readonly limits: SandboxLimits,
  ) {
    runtime.setMaxStackSize(MAX_STACK);
    runtime.setMemoryLimit(limits.memoryMb * 1024 * 1024);
    // The slice is CPU time of this thread: a plugin thread that waits for a CPU (a busy
    // machine, its low priority) is not over it. CPU time never exceeds wall time, so the
    // costlier CPU clock is read only once the wall clock is past the slice.
    runtime.setInterruptHandler(() => {
      if (Date.now() - this.sliceWall <= limits.cpuMs || threadCpuMs() - this.sliceCpu <= limits.cpuMs) return false;
      this.interrupted = true;
      return true;
    });
    this.vm = runtime.newContext();
    const json = this.vm.getProp(this.vm.global, "JSON");
    this.parseJson = this.vm.getProp(json, "parse");
    json.dispose();
  }

  /** The hooks the plugin exports. */
  get hooks(): ReadonlySet<string> {
    return this.hookNames;
  }

  /** The instance's WebAssembly memory now: never over `limits.memoryMb`. */
  get memoryBytes(): number {
    return this.memory.buffer.byteLength;
  }

  get dead(): PluginDied | null {
    return this.death;
  }

  /** Evaluates the module and builds `ctx`; a failure is the plugin's death. */
  load(source: string, config: unknown): void {
    this.inside(() => {
      this.ctx = this.buildContext(config);
      const result = this.vm.evalCode(source, "plugin.js", { type: "module" });
      if (result.error) this.fail(result.error, "loading the module");
      let exports = result.value;
      const named = this.functionNames(exports);
      const fallback = this.vm.getProp(exports, "default");
      if (named.length === 0 && this.vm.typeof(fallback) === "object") {
        exports.dispose();
        exports = fallback;
      } else fallback.dispose();
      this.exports = exports;
      for (const name of this.functionNames(exports)) this.hookNames.add(name);
    });
  }

  /**
   * Calls a hook with a JSON argument (a value, or `JsonText`; `ctx` after it), awaiting it if it returns a promise;
   * its result as JSON. A hook the plugin does not export: undefined. Throws `PluginDied` when
   * the call kills the plugin, `HookError` when the hook throws, and `HookTimeout` (a HookError)
   * when it does not settle within the wall limit: its promise is abandoned, whatever it does
   * later is ignored.
   */
  async call(hook: string, argument?: unknown): Promise<unknown> {
    if (this.death) throw this.death;
    if (!this.hookNames.has(hook)) return undefined;
    // Time the thread waited for a CPU does not count (a plugin thread runs at the lowest priority).
    let cancel = () => {};
    const wall = new Promise<never>((_, reject) => {
      cancel = runnableTimer(this.limits.wallMs, () => reject(new HookTimeout(`${hook} did not settle within ${this.limits.wallMs} ms`)));
    });
    try {
      return await Promise.race([this.run(hook, argument), wall]);
    } finally {
      cancel();
    }
  }

  /** Frees the instance (a disabled or removed plugin). */
  dispose(): void {
    if (this.death) return;
    try {
      this.exports?.dispose();
      this.ctx?.dispose();
      this.parseJson.dispose();
      this.vm.dispose();
      this.runtime.dispose();
    } catch {
      // Freed or not, the instance goes with the references dropped by `kill`.
    }
    this.kill("disposed");
  }

  private async run(hook: string, argument: unknown): Promise<unknown> {
    const returned = this.inside(() => {
      const fn = this.vm.getProp(this.exports!, hook);
      // activate(ctx) and deactivate(ctx); the others take their JSON, then ctx.
      const args = hook === "activate" || hook === "deactivate" ? [this.ctx!] : [this.toVm(argument), this.ctx!];
      const result = this.vm.callFunction(fn, this.exports!, ...args);
      fn.dispose();
      for (const a of args) if (a !== this.ctx) a.dispose();
      if (result.error) this.rethrow(result.error, hook);
      return result.value;
    });
    // Not a promise: its value, read under the CPU slice (getters are plugin code).
    if (!this.isPromise(returned)) return this.inside(() => this.take(returned));
    const settled = this.vm.resolvePromise(returned);
    returned.dispose();
    this.pump();
    const outcome = await settled;
    if (this.death) throw this.death;
    return this.inside(() => {
      if (outcome.error) this.rethrow(outcome.error, hook);
      return this.take(outcome.value);
    });
  }

  /** Runs the VM's pending jobs (promise reactions) under a CPU slice. */
  private pump(): void {
    if (this.death) return;
    this.inside(() => {
      const jobs = this.runtime.executePendingJobs();
      if (jobs.error) {
        const error = jobs.error;
        this.fail(error, "a promise job");
      }
    });
  }

  private buildContext(config: unknown): QuickJSHandle {
    const vm = this.vm;
    const ctx = vm.newObject();
    const log = vm.newFunction("log", (level, message) => {
      const l = vm.typeof(level) === "string" ? vm.getString(level) : "";
      this.host.log(LOG_LEVELS.includes(l) ? (l as LogLevel) : "info", vm.typeof(message) === "string" ? vm.getString(message) : String(vm.dump(message)));
    });
    vm.setProp(ctx, "log", log);
    log.dispose();
    const configHandle = this.toVm(config ?? {});
    vm.setProp(ctx, "config", configHandle);
    configHandle.dispose();
    const http = this.host.http?.bind(this.host);
    if (http) {
      const fn = vm.newFunction("http", (requestHandle) => {
        const deferred = vm.newPromise();
        let request: HttpRequest;
        try {
          request = vm.dump(requestHandle) as HttpRequest;
        } catch {
          request = { method: "", url: "" };
        }
        http(request).then(
          (response) => this.settle(deferred, () => this.toVm(response), true),
          (e: unknown) => this.settle(deferred, () => vm.newError(e instanceof Error ? e.message : String(e)), false),
        );
        return deferred.handle;
      });
      vm.setProp(ctx, "http", fn);
      fn.dispose();
    }
    return ctx;
  }

  /** A host call settled: its promise inside the VM too, then the reactions it unblocks. */
  private settle(deferred: ReturnType<QuickJSContext["newPromise"]>, value: () => QuickJSHandle, ok: boolean): void {
    if (this.death) return;
    try {
      this.inside(() => {
        const handle = value();
        if (ok) deferred.resolve(handle);
        else deferred.reject(handle);
        handle.dispose();
        deferred.dispose();
      });
      this.pump();
    } catch {
      // The plugin died in it: its pending call fails with `death`, or by its wall limit.
    }
  }

  /** JSON into the VM (a string parsed by the VM's own JSON.parse: no host object crosses). */
  private toVm(value: unknown): QuickJSHandle {
    const text = this.vm.newString(value instanceof JsonText ? value.text : JSON.stringify(value === undefined ? null : value));
    const result = this.vm.callFunction(this.parseJson, this.vm.undefined, text);
    text.dispose();
    if (result.error) this.fail(result.error, "passing data in");
    return result.value;
  }

  /** A result out of the VM as JSON (plugin getters and toJSON run here, under the slice). */
  private take(handle: QuickJSHandle): unknown {
    try {
      if (this.vm.typeof(handle) === "undefined") return undefined;
      const json = this.vm.getProp(this.vm.global, "JSON");
      const stringify = this.vm.getProp(json, "stringify");
      const result = this.vm.callFunction(stringify, json, handle);
      stringify.dispose();
      json.dispose();
      if (result.error) this.rethrow(result.error, "its result");
      const text = this.vm.typeof(result.value) === "string" ? this.vm.getString(result.value) : undefined;
      result.value.dispose();
      return text === undefined ? undefined : JSON.parse(text);
    } finally {
      handle.dispose();
    }
  }

  private functionNames(handle: QuickJSHandle): string[] {
    const keys = this.vm.evalCode("(o) => Object.keys(o).filter((k) => typeof o[k] === 'function')");
    if (keys.error) this.fail(keys.error, "reading the exports");
    const result = this.vm.callFunction(keys.value, this.vm.undefined, handle);
    keys.value.dispose();
    if (result.error) this.fail(result.error, "reading the exports");
    const names = this.vm.dump(result.value) as string[];
    result.value.dispose();
    return names;
  }

  /** A thenable (an async hook's promise): reading `then` is plugin code too, so under the slice. */
  private isPromise(handle: QuickJSHandle): boolean {
    if (this.vm.typeof(handle) !== "object") return false;
    return this.inside(() => {
      const then = this.vm.getProp(handle, "then");
      const yes = this.vm.typeof(then) === "function";
      then.dispose();
      return yes;
    });
  }

  /**
   * Runs `fn` inside the VM under a fresh CPU slice. Anything that escapes as a host error
   * (out of memory in the instance, an abort) kills the plugin; `PluginDied` passes through, as
   * does a plugin's own thrown error (`HookError`).
   */
  private inside<T>(fn: () => T): T {
    if (this.death) throw this.death;
    this.sliceWall = Date.now();
    this.sliceCpu = threadCpuMs();
    this.interrupted = false;
    try {
      return fn();
    } catch (e) {
      if (e instanceof PluginDied || e instanceof HookError) throw e;
      throw this.kill(`crashed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.sliceWall = Number.POSITIVE_INFINITY;
    }
  }

  /** An error out of the VM while running plugin code: a cap hit kills, anything else is the hook's own failure. */
  private rethrow(errorHandle: QuickJSHandle, where: string): never {
    const error = this.describe(errorHandle);
    // The interrupt may have fired in an earlier run into the VM (a promise job) than this one.
    if (this.interrupted || error === INTERRUPTED) throw this.kill(`over its CPU slice of ${this.limits.cpuMs} ms in ${where}`);
    // QuickJS throws null when it cannot even allocate the error of an out-of-memory.
    if (error === "null" || error === "undefined") throw this.kill(`out of memory (cap ${this.limits.memoryMb} MiB) in ${where}`);
    if (/out of memory|stack overflow|string too long|InternalError/i.test(error)) throw this.kill(`${error} in ${where}`);
    throw new HookError(error);
  }

  /** An error where none may be (loading, plumbing): the plugin's death whatever it was. */
  private fail(errorHandle: QuickJSHandle, where: string): never {
    const error = this.describe(errorHandle);
    throw this.kill(this.interrupted || error === INTERRUPTED ? `over its CPU slice of ${this.limits.cpuMs} ms in ${where}` : `${error} in ${where}`);
  }

  private describe(errorHandle: QuickJSHandle): string {
    try {
      const dumped = this.vm.dump(errorHandle) as { name?: string; message?: string } | string;
      return typeof dumped === "object" && dumped !== null ? `${dumped.name ?? "Error"}: ${dumped.message ?? ""}` : String(dumped);
    } catch {
      return "an error that cannot be read";
    } finally {
      errorHandle.dispose();
    }
  }

  /**
   * Ends the plugin. Its runtime is not freed: after an interrupt or an out-of-memory, QuickJS
   * aborts freeing it (an assertion on its object list, printed on stderr); the whole WASM
   * instance, its memory included, goes with the references dropped here.
   */
  private kill(reason: string): PluginDied {
    if (this.death) return this.death;
    this.death = new PluginDied(reason);
    this.exports = null;
    this.ctx = null;
    return this.death;
  }
}

/** A hook threw (or rejected): the plugin's own failure, not its death. */
export class HookError extends Error {}

/** A hook did not settle within its wall limit: a failure, not the plugin's death. */
export class HookTimeout extends HookError {}
