/**
 * The README check's reading of the README (scripts/lib/readme.ts): which blocks run, how a
 * block splits into commands and shown output, and the shape comparison that decides whether a
 * command still prints what the README shows. The check itself (scripts/readme-check, in CI) is
 * the end-to-end test of the README.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { blockKind, extractBlocks, outputMismatch, parsePattern, SHELL_LANGS, shapeMismatch, splitSteps, textMatches } from "../../scripts/lib/readme";

const fence = "```";

describe("extractBlocks and blockKind", () => {
  const markdown = [
    "# Title",
    `${fence}sh`,
    "npm install && npm start",
    fence,
    "## Flags",
    `${fence}sh`,
    "api $B/v1/health",
    fence,
    `${fence}sh server`,
    "SVC_OUTBOUND_ALLOWED_HOSTS=loopback npm start",
    fence,
    `${fence}sh unchecked`,
    "docker build -t flagsvc .",
    fence,
    "- a list item:",
    "",
    `  ${fence}text`,
    "    indented banner",
    `  ${fence}`,
    `${fence}json`,
    "{}",
    fence,
  ].join("\n");
  const blocks = extractBlocks(markdown);

  test("every fenced block, with its line, info string, heading and text (a list's indentation removed)", () => {
    expect(blocks.map((b) => [b.line, b.lang, b.attrs, b.heading, b.lines])).toEqual([
      [2, "sh", [], "Title", ["npm install && npm start"]],
      [6, "sh", [], "Flags", ["api $B/v1/health"]],
      [9, "sh", ["server"], "Flags", ["SVC_OUTBOUND_ALLOWED_HOSTS=loopback npm start"]],
      [12, "sh", ["unchecked"], "Flags", ["docker build -t flagsvc ."]],
      [17, "text", [], "Flags", ["  indented banner"]],
      [20, "json", [], "Flags", ["{}"]],
    ]);
  });

  test("`sh` runs, `sh server` restarts the server, everything else is skipped", () => {
    expect(blocks.map(blockKind)).toEqual(["run", "run", "server", "skip", "skip", "skip"]);
  });

  test("`bash` and `shell` fences are shell examples too: they run unless marked unchecked", () => {
    const shells = extractBlocks([`${fence}bash`, "api $B/v1/health", fence, `${fence}shell`, "ls", fence, `${fence}bash unchecked`, "sudo make install", fence].join("\n"));
    expect(shells.map(blockKind)).toEqual(["run", "run", "skip"]);
  });
});

describe("splitSteps", () => {
  test("commands, then the #> lines under them; explanation comments and blank lines stay code", () => {
    const [block] = extractBlocks(
      [
        `${fence}sh`,
        "# create it",
        "api -X POST $B/v1/x \\",
        "  -d '{}'",
        "#> 201 {",
        '#>  "id":"x_..."}',
        "ID=$(json id)",
        "",
        "api $B/v1/x/$ID   # read it back",
        "#> 200 {...}",
        "kill $RECEIVER",
        fence,
      ].join("\n"),
    );
    expect(splitSteps(block!)).toEqual([
      { line: 1, code: ["# create it", "api -X POST $B/v1/x \\", "  -d '{}'"], shown: ["201 {", ' "id":"x_..."}'] },
      { line: 6, code: ["ID=$(json id)", "", "api $B/v1/x/$ID   # read it back"], shown: ["200 {...}"] },
      { line: 10, code: ["kill $RECEIVER"], shown: [] },
    ]);
  });
});

describe("shape comparison", () => {
  const shown = '200 {"id":"flag_...","key":"new-checkout","enabled":true,"rolloutPercentage":25,"rules":[{"id":"rule_...","variant":null}],"updatedAt":"..."}';
  const printed = {
    id: "flag_ZAjpV7uaG2z99Wlc4KOGdb",
    key: "new-checkout",
    enabled: true,
    rolloutPercentage: 25,
    rules: [{ id: "rule_CHWomyersCxYxGnoa3Gcca", variant: null }],
    updatedAt: "2026-11-26T04:12:46.180Z",
  };
  const line = (status: number, body: unknown) => `${status} ${JSON.stringify(body)}`;

  test("accepts the same shape: placeholders for ids, times and secrets, keys in any order", () => {
    expect(outputMismatch([shown], line(200, printed))).toBeNull();
    const { updatedAt, ...rest } = printed;
    expect(outputMismatch([shown], line(200, { updatedAt, ...rest }))).toBeNull();
  });

  test("catches a changed key: one renamed, one missing, one added", () => {
    const { rolloutPercentage, ...rest } = printed;
    expect(outputMismatch([shown], line(200, { ...rest, rollout: rolloutPercentage }))).toBe("$.rolloutPercentage: missing");
    expect(outputMismatch([shown], line(200, { ...printed, description: null }))).toBe("$: unexpected .description (not shown in the README)");
  });

  test("catches a changed type, also where a placeholder stands in for the value", () => {
    expect(outputMismatch([shown], line(200, { ...printed, rolloutPercentage: "25" }))).toBe('$.rolloutPercentage: expected 25, got string "25"');
    expect(outputMismatch([shown], line(200, { ...printed, updatedAt: 1795666373 }))).toBe("$.updatedAt: expected a string, got number 1795666373");
    expect(outputMismatch([shown], line(200, { ...printed, rules: [{ id: "rule_x", variant: "green" }] }))).toBe('$.rules[0].variant: expected null, got string "green"');
    expect(outputMismatch([shown], line(200, { ...printed, rules: {} }))).toBe("$.rules: expected an array, got an object");
  });

  test("catches a changed value where no placeholder stands in, and a placeholder's fixed part", () => {
    expect(outputMismatch([shown], line(200, { ...printed, enabled: false }))).toBe("$.enabled: expected true, got boolean false");
    expect(outputMismatch([shown], line(200, { ...printed, id: "key_1" }))).toBe('$.id: expected "flag_...", got "key_1"');
  });

  test("catches a changed status and a changed error message exactly", () => {
    const error = { error: "FORBIDDEN", message: "This key scope does not have access to this endpoint" };
    const shownError = `403 ${JSON.stringify(error)}`;
    expect(outputMismatch([shownError], line(403, error))).toBeNull();
    expect(outputMismatch([shownError], line(401, error))).toBe('expected "403" before the JSON, got "401"');
    expect(outputMismatch([shownError], line(403, { ...error, message: "Forbidden" }))).toBe(
      '$.message: expected "This key scope does not have access to this endpoint", got "Forbidden"',
    );
    expect(outputMismatch(["204"], "204")).toBeNull();
    expect(outputMismatch(["204"], "404 {}")).toBe('expected "204", got "404 {}"');
  });

  test("`...` as a value, an array's further elements and an object's further members", () => {
    const pattern = parsePattern('{"users":[{"email":"admin@localhost",...},...],"total":...}');
    expect(shapeMismatch(pattern, { users: [{ email: "admin@localhost", id: "usr_1" }], total: 1 })).toBeNull();
    expect(shapeMismatch(pattern, { users: [{ email: "admin@localhost" }, { email: "dev@example.com" }], total: "many" })).toBeNull();
    expect(shapeMismatch(pattern, { users: [], total: 1 })).toBe("$.users: has 0 element(s), more are shown");
    expect(shapeMismatch(pattern, { users: [{ email: "dev@example.com" }], total: 1 })).toBe('$.users[0].email: expected "admin@localhost", got "dev@example.com"');
    expect(shapeMismatch(pattern, { users: [{ email: "admin@localhost" }] })).toBe("$.total: missing");
    expect(shapeMismatch(parsePattern('[{"slug":"a"},...,{"slug":"z"}]'), [{ slug: "a" }, { slug: "m" }, { slug: "z" }])).toBeNull();
    expect(shapeMismatch(parsePattern("[1,2]"), [1, 2, 3])).toBe("$: 1 more element(s) than shown");
  });

  test("text lines: exact, with `...` for any characters", () => {
    expect(textMatches("backup written to .../flagsvc-....db (... bytes)", "backup written to /tmp/x/backups/flagsvc-20261126-0417.db (49152 bytes)")).toBe(true);
    expect(textMatches("created user usr_... ops@example.com (viewer)", "created user usr_1 ops@example.com (editor)")).toBe(false);
    expect(textMatches("flagsvc 0.1.0", "flagsvc 0.1.0")).toBe(true);
    expect(textMatches("...abc...abc", "abc")).toBe(false);
  });

  test("a JSON value shown over several #> lines is one value", () => {
    expect(outputMismatch(["201 {", ' "id":"x_...",', ' "list":[1,', " 2]}"], '201 {"id":"x_1","list":[1,2]}')).toBeNull();
  });

  test("every printed line must be shown, in order; `...` alone stands for any lines", () => {
    expect(outputMismatch(["a", "b"], "a\nb\n")).toBeNull();
    expect(outputMismatch(["a"], "a\nb")).toBe('printed more than shown: "b"');
    expect(outputMismatch(["a", "b"], "a")).toBe('shown but not printed: "b"');
    expect(outputMismatch(["b", "a"], "a\nb")).toBe('expected "b", got "a"');
    expect(outputMismatch(["Usage: flagsvc backup FILE", "..."], "Usage: flagsvc backup FILE\n\nWrite a copy\n  --data-dir")).toBeNull();
  });

  test("response headers (curl -D) may be left out; those shown must be printed", () => {
    const response = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nx-request-id: trace-42\r\nDate: x\r\n\r\n404 {\"error\":\"NOT_FOUND\"}";
    expect(outputMismatch(["HTTP/1.1 404 Not Found", "x-request-id: trace-42", '404 {"error":"NOT_FOUND"}'], response)).toBeNull();
    expect(outputMismatch(["HTTP/1.1 404 Not Found", "x-request-id: trace-43", '404 {"error":"NOT_FOUND"}'], response)).toContain(
      'no response header matched "x-request-id: trace-43"',
    );
    expect(outputMismatch(["HTTP/1.1 200 OK", "..."], response)).toBe('expected "HTTP/1.1 200 OK", got "HTTP/1.1 404 Not Found"');
    // Only header lines may be left out: the body may not.
    expect(outputMismatch(["HTTP/1.1 404 Not Found"], response)).toBe('printed more than shown: "404 {\\"error\\":\\"NOT_FOUND\\"}"');
  });

  test("output that should be JSON but is not", () => {
    expect(outputMismatch(['200 {"status":"ok"}'], "200 <html>")).toBe('expected JSON, got "200 <html>"');
    expect(outputMismatch(['200 {"status":"ok"}'], "200 {status}")).toBe("not JSON: {status}");
  });
});

describe("the guides and the package READMEs speak the README's names", () => {
  const root = join(import.meta.dir, "../..");
  const files = [
    ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`),
    ...readdirSync(join(root, "plugins")).filter((f) => existsSync(join(root, "plugins", f, "README.md"))).map((f) => `plugins/${f}/README.md`),
  ];

  test("their shell examples use no other names for the README's variables, its port or its receiver's, and no curl -k", () => {
    // The README's: $B (https://localhost:8443), api, json, $ADMIN, $EVAL, $TEST; a receiver on 127.0.0.1:8444.
    const other = /\$\{?(ADMIN_KEY|EVAL_KEY|TEST_KEY|FLAGSVC)\b|:9000\b|curl -sk\b|curl -sS -k\b|curl -k\b/;
    const found = files.flatMap((file) =>
      extractBlocks(readFileSync(join(root, file), "utf8"))
        .filter((b) => SHELL_LANGS.includes(b.lang))
        .flatMap((b) => b.lines.flatMap((line, i) => (other.test(line) ? [`${file}:${b.line + 1 + i}: ${line.trim()}`] : []))),
    );
    expect(found).toEqual([]);
  });

  test("the guides' shell examples are `sh` fences, as the README's (run, or marked `sh unchecked`, `sh server`)", () => {
    for (const file of files.filter((f) => f.startsWith("docs/"))) {
      for (const block of extractBlocks(readFileSync(join(root, file), "utf8"))) {
        if (!["sh", "bash", "shell", "console", "zsh"].includes(block.lang)) continue;
        expect({ at: `${file}:${block.line}`, lang: block.lang }).toEqual({ at: `${file}:${block.line}`, lang: "sh" });
      }
    }
  });
});
