declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.js.asset" {
  const path: string;
  export default path;
}
declare module "*.ico" {
  const path: string;
  export default path;
}

/** The QuickJS WASM file, imported `with { type: "file" }`: its path (embedded by `bun build --compile`). */
declare module "@jitl/quickjs-wasmfile-release-sync/wasm" {
  const path: string;
  export default path;
}

/**
 * The console's page (console/index.html), imported as Bun's HTML bundle. In the executable its
 * `files` list the page and its chunks (src/modules/console/assets.ts); from the sources, nothing.
 */
declare module "*.html" {
  const bundle: { index?: string; files?: { input: string; path: string; loader: string; isEntry: boolean; headers?: Record<string, string> }[] };
  export default bundle;
}
