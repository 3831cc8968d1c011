/**
 * No module of src/ imports itself through others, type-only imports included: a cycle hides
 * what a module needs (issue 21), and at run time it can hand a module an import that is not
 * initialised yet. madge walks the imports as TypeScript resolves them.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import madge from "madge";

const ROOT = join(import.meta.dir, "..", "..");

test("src/ has no import cycle", async () => {
  const graph = await madge(join(ROOT, "src"), { fileExtensions: ["ts"], tsConfig: join(ROOT, "tsconfig.json") });
  expect(Object.keys(graph.obj()).length).toBeGreaterThan(50); // it read the tree, not nothing
  expect(graph.circular()).toEqual([]);
}, 30_000);
