/**
 * Structured logger. JSON lines when not on a terminal, a compact human format on one.
 * Lines are buffered and written once per event-loop turn, so a busy server does not pay
 * one write(2) per request. Callers must never pass secrets in fields (keys, passwords,
 * tokens, Authorization headers): the logger does not know what a secret is.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFormat = "pretty" | "json";
export type LogFields = Record<string, string | number | boolean | null | undefined>;

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  enabled(level: LogLevel): boolean;
  /** Write everything buffered now (before exit). */
  flush(): void;
}

export interface LoggerOptions {
  level: LogLevel;
  format: LogFormat;
  /** Where whole chunks of lines go; default standard output. */
  write?: (chunk: string) => void;
  now?: () => number;
}

export function createLogger(opts: LoggerOptions): Logger {
  const min = RANK[opts.level];
  const write = opts.write ?? stdoutWriter();
  const now = opts.now ?? Date.now;
  let buffer = "";
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    if (buffer === "") return;
    const chunk = buffer;
    buffer = "";
    write(chunk);
  };

  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (RANK[level] < min) return;
    buffer += (opts.format === "json" ? jsonLine : prettyLine)(now(), level, msg, fields) + "\n";
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };

  return loggerOf(emit, min, flush);
}

/**
 * Standard output, until it fails: a reader gone (`flagsvc serve | head`) must not stop the
 * server, so a write error (EPIPE, reported as the stream's "error" event) ends the output
 * instead of becoming an uncaught exception.
 */
let stdoutClosed = false;
let stdoutWatched = false;
function stdoutWriter(): (chunk: string) => void {
  if (!stdoutWatched) {
    stdoutWatched = true;
    process.stdout.on("error", () => {
      stdoutClosed = true;
    });
  }
  return (chunk) => {
    if (!stdoutClosed) process.stdout.write(chunk);
  };
}

/** The Logger around one `emit` that already dropped what is below `min`. */
function loggerOf(emit: (level: LogLevel, msg: string, fields?: LogFields) => void, min: number, flush: () => void): Logger {
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    enabled: (level) => RANK[level] >= min,
    flush,
  };
}

/** One log call, as a worker thread hands it to the main thread's logger. */
export interface LogRecord {
  level: LogLevel;
  msg: string;
  fields?: LogFields;
}

/**
 * A logger for a worker thread: calls at or above `level` go to `send` (the main thread
 * writes them with its own logger, so that lines keep one format and one destination).
 */
export function forwardingLogger(level: LogLevel, send: (record: LogRecord) => void): Logger {
  const min = RANK[level];
  const emit = (l: LogLevel, msg: string, fields?: LogFields) => {
    if (RANK[l] >= min) send(fields ? { level: l, msg, fields } : { level: l, msg });
  };
  return loggerOf(emit, min, () => {});
}

function jsonLine(time: number, level: LogLevel, msg: string, fields?: LogFields): string {
  return JSON.stringify({ time: new Date(time).toISOString(), level, msg, ...fields });
}

function prettyLine(time: number, level: LogLevel, msg: string, fields?: LogFields): string {
  let line = `${new Date(time).toISOString().slice(11, 23)} ${level.toUpperCase().padEnd(5)} ${msg}`;
  if (fields) {
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      const s = String(v);
      line += ` ${k}=${/[\s"=]/.test(s) ? JSON.stringify(s) : s}`;
    }
  }
  return line;
}
