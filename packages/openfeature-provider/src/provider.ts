/**
 * The local-evaluation OpenFeature provider: the flags of the key's environment held in
 * memory, compiled with the server's own engine, followed through the definitions stream.
 * An evaluation is a map lookup, `toEvalContext`, the engine and `resolution`: the very code
 * behind `/v1/evaluate` and OFREP, imported from src/evaluation/, so every answer equals the
 * server's for the same flag, state and context.
 *
 * While flagsvc cannot be reached it answers from the last state it had, and says so with
 * PROVIDER_STALE once the outage is longer than `staleAfterMs`; PROVIDER_READY again once the
 * stream has caught up. A refused key (401, 403) is fatal.
 */
import {
  ErrorCode,
  GeneralError,
  InvalidContextError,
  OpenFeatureEventEmitter,
  OpenFeatureError,
  ProviderEvents,
  ProviderNotReadyError,
  type EvaluationContext,
  type JsonValue,
  type Logger,
  type ResolutionDetails,
} from "@openfeature/server-sdk";
import { DISABLED_STATE, evaluate } from "../../../src/evaluation/engine";
import { evaluableAsIs, isIdentified, isResolutionError, resolutionDetails, toEvalContext, type ResolutionError } from "../../../src/evaluation/openfeature";
import type { EvalContext, EvaluationResult } from "../../../src/evaluation/types";
import { Definitions, parseDefinitions, parsePatch } from "./definitions";
import { DefinitionsStream, unref } from "./stream";

export type { EvaluationResult };

export interface FlagsvcProviderOptions {
  /** Where flagsvc answers, e.g. `https://flags.internal:8443`. */
  baseUrl: string;
  /** A server-side API key of scope test, mgmt or full: its project and environment are the flags served. Never in a browser. */
  apiKey: string;
  /** The fetch to use (default: the global one), e.g. one that trusts a private CA. */
  fetch?: typeof fetch;
  /** How long the stream may be down before PROVIDER_STALE is emitted (default 5000 ms). */
  staleAfterMs?: number;
  /** Reconnection: exponential backoff with full jitter between `initialDelayMs` (default: the server's `retry:`, else 1000) and `maxDelayMs` (default 30000). */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /** A connection silent this long (the server pings every 15 s) is dead and replaced (default 45000 ms). */
  heartbeatTimeoutMs?: number;
  /** `initialize()` rejects when no definitions arrived within this time (default 10000 ms); the provider keeps trying and emits PROVIDER_READY once they do. */
  initTimeoutMs?: number;
  /** Where the provider says what happens in the background (default: warnings and errors on the console). */
  logger?: Logger;
}

const DEFAULTS = {
  staleAfterMs: 5_000,
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  heartbeatTimeoutMs: 45_000,
  initTimeoutMs: 10_000,
};

const consoleLogger: Logger = {
  error: (...args) => console.error(...args),
  warn: (...args) => console.warn(...args),
  info: () => {},
  debug: () => {},
};

/** How long a resumed stream may stay quiet before it counts as having missed nothing. */
const RESUME_SETTLE_MS = 250;

type ValueType = "boolean" | "string" | "number" | "object";

export class FlagsvcProvider {
  readonly runsOn = "server" as const;
  readonly metadata = { name: "flagsvc" } as const;
  readonly events = new OpenFeatureEventEmitter();

  private readonly definitions = new Definitions();
  private readonly options: Required<Omit<FlagsvcProviderOptions, "reconnect">> & { initialDelayMs: number; maxDelayMs: number; initialDelayChosen: boolean };
  private stream: DefinitionsStream | undefined;
  private initializing: Promise<void> | undefined;
  private settleInit: ((error?: Error) => void) | undefined;
  /** initialize() rejected (no definitions in time): PROVIDER_READY is due once they arrive. */
  private initFailed = false;
  /** Since when the stream has been down (Date.now()), or undefined while it is up. */
  private downSince: number | undefined;
  private staleTimer: ReturnType<typeof setTimeout> | undefined;
  private staleSent = false;
  /** After a reconnection, until the catch-up comes (or is known to be nothing). */
  private settleTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  private lastError: Error | undefined;
  /** `evaluatedAt` of the last millisecond seen, formatted once (as the server does). */
  private stampMs = Number.NaN;
  private stampText = "";

