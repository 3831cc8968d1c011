/**
 * Builds the package: dist/index.js, one ESM bundle for Node 20+ and Bun (the engine from
 * src/evaluation/ and eventsource-parser inside, @openfeature/* left to the application), and
 * its declarations (tsc, dist/types/, entered through dist/index.d.ts).
 *
 * Usage: bun packages/openfeature-provider/build.ts [--no-types]   (root: npm run build:provider)
 */
import { rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const here = import.meta.dir;
const dist = join(here, "dist");
const started = performance.now();
rmSync(dist, { recursive: true, force: true });

const result = await Bun.build({
  entrypoints: [join(here, "src", "index.ts")],
  outdir: dist,
  naming: "index.js",
  target: "node",
  format: "esm",
  external: ["@openfeature/*"],
  // Readable: a stack trace in a user's application should name our functions.
  minify: { syntax: true, whitespace: false, identifiers: false },
  sourcemap: "linked",
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}

if (!process.argv.includes("--no-types")) {
  const tsc = join(here, "..", "..", "node_modules", ".bin", "tsc");
  const proc = Bun.spawnSync([tsc, "-p", join(here, "tsconfig.json")], { cwd: here, stdout: "inherit", stderr: "inherit" });
  if (proc.exitCode !== 0) process.exit(proc.exitCode ?? 1);
  const entry = relative(dist, join(dist, "types", "packages", "openfeature-provider", "src", "index.js"));
  writeFileSync(join(dist, "index.d.ts"), `export * from "./${entry}";\n`);
}

const size = (await Bun.file(join(dist, "index.js")).arrayBuffer()).byteLength;
console.log(`built ${relative(process.cwd(), join(dist, "index.js"))} (${(size / 1024).toFixed(1)} KiB) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
