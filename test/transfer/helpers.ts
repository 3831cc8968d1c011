/**
 * What the transfer tests share: an app on a given data dir or PostgreSQL database (as a node
 * would start on it), an instance with every kind of resource, and the API answers to compare.
 */
import { rmSync } from "node:fs";
import { bootstrap } from "../../src/bootstrap";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/lib/log";
import { createApp, createContext, createServices, dispatcher } from "../../src/server";
import { bearer, json, seedAdminKey, tempDir, TestClock, type TestApp } from "../helpers";

export const PRO = { SVC_EDITION: "pro", SVC_LOG_LEVEL: "warn" };

export interface Node {
  request(method: string, path: string, init?: { body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  close(): void;
}

/** The app started on `env` (SVC_DATA_DIR, or SVC_DATABASE_URL with a fresh data dir of its own), first start included. */
export async function nodeOn(env: Record<string, string>): Promise<Node> {
  const dir = env.SVC_DATA_DIR ?? tempDir();
  const config = loadConfig({ SVC_DATA_DIR: dir, ...PRO, ...env });
  const ctx = await createContext(config, { log: createLogger({ level: "warn", format: "json", write: () => undefined }), clock: new TestClock() });
  await bootstrap(ctx);
  const handle = dispatcher(createApp(ctx, createServices(ctx)));
  return {
    request(method, path, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      let body: string | undefined;
      if (init.body !== undefined) {
        body = JSON.stringify(init.body);
        headers["content-type"] = "application/json";
      }
      return handle(new Request(`http://localhost${path}`, { method, headers, body }));
    },
    close() {
      ctx.close();
      if (env.SVC_DATA_DIR === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Seeded {
  admin: Record<string, string>;
  evalKey: string;
  email: string;
  password: string;
}

/** Every kind of resource, through the API: projects, environments, segments, flags (variants, rules, prerequisites, states, schedules), users, keys, webhooks, plugins, integrations. */
export async function seed(h: TestApp): Promise<Seeded> {
  const admin = bearer(await seedAdminKey(h.ctx, "seed admin"));
  const call = async (method: string, path: string, body: unknown, status: number) => json(await h.request(method, path, { body, headers: admin }), status);
  await call("POST", "/v1/projects", { slug: "shop", name: "Shop" }, 201);
  await call("POST", "/v1/projects/shop/environments", { slug: "qa", name: "QA" }, 201);
  await call("POST", "/v1/projects/default/segments", { key: "beta", name: "Beta testers", conditions: [{ attribute: "plan", operator: "equals", value: "pro" }], included: ["u1"], excluded: ["u9"] }, 201);
  await call(
    "POST",
    "/v1/projects/default/flags",
    {
      key: "checkout",
      name: "Checkout",
      description: "New checkout",
      variants: [
        { key: "a", name: "A", weight: 50 },
        { key: "b", weight: 50 },
      ],
      rules: [{ name: "beta", conditions: [{ attribute: "userId", operator: "in_segment", value: "beta" }], variant: "b" }],
      bucketBy: "accountId",
    },
    201,
  );
  await call("POST", "/v1/projects/default/flags", { key: "new-ui", name: "New UI", prerequisites: [{ flagKey: "checkout", variant: "b" }] }, 201);
  await call("POST", "/v1/projects/shop/flags", { key: "banner", name: "Banner" }, 201);
  await call("PUT", "/v1/projects/default/flags/checkout/states/production", { enabled: true }, 200);
  await call("PUT", "/v1/projects/default/flags/new-ui/states/development", { enabled: true, rolloutPercentage: 42.5 }, 200);
  await call("PUT", "/v1/projects/shop/flags/banner/states/staging", { enabled: true }, 200);
  await call("POST", "/v1/projects/default/flags/checkout/schedules", { environment: "production", at: "2030-01-01T00:00:00Z", state: { rolloutPercentage: 100 } }, 201);
  const email = "ed@example.com";
  const password = "correct horse battery";
  await call("POST", "/v1/users", { email, password, role: "editor" }, 201);
  await call("POST", "/v1/admin-keys", { name: "ops" }, 201);
  const evalKey = (await call("POST", "/v1/projects/default/api-keys", { name: "web", scope: "eval", environment: "production" }, 201)).key as string;
  await call("POST", "/v1/projects/shop/api-keys", { name: "ci", scope: "mgmt", environment: "staging" }, 201);
  const plugin = await call("POST", "/v1/projects/default/plugins", { packageName: "@flagsvc/grafana", config: { baseUrl: "https://grafana.example.com", token: "glsa_secret" } }, 201);
  await call("PATCH", `/v1/projects/default/plugins/${plugin.id}`, { enabled: false }, 200);
  await call("POST", "/v1/projects/default/integrations", { type: "braze", config: { apiKey: "braze-secret-key-1", attributePrefix: "ff_" }, enabled: false }, 201);
  await call("POST", "/v1/projects/shop/webhooks", { url: "https://hooks.example.com/x", events: ["flag.created", "flag.updated"], secret: "a-webhook-secret-of-some-length" }, 201);
  return { admin, evalKey, email, password };
}

/** Every resource's GET answers (lists and details), by path. */
export async function answers(node: Pick<Node, "request">, admin: Record<string, string>): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const get = async (path: string) => {
    const body = await json(await node.request("GET", path, { headers: admin }), 200);
    out[path] = body;
    return body;
  };
  // The admin key's own last use moves with every request: compared apart (it is a key that works, or not).
  const keys = (await get("/v1/admin-keys")).adminKeys as Record<string, unknown>[];
  out["/v1/admin-keys"] = keys.map(({ lastUsedAt: _, ...k }) => k);
  await get("/v1/users");
  for (const p of (await get("/v1/projects")).projects as { slug: string }[]) {
    const base = `/v1/projects/${p.slug}`;
    await get(base);
    await get(`${base}/environments`);
    for (const f of (await get(`${base}/flags?include=states`)).flags as { key: string }[]) {
      await get(`${base}/flags/${f.key}`);
      await get(`${base}/flags/${f.key}/states`);
      await get(`${base}/flags/${f.key}/schedules`);
    }
    for (const s of (await get(`${base}/segments`)).segments as { key: string }[]) await get(`${base}/segments/${s.key}`);
    await get(`${base}/schedules`);
    await get(`${base}/api-keys`);
    for (const w of (await get(`${base}/webhooks`)).webhooks as { id: string }[]) await get(`/v1/webhooks/${w.id}`);
    for (const pl of (await get(`${base}/plugins`)).plugins as { id: string }[]) await get(`${base}/plugins/${pl.id}`);
    for (const i of (await get(`${base}/integrations`)).integrations as { id: string }[]) await get(`${base}/integrations/${i.id}`);
  }
  return out;
}

/** The old eval key evaluates, and the user logs in with the old password. */
export async function credentialsWork(node: Node, seeded: Seeded): Promise<void> {
  const evaluated = await json(await node.request("POST", "/v1/evaluate", { body: { flagKey: "checkout", context: { userId: "u1", accountId: "acme" } }, headers: bearer(seeded.evalKey) }), 200);
  if (evaluated.enabled !== true || evaluated.variant !== "b") throw new Error(`unexpected evaluation ${JSON.stringify(evaluated)}`);
  await json(await node.request("POST", "/v1/auth/login", { body: { email: seeded.email, password: seeded.password } }), 200);
}
