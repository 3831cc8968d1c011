/** Messages between the plugin host (host.ts, main thread) and one plugin's worker (worker.ts). */
import type { SandboxLimits } from "./sandbox";

export type ToPluginWorker =
  /**
   * First message: load the plugin and call `activate`. `wasm`: the QuickJS module compiled on
   * the main thread (null: the worker compiles it itself).
   */
  | {
      kind: "start";
      wasm: WebAssembly.Module | null;
      source: string;
      config: Record<string, unknown>;
      secrets: readonly string[];
      limits: SandboxLimits;
      outboundAllowedHosts: readonly string[];
    }
  /** `onEvent` once per payload (webhook payload JSON texts), in order. */
  | { kind: "events"; events: { position: number; payload: string }[] }
  /** `onEvaluations` with one batch (the JSON text of the records' array, handed to the sandbox as it is). */
  | { kind: "evaluations"; batch: string }
  /** `deactivate`, then answer `stopped`. */
  | { kind: "stop" };

export type FromPluginWorker =
  /** First message: the worker thread's kernel id (for the watchdog) and the priority it got. */
  | { kind: "thread"; tid: number | null; priority: string }
  /** `activate` succeeded (or the plugin has none): the hooks it exports. */
  | { kind: "active"; hooks: string[] }
  /** The plugin cannot run on: a failed `activate`, or its death (a cap hit, a crash). Masked. */
  | { kind: "dead"; message: string }
  /** `onEvent` ended for the event at `position`: `error` null when it succeeded, else its (masked) failure. */
  | { kind: "hook"; position: number; error: string | null }
  /** A batch of `events` is through. */
  | { kind: "done"; batch: "events" }
  /** `onEvaluations` ended for the batch in flight (one message: `error` as for `hook`). */
  | { kind: "done"; batch: "evaluations"; error: string | null }
  /** A line of `ctx.log`, rate-limited, masked and cut to length in the worker. */
  | { kind: "log"; level: string; message: string }
  | { kind: "stopped" };
