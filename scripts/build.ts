/**
 * Builds dist/flagsvc: one executable with the runtime, migrations, first-party plugins and
 * UI assets inside. Usage: bun scripts/build.ts [--outfile PATH]
 */
import { mkdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const root = join(import.meta.dir, "..");
const i = process.argv.indexOf("--outfile");
const outfile = resolve(root, i > 0 ? process.argv[i + 1]! : "dist/flagsvc");
mkdirSync(dirname(outfile), { recursive: true });

const started = performance.now();
// The first-party plugins as they are in plugins/ now (a contributor may not have re-run it).
const embed = Bun.spawnSync([process.execPath, "scripts/embed-plugins.ts"], { cwd: root, stdout: "inherit", stderr: "inherit" });
if (embed.exitCode !== 0) process.exit(embed.exitCode ?? 1);
const proc = Bun.spawnSync(
  [
    // Whitespace and syntax only: renamed identifiers break Elysia, which recognises TypeBox's
    // TransformDecodeError by its class name (a query value out of range then passed as a string).
    process.execPath, "build", "--compile", "--minify-whitespace", "--minify-syntax", "--bytecode", "--format=esm",
    // The binary must not pick up .env or bunfig.toml from whatever folder it runs in.
    "--no-compile-autoload-dotenv", "--no-compile-autoload-bunfig",
    // Bun's HTTP parser answers a request line and headers over its limit (16 KiB by default)
    // with a bare 431, before the application can answer in JSON: raised to 64 KiB (as `npm
    // start` does; docs/decisions.md, HTTP).
    "--compile-exec-argv=--max-http-header-size=65536",
    // The background thread's worker, the plugin workers and the integrations thread are entry
    // points of their own (src/background/thread.ts, src/plugins/host.ts, src/modules/integrations/thread.ts).
    "src/main.ts", "src/background/worker.ts", "src/plugins/worker.ts", "src/modules/integrations/worker.ts", "--outfile", outfile,
  ],
  { cwd: root, stdout: "inherit", stderr: "inherit" },
);
if (proc.exitCode !== 0) process.exit(proc.exitCode ?? 1);
const mb = (statSync(outfile).size / 1024 / 1024).toFixed(1);
console.log(`built ${outfile} (${mb} MB) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
