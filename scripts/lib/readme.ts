/**
 * What scripts/readme-check needs from the README, with no I/O: its fenced blocks, the steps of
 * a runnable block (commands, then the output shown under them), and the comparison of an
 * output with what a run printed. The conventions are written down in README.md, "Testing".
 *
 * - A fence whose info string is `sh` (or `bash`, `shell`) runs in the check's bash session;
 *   `sh server` (re)starts the server; `sh unchecked` and any other fence (`text`, `json`, ...) is
 *   not run. So a shell example is run unless it says it is not.
 * - In a runnable block, lines starting with `#>` show what the commands above them print.
 *   Shown output is compared by shape: JSON by keys and value types, every value exactly except
 *   where `...` stands in (in a string: any characters; as a value, an array element or an
 *   object member: anything, any further elements, any further members). Text lines compare
 *   exactly except for `...`. Response headers (curl `-D`) not shown are ignored.
 */

export interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  /** The first word of the info string (`sh`), and the words after it (`server`, `unchecked`). */
  lang: string;
  attrs: string[];
  /** The nearest heading above the block. */
  heading: string;
  lines: string[];
}

/** Every fenced code block of a Markdown text, in order (fences may be indented, e.g. in lists). */
export function extractBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split("\n");
  let heading = "";
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(.*)$/.exec(lines[i]!);
    if (!open) {
      const h = /^#{1,6}\s+(.*?)\s*$/.exec(lines[i]!);
      if (h) heading = h[1]!;
      continue;
    }
    const [, indent, fence, info] = open;
    const words = info!.trim().split(/\s+/).filter(Boolean);
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[j]!);
      if (close && close[1]![0] === fence![0] && close[1]!.length >= fence!.length) break;
      body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!.trimStart());
    }
    blocks.push({ line: i + 1, lang: words[0] ?? "", attrs: words.slice(1), heading, lines: body });
    i = j;
  }
  return blocks;
}

export type BlockKind = "run" | "server" | "skip";

/** The fences of shell examples: each runs unless marked `unchecked`. */
export const SHELL_LANGS = ["sh", "bash", "shell"];

export function blockKind(block: Block): BlockKind {
  if (!SHELL_LANGS.includes(block.lang)) return "skip";
  if (block.attrs.length === 0) return "run";
  if (block.attrs.length === 1 && block.attrs[0] === "server") return "server";
  return "skip";
}

/** Commands and the output shown right under them (without the `#>`). */
export interface Step {
  /** 1-based line in the block of the step's first line. */
  line: number;
  code: string[];
  shown: string[];
}

/** A runnable block as steps: each step's code runs, then what it printed is compared with `shown`. */
export function splitSteps(block: Block): Step[] {
  const steps: Step[] = [];
  let current: Step = { line: 1, code: [], shown: [] };
  block.lines.forEach((text, i) => {
    const shown = /^#>(?: (.*))?$/.exec(text);
    if (shown) {
      current.shown.push(shown[1] ?? "");
      return;
    }
    if (current.shown.length > 0) {
      steps.push(current);
      current = { line: i + 1, code: [], shown: [] };
    }
    if (current.code.length === 0 && text.trim() === "") current.line = i + 2;
    else current.code.push(text);
  });
  if (current.code.length > 0 || current.shown.length > 0) steps.push(current);
  return steps.filter((s) => s.code.some((l) => l.trim() !== "" && !l.trimStart().startsWith("#")) || s.shown.length > 0);
}

// ---- patterns: JSON with `...` -------------------------------------------------------------

export type Pattern =
  | { kind: "any" }
  | { kind: "string"; parts: string[] }
  | { kind: "literal"; value: number | boolean | null }
  | { kind: "array"; items: (Pattern | { kind: "rest" })[] }
  | { kind: "object"; members: Map<string, Pattern>; open: boolean };

class PatternSyntaxError extends Error {}

