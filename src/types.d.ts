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
