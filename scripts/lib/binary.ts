/** The binary a bench measures: the path given, else dist/flagsvc, built first when missing. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "..", "..");

export function benchBinary(given: string | undefined, bench: string): string {
  if (given) {
    const binary = resolve(given);
    if (!existsSync(binary)) {
      console.error(`${bench}: no binary at ${binary}`);
      process.exit(1);
    }
    return binary;
  }
  const binary = join(ROOT, "dist", "flagsvc");
  if (!existsSync(binary)) {
    console.log("dist/flagsvc is missing: building it");
    const build = Bun.spawnSync([process.execPath, join(ROOT, "scripts", "build.ts")], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (build.exitCode !== 0) process.exit(1);
  }
  return binary;
}