/** Parses JSON in which `...` may stand for a value, for further array elements or for further members. */
export function parsePattern(text: string): Pattern {
  let pos = 0;
  const fail = (what: string): never => {
    throw new PatternSyntaxError(`${what} at ${pos} in ${text}`);
  };
  const space = () => {
    while (pos < text.length && /\s/.test(text[pos]!)) pos++;
  };
  const ellipsis = () => {
    space();
    if (text.startsWith("...", pos)) {
      pos += 3;
      return true;
    }
    return false;
  };
  const string = (): string => {
    space();
    if (text[pos] !== '"') fail("expected a string");
    const start = pos++;
    while (pos < text.length && text[pos] !== '"') pos += text[pos] === "\\" ? 2 : 1;
    if (pos >= text.length) fail("unterminated string");
    pos++;
    return JSON.parse(text.slice(start, pos)) as string;
  };
  const value = (): Pattern => {
    if (ellipsis()) return { kind: "any" };
    space();
    const c = text[pos];
    if (c === "{") {
      pos++;
      const members = new Map<string, Pattern>();
      let open = false;
      space();
      if (text[pos] === "}") return pos++, { kind: "object", members, open };
      for (;;) {
        if (ellipsis()) open = true;
        else {
          const key = string();
          space();
          if (text[pos++] !== ":") fail("expected :");
          members.set(key, value());
        }
        space();
        const next = text[pos++];
        if (next === "}") return { kind: "object", members, open };
        if (next !== ",") fail("expected , or }");
      }
    }
    if (c === "[") {
      pos++;
      const items: (Pattern | { kind: "rest" })[] = [];
      space();
      if (text[pos] === "]") return pos++, { kind: "array", items };
      for (;;) {
        items.push(ellipsis() ? { kind: "rest" } : value());
        space();
        const next = text[pos++];
        if (next === "]") return { kind: "array", items };
        if (next !== ",") fail("expected , or ]");
      }
    }
    if (c === '"') return { kind: "string", parts: string().split("...") };
    const literal = /^(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(pos));
    if (!literal) return fail("expected a value");
    pos += literal[0].length;
    return { kind: "literal", value: JSON.parse(literal[0]) as number | boolean | null };
  };
  const result = value();
  space();
  if (pos !== text.length) fail("unexpected text after the value");
  return result;
}

/** Whether `text` matches `pattern`, where each `...` of the pattern stands for any characters. */
export function textMatches(pattern: string, text: string): boolean {
  return globMatches(pattern.split("..."), text);
}

