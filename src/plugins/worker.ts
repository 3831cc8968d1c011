/**
 * One active plugin's thread (started and watched by host.ts): its QuickJS sandbox, the host
 * side of `ctx.log` and `ctx.http`, and its hook calls, one at a time in the order they came.
 * The thread runs at the lowest CPU priority (SCHED_IDLE, else nice 19: scheduling.ts), so plugins
 * never take CPU from request serving. Every text that leaves it (log lines, failures) has the plugin's secret config
 * values replaced by "********".
 */
import { idleCollector } from "../lib/idle-collect";
import { OutboundPolicy } from "../lib/outbound";
import { pluginHttp, USER_AGENT } from "./http";
import { lowestPriority, threadId } from "../lib/scheduling";
import { secretMask } from "../lib/secret-text";
import type { FromPluginWorker, ToPluginWorker } from "./protocol";
import { JsonText, loadPlugin, PluginDied, provideWasmModule, type LogLevel, type Sandbox } from "./sandbox";

declare const self: Worker;

/** `ctx.log`: a bucket of 100 lines refilled at 20 per second; each line cut to 2,000 characters. */
const LOG_BURST = 100;
const LOG_PER_SECOND = 20;
const MAX_LINE = 2000;

const send = (message: FromPluginWorker) => self.postMessage(message);

// Plugins run on CPU time nothing else wants; the host learns this thread's id for its watchdog.
const priority = lowestPriority();
self.postMessage({ kind: "thread", tid: threadId(), priority } satisfies FromPluginWorker);

let sandbox: Sandbox | undefined;
let dead = false;
let stopping = false;
/** Masks the plugin's secrets in a text: built once, from the forms the start message brings. */
let mask = (text: string) => text;
/** A burst of batches leaves garbage in this thread's heap: collected once the queue has been empty a while. */
const collector = idleCollector();
/** Work for the sandbox, run one item at a time: hook calls never interleave. */
const queue: (() => Promise<void>)[] = [];
let draining = false;

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

// ---- ctx.log ----------------------------------------------------------------------------------

let tokens = LOG_BURST;
let refilledAt = Date.now();
let droppedLines = 0;

function log(level: LogLevel, message: string): void {
  const now = Date.now();
  tokens = Math.min(LOG_BURST, tokens + ((now - refilledAt) * LOG_PER_SECOND) / 1000);
  refilledAt = now;
  if (tokens < 1) {
    droppedLines++;
    return;
  }
  tokens--;
  if (droppedLines > 0) {
    send({ kind: "log", level: "warn", message: `${droppedLines} log lines dropped` });
    droppedLines = 0;
  }
  // Masked before it is cut: a cut could leave part of a secret unmasked.
  send({ kind: "log", level, message: mask(message).slice(0, MAX_LINE) });
}

// ---- hooks ------------------------------------------------------------------------------------

function died(message: string): void {
  if (dead) return;
  dead = true;
  queue.length = 0;
  send({ kind: "dead", message: mask(message) });
}

/** One hook call: null when it succeeded, its failure's text otherwise; undefined when the plugin died in it. */
async function call(hook: string, argument: unknown): Promise<string | null | undefined> {
  try {
    await sandbox!.call(hook, argument);
    return null;
  } catch (e) {
    if (e instanceof PluginDied) {
      died(e.message);
      return undefined;
    }
    return mask(messageOf(e));
  }
}

function enqueue(work: () => Promise<void>): void {
  if (dead || stopping) return;
  collector.busy();
  queue.push(work);
  if (!draining) void drain();
}

async function drain(): Promise<void> {
  draining = true;
  for (let work = queue.shift(); work; work = queue.shift()) await work();
  draining = false;
  collector.idle();
}

async function start(message: Extract<ToPluginWorker, { kind: "start" }>): Promise<void> {
  mask = secretMask(message.secrets);
  const http = pluginHttp(new OutboundPolicy(message.outboundAllowedHosts), USER_AGENT);
  if (message.wasm) provideWasmModule(message.wasm);
  try {
    sandbox = await loadPlugin(message.source, message.config, { log, http }, message.limits);
    await sandbox.call("activate");
  } catch (e) {
    died(`activate failed: ${messageOf(e)}`);
    return;
  }
  send({ kind: "active", hooks: [...sandbox.hooks] });
  // Loading left its garbage (the module's text, the compile); this thread lives long and idles: collect it once.
  Bun.gc(true);
}

self.onmessage = (event: MessageEvent<ToPluginWorker>) => {
  const message = event.data;
  switch (message.kind) {
    case "start":
      enqueue(() => start(message));
      return;
    case "events":
      enqueue(async () => {
        for (const { position, payload } of message.events) {
          if (stopping) return;
          const error = await call("onEvent", new JsonText(payload));
          if (error === undefined) return;
          send({ kind: "hook", error, position });
        }
        send({ kind: "done", batch: "events" });
      });
      return;
    case "evaluations":
      enqueue(async () => {
        const error = await call("onEvaluations", new JsonText(message.batch));
        if (error === undefined) return;
        send({ kind: "done", batch: "evaluations", error });
      });
      return;
    case "stop":
      // Waiting work is dropped; `deactivate` runs now, beside a hook still awaiting (its wall limit bounds it).
      stopping = true;
      queue.length = 0;
      void (async () => {
        if (sandbox && !dead) await call("deactivate", undefined);
        send({ kind: "stopped" });
      })();
      return;
  }
};