  constructor(options: FlagsvcProviderOptions) {
    if (typeof options?.baseUrl !== "string" || options.baseUrl === "") throw new TypeError("FlagsvcProvider: baseUrl is required");
    if (typeof options.apiKey !== "string" || options.apiKey === "") throw new TypeError("FlagsvcProvider: apiKey is required");
    const fetchFn = options.fetch ?? globalThis.fetch;
    if (typeof fetchFn !== "function") throw new TypeError("FlagsvcProvider: no fetch: pass options.fetch (Node 20+ and Bun have one)");
    this.options = {
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      apiKey: options.apiKey,
      fetch: fetchFn,
      staleAfterMs: positive(options.staleAfterMs, DEFAULTS.staleAfterMs, "staleAfterMs"),
      heartbeatTimeoutMs: positive(options.heartbeatTimeoutMs, DEFAULTS.heartbeatTimeoutMs, "heartbeatTimeoutMs"),
      initTimeoutMs: positive(options.initTimeoutMs, DEFAULTS.initTimeoutMs, "initTimeoutMs"),
      initialDelayMs: positive(options.reconnect?.initialDelayMs, DEFAULTS.initialDelayMs, "reconnect.initialDelayMs"),
      initialDelayChosen: options.reconnect?.initialDelayMs !== undefined,
      maxDelayMs: positive(options.reconnect?.maxDelayMs, DEFAULTS.maxDelayMs, "reconnect.maxDelayMs"),
      logger: options.logger ?? consoleLogger,
    };
  }

  /** The version (change-log position) of the definitions held; undefined before the first load. */
  get version(): number | undefined {
    return this.definitions.version;
  }

  /** The slug of the environment the key serves; undefined before the first load. */
  get environment(): string | undefined {
    return this.definitions.environment;
  }

  /** The slug of the key's project; undefined before the first load. */
  get project(): string | undefined {
    return this.definitions.project;
  }