function globMatches(parts: string[], text: string): boolean {
  if (parts.length === 1) return parts[0] === text;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!text.startsWith(first) || !text.endsWith(last) || text.length < first.length + last.length) return false;
  let at = first.length;
  const end = text.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const found = text.indexOf(middle, at);
    if (found < 0 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** Where `value` departs from `pattern` ("$.rules[0].variant: ..."), or null when it matches. */
export function shapeMismatch(pattern: Pattern, value: unknown, path = "$"): string | null {
  switch (pattern.kind) {
    case "any":
      return null;
    case "literal":
      return Object.is(pattern.value, value) ? null : `${path}: expected ${JSON.stringify(pattern.value)}, got ${describe(value)}`;
    case "string":
      if (typeof value !== "string") return `${path}: expected a string, got ${describe(value)}`;
      return globMatches(pattern.parts, value) ? null : `${path}: expected ${JSON.stringify(pattern.parts.join("..."))}, got ${JSON.stringify(value)}`;
    case "array":
      if (!Array.isArray(value)) return `${path}: expected an array, got ${describe(value)}`;
      return arrayMismatch(pattern.items, value, 0, 0, path);
    case "object": {
      if (value === null || typeof value !== "object" || Array.isArray(value)) return `${path}: expected an object, got ${describe(value)}`;
      const record = value as Record<string, unknown>;
      for (const [key, member] of pattern.members) {
        if (!(key in record)) return `${path}.${key}: missing`;
        const inner = shapeMismatch(member, record[key], `${path}.${key}`);
        if (inner) return inner;
      }
      if (!pattern.open) {
        const extra = Object.keys(record).filter((k) => !pattern.members.has(k));
        if (extra.length > 0) return `${path}: unexpected ${extra.map((k) => `.${k}`).join(", ")} (not shown in the README)`;
      }
      return null;
    }
  }
}

function arrayMismatch(items: (Pattern | { kind: "rest" })[], value: unknown[], i: number, v: number, path: string): string | null {
  if (i === items.length) return v === value.length ? null : `${path}: ${value.length - v} more element(s) than shown`;
  const item = items[i]!;
  if (item.kind === "rest") {
    let first: string | null = null;
    for (let k = v; k <= value.length; k++) {
      const rest = arrayMismatch(items, value, i + 1, k, path);
      if (rest === null) return null;
      first ??= rest;
    }
    return first;
  }
  if (v >= value.length) return `${path}: has ${value.length} element(s), more are shown`;
  return shapeMismatch(item, value[v], `${path}[${v}]`) ?? arrayMismatch(items, value, i + 1, v + 1, path);
}

// ---- shown output against printed output --------------------------------------------------

/** The index where a JSON value starts in a line (its first `{` or `[`), or -1. */
function jsonStart(line: string): number {
  return line.search(/[{[]/);
}

/** Bracket depth at the end of `text`, outside strings (for joining a JSON value shown over several lines). */
function depth(text: string): number {
  let d = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") d++;
    else if (c === "}" || c === "]") d--;
  }
  return d;
}

/** Shown lines as items: a JSON value shown over several lines becomes one item. */
export function joinShown(shown: string[]): string[] {
  const items: string[] = [];
  for (let i = 0; i < shown.length; i++) {
    let item = shown[i]!.trimEnd();
    if (item.trim() === "") continue;
    const start = jsonStart(item);
    if (start >= 0) {
      while (depth(item.slice(start)) > 0 && i + 1 < shown.length) item += ` ${shown[++i]!.trim()}`;
    }
    items.push(item);
  }
  return items;
}

/** Why one printed line does not match one shown item, or null when it does. */
export function lineMismatch(shown: string, printed: string): string | null {
  const start = jsonStart(shown);
  if (start >= 0) {
    let pattern: Pattern | undefined;
    try {
      pattern = parsePattern(shown.slice(start));
    } catch (e) {
      if (!(e instanceof PatternSyntaxError)) throw e;
    }
    if (pattern) {
      const at = jsonStart(printed);
      if (at < 0) return `expected JSON, got ${JSON.stringify(printed)}`;
      if (!textMatches(shown.slice(0, start).trimEnd(), printed.slice(0, at).trimEnd())) {
        return `expected ${JSON.stringify(shown.slice(0, start).trimEnd())} before the JSON, got ${JSON.stringify(printed.slice(0, at).trimEnd())}`;
      }
      let value: unknown;
      try {
        value = JSON.parse(printed.slice(at));
      } catch {
        return `not JSON: ${printed.slice(at)}`;
      }
      return shapeMismatch(pattern, value);
    }
  }
  return textMatches(shown, printed) ? null : `expected ${JSON.stringify(shown)}, got ${JSON.stringify(printed)}`;
}

interface PrintedLine {
  text: string;
  /** A response header line (after an `HTTP/x NNN` line, before the blank line): may be left unshown. */
  header: boolean;
}

function printedLines(output: string): PrintedLine[] {
  const lines: PrintedLine[] = [];
  let inHeaders = false;
  for (const raw of output.split("\n")) {
    const text = raw.replace(/\r$/, "").trimEnd();
    if (text === "") {
      inHeaders = false;
      continue;
    }
    if (/^HTTP\/[\d.]+ \d{3}\b/.test(text)) {
      lines.push({ text, header: false });
      inHeaders = true;
      continue;
    }
    lines.push({ text, header: inHeaders });
  }
  return lines;
}

/**
 * Why a step's printed output does not match what the README shows, or null when it does. Every
 * printed line must be matched in order, except unshown response headers; a shown line `...`
 * stands for any number of lines.
 */
export function outputMismatch(shown: string[], output: string): string | null {
  const items = joinShown(shown);
  const lines = printedLines(output);
  let best = { item: -1, why: "" };
  const note = (i: number, why: string) => {
    if (i > best.item) best = { item: i, why };
  };
  /** `skipped`: unshown header lines were passed over looking for item i. */
  const match = (p: number, i: number, skipped = false): boolean => {
    if (i === items.length) {
      const left = lines.slice(p).find((l) => !l.header);
      if (left) note(i, `printed more than shown: ${JSON.stringify(left.text)}`);
      return left === undefined;
    }
    if (items[i] === "...") {
      for (let k = p; k <= lines.length; k++) if (match(k, i + 1)) return true;
      return false;
    }
    if (p === lines.length) {
      note(i, `shown but not printed: ${JSON.stringify(items[i])}`);
      return false;
    }
    const why = lineMismatch(items[i]!, lines[p]!.text);
    if (why === null && match(p + 1, i + 1)) return true;
    if (lines[p]!.header) return match(p + 1, i, true);
    if (why !== null) note(i, skipped ? `no response header matched ${JSON.stringify(items[i])}, nor the line after them: ${why}` : why);
    return false;
  };
  return match(0, 0) ? null : best.why;
}
