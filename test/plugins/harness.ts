/**
 * Runs a first-party package of plugins/ as the server would: its entry in the real sandbox
 * (src/plugins/sandbox.ts), its `ctx.http` performed with fetch, to 127.0.0.1 only (the tests'
 * receivers stand in for the vendors' APIs).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { loadPlugin, type HttpRequest, type HttpResponse, type LogLevel } from "../../src/plugins/sandbox";
import { startReceiver, type Answer } from "../webhook-receiver";

export const PLUGINS_DIR = join(import.meta.dir, "../../plugins");

export interface Manifest {
  packageName: string;
  name: string;
  description: string;
  category: string;
  version: string;
  author: string;
  entry: string;
  hooks: string[];
  configSchema: { type: string; properties: Record<string, Record<string, unknown>>; required?: string[]; additionalProperties: boolean };
  publishedAt: string;
  homepage?: string;
}

/** The package version folders of plugins/. */
export const packageFolders = (): string[] =>
  readdirSync(PLUGINS_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort();

export const manifest = (folder: string): Manifest => JSON.parse(readFileSync(join(PLUGINS_DIR, folder, "plugin.json"), "utf8"));

/** JSON Schema as the catalog checks it: strict, with the `secret` keyword. */
export const ajv = new Ajv({ strict: true, allErrors: true });
ajv.addKeyword({ keyword: "secret", schemaType: "boolean" });

export function schemaAccepts(folder: string, config: unknown): boolean {
  return ajv.validate(manifest(folder).configSchema, config) as boolean;
}

async function localHttp(request: HttpRequest): Promise<HttpResponse> {
  const url = new URL(request.url);
  if (url.hostname !== "127.0.0.1") throw new Error(`the test host only reaches 127.0.0.1, not ${url.hostname}`);
  const response = await fetch(url, { method: request.method, headers: request.headers, body: request.body, redirect: "manual" });
  const headers: Record<string, string> = {};
  response.headers.forEach((value, key) => void (headers[key] = value));
  return { status: response.status, headers, body: await response.text() };
}

/** Loads a package folder's entry into its own sandbox with `config`, which must match its configSchema. */
export async function loadPackage(folder: string, config: Record<string, unknown>) {
  if (!schemaAccepts(folder, config)) throw new Error(`test config rejected by ${folder}'s configSchema: ${ajv.errorsText()}`);
  return loadUnchecked(folder, config);
}

/** The same without the schema check: what `activate` does with a config the catalog would refuse. */
export async function loadUnchecked(folder: string, config: unknown) {
  const m = manifest(folder);
  const logs: [LogLevel, string][] = [];
  const source = readFileSync(join(PLUGINS_DIR, folder, m.entry), "utf8");
  const sandbox = await loadPlugin(source, config, { log: (level, message) => void logs.push([level, message]), http: localHttp });
  return { sandbox, logs };
}

/** A local receiver standing in for a vendor's API, and `sent`: the requests one call made to it. */
export function vendor(answer?: Answer) {
  const receiver = startReceiver(answer ? { answer } : {});
  const sent = async (run: () => Promise<unknown>) => {
    const before = receiver.received.length;
    await run();
    return receiver.received.slice(before);
  };
  return { receiver, baseUrl: `http://127.0.0.1:${receiver.port}`, sent };
}

export interface EvaluationRecord {
  flagKey: string;
  environment: string;
  enabled: boolean;
  variant: string | null;
  reason: string;
  ruleId: string | null;
  userId: string | null;
  evaluatedAt: string;
}

/** An evaluation record as the host hands them over in `onEvaluations` batches. */
export const evaluation = (over: Partial<EvaluationRecord> = {}): EvaluationRecord => ({
  flagKey: "checkout-v2",
  environment: "production",
  enabled: true,
  variant: "blue",
  reason: "TARGETING_RULE_MATCH",
  ruleId: "rule_1",
  userId: "user-42",
  evaluatedAt: "2026-11-20T10:00:00.000Z",
  ...over,
});

/** A webhook event payload as `onEvent` gets it. */
export const changeEvent = (event = "flag.enabled", over: Record<string, unknown> = {}) => ({
  id: "evt_01",
  event,
  projectSlug: "shop",
  environment: "production",
  timestamp: "2026-11-20T10:00:00.000Z",
  data: { flagKey: "checkout-v2", previousState: { enabled: false }, currentState: { enabled: true } },
  ...over,
});
