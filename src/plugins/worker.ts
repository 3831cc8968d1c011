/**
 * One active plugin's thread (started and watched by host.ts): its QuickJS sandbox, the host
 * side of `ctx.log` and `ctx.http`, and its hook calls, one at a time in the order they came.
 * The thread runs at the lowest OS priority (nice 19), so plugins never take CPU from request
 * serving. Every text that leaves it (log lines, failures) has the plugin's secret config
 * values replaced by "********".
 */
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { guardedFetch, OutboundBlockedError, OutboundPolicy } from "../lib/outbound";
import { maskable, maskSecrets, type FromPluginWorker, type ToPluginWorker } from "./protocol";
import { loadPlugin, PluginDied, provideWasmModule, type HttpRequest, type HttpResponse, type LogLevel, type Sandbox } from "./sandbox";

declare const self: Worker;

/** `ctx.log`: a bucket of 100 lines refilled at 20 per second; each line cut to 2,000 characters. */
const LOG_BURST = 100;
const LOG_PER_SECOND = 20;
const MAX_LINE = 2000;
/** `ctx.http` (decisions: plugins). */
const HTTP_METHODS: readonly string[] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
const HTTP_TIMEOUT_MS = 10_000;
const HTTP_MAX_BYTES = 1024 * 1024;
const HTTP_CONCURRENCY = 4;

const send = (message: FromPluginWorker) => self.postMessage(message);

// Best effort: Linux gives each thread its own nice value; elsewhere the worker runs at the default.
try {
  setPriority(Number(readlinkSync("/proc/thread-self").split("/").pop()), 19);
} catch {
  // Not Linux, or not permitted: the plugin competes at normal priority.
}

let sandbox: Sandbox | undefined;
let dead = false;
let stopping = false;
let secrets: string[] = [];
/** Work for the sandbox, run one item at a time: hook calls never interleave. */
const queue: (() => Promise<void>)[] = [];
let draining = false;

const mask = (text: string) => maskSecrets(text, secrets);

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

// ---- ctx.http ---------------------------------------------------------------------------------

let policy: OutboundPolicy;
let userAgent = "";
let inFlight = 0;
const waitingForSlot: (() => void)[] = [];

/** The request as the plugin gave it, checked; throws what the plugin sees as the rejection. */
function checked(request: HttpRequest): { method: string; url: string; headers: Headers; body: string | undefined } {
  if (typeof request !== "object" || request === null) throw new Error("ctx.http takes { method, url, headers, body }");
  const method = typeof request.method === "string" ? request.method.toUpperCase() : request.method === undefined ? "GET" : "";
  if (!HTTP_METHODS.includes(method)) throw new Error(`method must be one of ${HTTP_METHODS.join(", ")}`);
  if (typeof request.url !== "string") throw new Error("url must be a string");
  const headers = new Headers();
  if (request.headers !== undefined) {
    if (typeof request.headers !== "object" || request.headers === null || Array.isArray(request.headers)) throw new Error("headers must be an object of strings");
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value !== "string") throw new Error(`header ${name} must be a string`);
      try {
        headers.set(name, value);
      } catch {
        throw new Error(`header ${name} is not a valid header`);
      }
    }
  }
  if (!headers.has("user-agent")) headers.set("user-agent", userAgent);
  const body = request.body;
  if (body !== undefined && body !== null) {
    if (typeof body !== "string") throw new Error("body must be a string (JSON.stringify it)");
    if (method === "GET" || method === "HEAD") throw new Error(`a ${method} request has no body`);
    if (Buffer.byteLength(body) > HTTP_MAX_BYTES) throw new Error("body over 1 MiB");
  }
  return { method, url: request.url, headers, body: body ?? undefined };
}

async function http(request: HttpRequest): Promise<HttpResponse> {
  const { method, url, headers, body } = checked(request);
  if (inFlight >= HTTP_CONCURRENCY) await new Promise<void>((resolve) => waitingForSlot.push(resolve));
  inFlight++;
  const signal = AbortSignal.timeout(HTTP_TIMEOUT_MS);
  try {
    const response = await guardedFetch(url, { method, headers, body, signal }, policy);
    return { status: response.status, headers: response.headers.toJSON(), body: await cappedText(response) };
  } catch (e) {
    if (e instanceof OutboundBlockedError || e instanceof HttpFailure) throw e;
    if (signal.aborted) throw new Error(`no answer within ${HTTP_TIMEOUT_MS / 1000} s`);
    throw new Error(`request failed: ${messageOf(e)}`);
  } finally {
    inFlight--;
    waitingForSlot.shift()?.();
  }
}

/** The response body as text, reading no more than the cap (beyond it, the request is aborted). */
async function cappedText(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > HTTP_MAX_BYTES) {
      await reader.cancel().catch(() => {});
      throw new HttpFailure("response over 1 MiB");
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A failure whose message the plugin sees as it is. */
class HttpFailure extends Error {}

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
  queue.push(work);
  if (!draining) void drain();
}

async function drain(): Promise<void> {
  draining = true;
  for (let work = queue.shift(); work; work = queue.shift()) await work();
  draining = false;
}

async function start(message: Extract<ToPluginWorker, { kind: "start" }>): Promise<void> {
  secrets = maskable(message.secrets);
  policy = new OutboundPolicy(message.outboundAllowedHosts);
  userAgent = message.userAgent;
  if (message.wasm) provideWasmModule(message.wasm);
  try {
    sandbox = await loadPlugin(message.source, message.config, { log, http }, message.limits);
    await sandbox.call("activate");
  } catch (e) {
    died(`activate failed: ${messageOf(e)}`);
    return;
  }
  send({ kind: "active", hooks: [...sandbox.hooks] });
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
          const error = await call("onEvent", JSON.parse(payload));
          if (error === undefined) return;
          send({ kind: "hook", hook: "onEvent", error, position });
        }
        send({ kind: "done", batch: "events" });
      });
      return;
    case "evaluations":
      enqueue(async () => {
        const error = await call("onEvaluations", JSON.parse(message.batch));
        if (error === undefined) return;
        send({ kind: "hook", hook: "onEvaluations", error });
        send({ kind: "done", batch: "evaluations" });
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