  /**
   * Connects and resolves once the definitions are loaded. Rejects with a ProviderFatalError
   * when the key is refused (401, 403), and with a GeneralError when nothing arrived within
   * `initTimeoutMs` (the provider keeps trying, and emits PROVIDER_READY when it loads).
   */
  initialize(): Promise<void> {
    if (this.initializing) return this.initializing;
    if (this.closed) return Promise.reject(new GeneralError("FlagsvcProvider: closed"));
    this.initializing = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.initFailed = true;
        settle(new GeneralError(`flagsvc: no definitions within ${this.options.initTimeoutMs} ms${this.lastError ? ` (${this.lastError.message})` : ""}; still trying`));
      }, this.options.initTimeoutMs);
      const settle = (error?: Error) => {
        clearTimeout(timer);
        this.settleInit = undefined;
        if (error) reject(error);
        else resolve();
      };
      this.settleInit = settle;
    });
    const { options } = this;
    this.stream = new DefinitionsStream(
      {
        url: `${options.baseUrl}/v1/definitions/stream`,
        apiKey: options.apiKey,
        fetch: options.fetch,
        initialDelayMs: options.initialDelayMs,
        initialDelayChosen: options.initialDelayChosen,
        maxDelayMs: options.maxDelayMs,
        heartbeatTimeoutMs: options.heartbeatTimeoutMs,
        logger: options.logger,
      },
      {
        onOpen: () => this.onOpen(),
        onEvent: (event) => this.onEvent(event.event, event.data),
        onDisconnect: (error) => this.onDisconnect(error),
        onFatal: (error) => this.onFatal(error),
      },
    );
    this.stream.start();
    return this.initializing;
  }

  /** Ends the stream and every timer. */
  async onClose(): Promise<void> {
    this.closed = true;
    this.clearStale();
    this.settleInit?.(new GeneralError("FlagsvcProvider: closed before the definitions loaded"));
    await this.stream?.close();
  }

  // ---- evaluation ----------------------------------------------------------------------------

  /** Synchronous: the SDK awaits whatever a provider returns, and a direct caller gets the details at once. */
  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean, context?: EvaluationContext, logger?: Logger): ResolutionDetails<boolean>;
  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean, context?: EvaluationContext, logger?: Logger): Promise<ResolutionDetails<boolean>>;
  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean, context?: EvaluationContext): ResolutionDetails<boolean> | Promise<ResolutionDetails<boolean>> {
    return this.resolve(flagKey, defaultValue, context, "boolean");
  }

  resolveStringEvaluation(flagKey: string, defaultValue: string, context?: EvaluationContext, logger?: Logger): ResolutionDetails<string>;
  resolveStringEvaluation(flagKey: string, defaultValue: string, context?: EvaluationContext, logger?: Logger): Promise<ResolutionDetails<string>>;
  resolveStringEvaluation(flagKey: string, defaultValue: string, context?: EvaluationContext): ResolutionDetails<string> | Promise<ResolutionDetails<string>> {
    return this.resolve(flagKey, defaultValue, context, "string");
  }

  /** flagsvc serves booleans and variant keys: a number is always a TYPE_MISMATCH (or FLAG_NOT_FOUND). */
  resolveNumberEvaluation(flagKey: string, defaultValue: number, context?: EvaluationContext, logger?: Logger): ResolutionDetails<number>;
  resolveNumberEvaluation(flagKey: string, defaultValue: number, context?: EvaluationContext, logger?: Logger): Promise<ResolutionDetails<number>>;
  resolveNumberEvaluation(flagKey: string, defaultValue: number, context?: EvaluationContext): ResolutionDetails<number> | Promise<ResolutionDetails<number>> {
    return this.resolve(flagKey, defaultValue, context, "number");
  }

  /** flagsvc serves booleans and variant keys: an object is always a TYPE_MISMATCH (or FLAG_NOT_FOUND). */
  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T, context?: EvaluationContext, logger?: Logger): ResolutionDetails<T>;
  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T, context?: EvaluationContext, logger?: Logger): Promise<ResolutionDetails<T>>;
  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T, context?: EvaluationContext): ResolutionDetails<T> | Promise<ResolutionDetails<T>> {
    return this.resolve(flagKey, defaultValue, context, "object");
  }

  /**
   * flagsvc's own answer, as `/v1/evaluate` gives it (flagKey, enabled, variant, reason, ruleId,
   * evaluatedAt). `context` is OpenFeature's (targetingKey) or ours (userId). Throws
   * ProviderNotReadyError before the first load, InvalidContextError for a context attribute
   * that no condition can read (an object, a nested array).
   */
  evaluate(flagKey: string, context?: EvaluationContext): EvaluationResult {
    if (!this.definitions.loaded) throw new ProviderNotReadyError("flagsvc: the definitions have not loaded yet");
    const entry = this.definitions.flags.get(flagKey);
    if (context === undefined || evaluableAsIs(context)) {
      const ctx = context ?? EMPTY;
      return evaluate(entry?.flag, flagKey, entry?.state ?? DISABLED_STATE, ctx, this.stamp(), undefined, targetingKeyOf(ctx), this.definitions.flags);
    }
    const ctx = toEvalContext(context);
    if (isResolutionError(ctx)) throw new InvalidContextError(ctx.errorDetails);
    return evaluate(entry?.flag, flagKey, entry?.state ?? DISABLED_STATE, ctx, this.stamp(), undefined, undefined, this.definitions.flags);
  }

  private resolve<T>(flagKey: string, defaultValue: T, context: EvaluationContext | undefined, type: ValueType): ResolutionDetails<T> {
    const definitions = this.definitions;
    const entry = definitions.flags.get(flagKey);
    if (entry === undefined) {
      return definitions.loaded
        ? failure(defaultValue, ErrorCode.FLAG_NOT_FOUND, `Flag '${flagKey}' was not found`)
        : failure(defaultValue, ErrorCode.PROVIDER_NOT_READY, "flagsvc: the definitions have not loaded yet");
    }
    if (entry.type !== type) return failure(defaultValue, ErrorCode.TYPE_MISMATCH, `Flag '${flagKey}' is a ${entry.type} flag, read as ${type}`);
    // evaluatedAt is not part of OpenFeature's answer: no clock on this path.
    let result: EvaluationResult;
    let identified: boolean;
    if (context === undefined || evaluableAsIs(context)) {
      // The context as it is, its targeting key handed over as the user: no copy.
      const userId = context === undefined ? undefined : targetingKeyOf(context);
      result = evaluate(entry.flag, flagKey, entry.state, context ?? EMPTY, "", undefined, userId, definitions.flags);
      identified = userId !== undefined || (context !== undefined && isIdentified(context));
    } else {
      const ctx = toEvalContext(context);
      if (isResolutionError(ctx)) return resolutionFailure(defaultValue, ctx);
      result = evaluate(entry.flag, flagKey, entry.state, ctx, "", undefined, undefined, definitions.flags);
      identified = isIdentified(ctx);
    }
    const details = resolutionDetails(result, entry.flag, identified, definitions.environment, defaultValue);
    return isResolutionError(details) ? resolutionFailure(defaultValue, details) : details;
  }

  private stamp(): string {
    const now = Date.now();
    if (now !== this.stampMs) {
      this.stampMs = now;
      this.stampText = new Date(now).toISOString();
    }
    return this.stampText;
  }

  // ---- the stream ----------------------------------------------------------------------------

  private onEvent(type: string | undefined, data: string): void {
    const { definitions } = this;
    let changed: string[];
    if (type === "put") {
      const payload = parseDefinitions(data);
      if (typeof payload === "string") throw new Error(payload);
      changed = definitions.put(payload);
    } else if (type === "patch") {
      if (!definitions.loaded) throw new Error("a patch before any put");
      const payload = parsePatch(data);
      if (typeof payload === "string") throw new Error(payload);
      changed = definitions.patch(payload);
    } else {
      this.options.logger.debug(`flagsvc: definitions stream: ignoring an event of type ${type ?? "message"}`);
      return;
    }
    this.synced();
    if (changed.length > 0) {
      this.events.emit(ProviderEvents.ConfigurationChanged, { flagsChanged: changed, metadata: { version: definitions.version! } });
    }
  }

  /**
   * A connection is up. A resume is sent what it missed first, or nothing at all when it missed
   * nothing: in sync at its first event, or once a short wait brought none.
   */
  private onOpen(): void {
    if (!this.definitions.loaded || this.downSince === undefined) return;
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => this.synced(), RESUME_SETTLE_MS);
    unref(this.settleTimer);
  }

  /** The stream delivered: the provider is current again. */
  private synced(): void {
    this.lastError = undefined;
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    if (this.settleInit) {
      this.settleInit();
      return;
    }
    const recovering = this.staleSent || this.initFailed;
    if (this.downSince !== undefined) {
      this.options.logger.info(`flagsvc: definitions stream back after ${Date.now() - this.downSince} ms`);
    }
    this.clearStale();
    this.initFailed = false;
    if (recovering) this.events.emit(ProviderEvents.Ready, { message: "flagsvc: definitions in sync again", metadata: { version: this.definitions.version! } });
  }

  private onDisconnect(error: Error): void {
    this.lastError = error;
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    if (this.closed || !this.definitions.loaded || this.downSince !== undefined) return;
    this.downSince = Date.now();
    this.options.logger.warn(`flagsvc: definitions stream lost (${error.message}); answering from version ${this.definitions.version} until it is back`);
    this.staleTimer = setTimeout(() => {
      this.staleTimer = undefined;
      if (this.closed || this.downSince === undefined) return;
      this.staleSent = true;
      const message = `flagsvc: no definitions stream for ${Date.now() - this.downSince} ms (${this.lastError?.message ?? error.message}); answering from version ${this.definitions.version}`;
      this.events.emit(ProviderEvents.Stale, { message, metadata: { version: this.definitions.version! } });
    }, this.options.staleAfterMs);
    unref(this.staleTimer);
  }

  private onFatal(error: Error): void {
    this.clearStale();
    this.options.logger.error(`flagsvc: ${error.message}; the provider stops following changes`);
    if (this.settleInit) {
      this.settleInit(new KeyRefused(error.message));
      return;
    }
    this.events.emit(ProviderEvents.Error, { message: error.message, errorCode: PROVIDER_FATAL });
  }

  private clearStale(): void {
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    if (this.staleTimer !== undefined) clearTimeout(this.staleTimer);
    this.staleTimer = undefined;
    this.downSince = undefined;
    this.staleSent = false;
  }
}

