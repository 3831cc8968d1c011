/**
 * Where a worker's entry module is. From source: `worker.ts` beside the module that starts it.
 * Compiled: an entry point of its own at the root of the binary's file system, at `entry`
 * (scripts/build.ts lists each one; a worker file that is not listed dies with ModuleNotFound).
 */
export function workerUrl(importer: string, entry: string): string {
  return importer.startsWith("file:///$bunfs/") ? `./${entry}` : new URL("./worker.ts", importer).href;
}