/**
 * PROVIDER_FATAL: the SDK then stops asking this provider and answers defaults. By its code
 * rather than the SDK's ProviderFatalError class, which older 1.x versions do not export.
 */
const PROVIDER_FATAL = "PROVIDER_FATAL" as ErrorCode;

class KeyRefused extends OpenFeatureError {
  readonly code = PROVIDER_FATAL;
  constructor(message: string) {
    super(message);
    Object.setPrototypeOf(this, KeyRefused.prototype);
    this.name = "ProviderFatalError";
  }
}

const EMPTY: EvalContext = Object.freeze({});

/** The targeting key as the engine's user (`evaluableAsIs` vouched for its type), or none. */
const targetingKeyOf = (context: EvaluationContext | EvalContext): string | undefined => (typeof context.targetingKey === "string" ? context.targetingKey : undefined);

function failure<T>(value: T, errorCode: ErrorCode, errorMessage: string): ResolutionDetails<T> {
  return { value, reason: "ERROR", errorCode, errorMessage };
}

/** Our error codes are OpenFeature's, by name. */
function resolutionFailure<T>(value: T, error: ResolutionError): ResolutionDetails<T> {
  return failure(value, error.errorCode as ErrorCode, error.errorDetails);
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new TypeError(`FlagsvcProvider: ${name} must be a positive number of milliseconds`);
  return value;
}
