/**
 * Issue 21's walk: every write route of the OpenAPI document appends exactly one change-log
 * entry per resource it changes, with the caller as actor for every kind of credential the
 * route takes, the request's id, the right `changes`, and no secret anywhere in the entry; a
 * refused call of each route changes nothing (the whole database compared before and after).
 *
 * The routes come from GET /v1/openapi.json, so a new write route fails this file with its name
 * until it gets a case here (or a place, with its reason, in EXCLUDED). Each call runs in a
 * world of its own (a fresh project with its flags, keys, users, webhook), so that a delete
 * in one call does not take another's subject away. Entries are read with SQL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cliAuthor, SECRET } from "../../src/changes/entry";
import { bearer, json, seedAdminKey, seedApiKey, testApp, type TestApp, entriesAfter, lastPosition, runCliBeside, rawRows, onPostgres, seedUser, tableNames } from "../helpers";

/**
 * Write routes that append no entry, each with its reason. Pro-only stubs are checked to still
 * answer 403 PRO_EDITION_REQUIRED in CE.
 */
const EXCLUDED: Record<string, string> = {
  "POST /v1/auth/login": "authentication: issues a token, changes no resource",
  "POST /v1/auth/logout": "authentication: revokes the caller's own token, no resource",
  "POST /v1/auth/session": "authentication: issues a token (in the session cookie), changes no resource",
  "DELETE /v1/auth/session": "authentication: revokes the caller's own token and clears its cookie, no resource",
  "POST /v1/evaluate": "a read sent as POST (the context is the body)",
  "POST /v1/evaluate/batch": "a read sent as POST (the context is the body)",
  "POST /v1/projects/{slug}/environments/{environment}/evaluate": "a read sent as POST (the context is the body)",
  "POST /v1/projects/{slug}/environments/{environment}/evaluate/batch": "a read sent as POST (the context is the body)",
  "POST /ofrep/v1/evaluate/flags/{key}": "a read sent as POST (OFREP: the context is the body)",
  "POST /ofrep/v1/evaluate/flags": "a read sent as POST (OFREP: the context is the body)",
  "POST /v1/testing/sessions": "test data written at pipeline speed: not recorded (docs/audit.md)",
  "DELETE /v1/testing/sessions/{id}": "test data: not recorded",
  "PUT /v1/testing/sessions/{id}/overrides/batch": "test data: not recorded",
  "PUT /v1/testing/sessions/{id}/overrides/{flagKey}": "test data: not recorded",
  "DELETE /v1/testing/sessions/{id}/overrides/{flagKey}": "test data: not recorded",
  "POST /v1/webhook-deliveries/{deliveryId}/redeliver": "a delivery operation: sends an event again, changes no resource",
  "POST /v1/webhook-deliveries/{deliveryId}/attempt-now": "a delivery operation: sends a pending delivery now, changes no resource",
};
/**
 * Pro-only write routes: this walk runs CE, where they answer 403 PRO_EDITION_REQUIRED and
 * write nothing; their entries on Pro (actor, masking, refusals writing nothing) are walked in
 * test/http/integrations.test.ts.
 */
const PRO_ONLY = ["POST /v1/projects/{slug}/integrations", "PATCH /v1/projects/{slug}/integrations/{integrationId}", "DELETE /v1/projects/{slug}/integrations/{integrationId}"];

type Kind = "admin key" | "admin JWT" | "editor JWT" | "mgmt key" | "full key";
const ALL: Kind[] = ["admin key", "admin JWT", "editor JWT", "mgmt key", "full key"];
const PROJECT: Kind[] = ["admin key", "admin JWT", "mgmt key", "full key"];
const ADMIN: Kind[] = ["admin key", "admin JWT"];

interface Actor {
  type: string;
  id: string;
  label: string;
}
interface Caller {
  headers: Record<string, string>;
  actor: Actor;
  secret: string;
}

/** One call's subjects: a fresh project with flags, keys, a webhook, a user and an admin key to change. */
interface World {
  slug: string;
  projectId: string;
  callers: Record<Kind, Caller>;
  rotateKeyId: string;
  deleteKeyId: string;
  webhookId: string;
  userId: string;
  adminKeyId: string;
  /** A disabled plugin (@flagsvc/posthog): its worker is not kept running across the walk. */
  pluginId: string;
  /** A pending schedule of flag `kept` in production, and a cancelled one. */
  scheduleId: string;
  cancelledScheduleId: string;
}

interface Call {
  path: string;
  body?: unknown;
}

/** An entry as expected: `changes` is checked by a function (it gets the entry's changes). */
interface Expected {
  type: string;
  action: string;
  project: string | null;
  environment?: string | null;
  resourceId?: string;
  key?: string | null;
  changes: (changes: Record<string, any>) => void;
}

interface Rejection {
  why: string;
  status: number;
  call: (w: World) => Call & { headers?: Record<string, string> };
}

interface Case {
  kinds: Kind[];
  call: (w: World) => Call;
  status: number;
  expect: (w: World, answer: Record<string, any>) => Expected[];
  /** Refused calls of this route (status and why); every one must leave the database as it was. */
  rejected: Rejection[];
}

const WEBHOOK_SECRET = "walk-webhook-secret-0123456789";
/** A schedule's time: in the future of the test clock. */
const SCHEDULE_AT = "2030-01-01T00:00:00Z";
const PLUGIN = "@flagsvc/posthog";
const PLUGIN_SECRET = "phc_walk_plugin_secret_0123456789";
/** A plugin's config in an entry: its secret masked on both sides. */
const maskedConfig = (before: unknown, after: unknown) => (c: Record<string, any>) => expect(c.config).toMatchObject({ before, after });
const PASSWORD = "walk password of some length";
let serial = 0;
const next = () => ++serial;

const created = (field: string, value: unknown) => (c: Record<string, any>) => expect(c[field]).toEqual({ before: null, after: value });
const deleted = (field: string, value: unknown) => (c: Record<string, any>) => expect(c[field]).toEqual({ before: value, after: null });
/** Exactly these fields changed, from `before` to `after`. */
const only = (fields: Record<string, [unknown, unknown]>) => (c: Record<string, any>) =>
  expect(c).toEqual(Object.fromEntries(Object.entries(fields).map(([f, [before, after]]) => [f, { before, after }])));

/** The viewer's 403 (no role below editor writes anything) and an eval key's: refused by access. */
const forbidden = (): Rejection[] => [
  { why: "viewer JWT", status: 403, call: () => ({ path: "", headers: viewer }) },
];

const CASES: Record<string, Case> = {
  "POST /v1/projects": {
    kinds: ADMIN,
    call: () => ({ path: "/v1/projects", body: { slug: `made-${next()}`, name: "Made" } }),
    status: 201,
    expect: (_w, a) => [{ type: "project", action: "created", project: a.slug, key: a.slug, resourceId: a.id, changes: created("slug", a.slug) }],
    rejected: [
      { why: "taken slug", status: 409, call: (w) => ({ path: "/v1/projects", body: { slug: w.slug, name: "Again" } }) },
      { why: "bad slug", status: 400, call: () => ({ path: "/v1/projects", body: { slug: "Not A Slug", name: "x" } }) },
      { why: "mgmt key", status: 403, call: (w) => ({ path: "/v1/projects", body: { slug: "by-key", name: "x" }, headers: w.callers["mgmt key"].headers }) },
    ],
  },
  "PATCH /v1/projects/{slug}": {
    kinds: PROJECT,
    call: (w) => ({ path: `/v1/projects/${w.slug}`, body: { name: "Renamed" } }),
    status: 200,
    expect: (w) => [{ type: "project", action: "updated", project: w.slug, key: w.slug, resourceId: w.projectId, changes: only({ name: [`World ${w.slug}`, "Renamed"] }) }],
    rejected: [
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere", body: { name: "x" } }) },
      { why: "bad body", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}`, body: { name: 7 } }) },
      { why: "editor JWT", status: 403, call: (w) => ({ path: `/v1/projects/${w.slug}`, body: { name: "x" }, headers: editor }) },
    ],
  },
  "DELETE /v1/projects/{slug}": {
    kinds: PROJECT,
    call: (w) => ({ path: `/v1/projects/${w.slug}` }),
    status: 204,
    expect: (w) => [{ type: "project", action: "deleted", project: w.slug, key: w.slug, resourceId: w.projectId, changes: deleted("slug", w.slug) }],
    rejected: [
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere" }) },
      { why: "editor JWT", status: 403, call: (w) => ({ path: `/v1/projects/${w.slug}`, headers: editor }) },
    ],
  },
  "POST /v1/projects/{slug}/environments": {
    kinds: PROJECT,
    call: (w) => ({ path: `/v1/projects/${w.slug}/environments`, body: { slug: "qa", name: "QA" } }),
    status: 201,
    expect: (w, a) => [{ type: "environment", action: "created", project: w.slug, environment: "qa", key: "qa", resourceId: a.id, changes: created("slug", "qa") }],
    rejected: [
      { why: "taken slug", status: 409, call: (w) => ({ path: `/v1/projects/${w.slug}/environments`, body: { slug: "staging", name: "x" } }) },
      { why: "bad body", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/environments`, body: { slug: "qa" } }) },
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere/environments", body: { slug: "qa", name: "QA" } }) },
    ],
  },
  "PATCH /v1/projects/{slug}/environments/{environment}": {
    kinds: PROJECT,
    call: (w) => ({ path: `/v1/projects/${w.slug}/environments/staging`, body: { name: "Stage" } }),
    status: 200,
    expect: (w) => [{ type: "environment", action: "updated", project: w.slug, environment: "staging", key: "staging", changes: only({ name: ["Staging", "Stage"] }) }],
    rejected: [
      { why: "unknown environment", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/environments/nowhere`, body: { name: "x" } }) },
      { why: "bad body", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/environments/staging`, body: { name: "" } }) },
    ],
  },
  "DELETE /v1/projects/{slug}/environments/{environment}": {
    kinds: PROJECT,
    call: (w) => ({ path: `/v1/projects/${w.slug}/environments/staging` }),
    status: 204,
    expect: (w) => [{ type: "environment", action: "deleted", project: w.slug, environment: "staging", key: "staging", changes: deleted("slug", "staging") }],
    rejected: [
      { why: "unknown environment", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/environments/nowhere` }) },
      { why: "editor JWT", status: 403, call: (w) => ({ path: `/v1/projects/${w.slug}/environments/staging`, headers: editor }) },
    ],
  },
  "POST /v1/projects/{slug}/api-keys": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/api-keys`, body: { name: "made key", scope: "eval", environment: "development" } }),
    status: 201,
    expect: (w, a) => [{ type: "api_key", action: "created", project: w.slug, environment: "development", resourceId: a.id, changes: created("name", "made key") }],
    rejected: [
      { why: "unknown environment", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/api-keys`, body: { name: "k", scope: "eval", environment: "nowhere" } }) },
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere/api-keys", body: { name: "k", scope: "eval", environment: "development" } }) },
      { why: "bad scope", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/api-keys`, body: { name: "k", scope: "root", environment: "development" } }) },
    ],
  },
  "POST /v1/api-keys/{keyId}/rotate": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/api-keys/${w.rotateKeyId}/rotate` }),
    status: 200,
    expect: (w) => [{ type: "api_key", action: "rotated", project: w.slug, environment: "development", resourceId: w.rotateKeyId, changes: () => {} }],
    rejected: [
      { why: "unknown key", status: 404, call: () => ({ path: "/v1/api-keys/key_nowhere/rotate" }) },
      { why: "bad grace period", status: 400, call: (w) => ({ path: `/v1/api-keys/${w.rotateKeyId}/rotate`, body: { gracePeriodSeconds: -1 } }) },
    ],
  },
  "DELETE /v1/api-keys/{keyId}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/api-keys/${w.deleteKeyId}` }),
    status: 204,
    expect: (w) => [{ type: "api_key", action: "deleted", project: w.slug, environment: "development", resourceId: w.deleteKeyId, changes: deleted("name", "eval key") }],
    rejected: [{ why: "unknown key", status: 404, call: () => ({ path: "/v1/api-keys/key_nowhere" }) }],
  },
  "POST /v1/projects/{slug}/flags": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags`, body: { key: "made", name: "Made" } }),
    status: 201,
    expect: (w, a) => [{ type: "flag", action: "created", project: w.slug, environment: null, key: "made", resourceId: a.id, changes: created("name", "Made") }],
    rejected: [
      { why: "taken key", status: 409, call: (w) => ({ path: `/v1/projects/${w.slug}/flags`, body: { key: "kept", name: "x" } }) },
      { why: "bad key", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/flags`, body: { key: "Not A Key", name: "x" } }) },
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere/flags", body: { key: "made", name: "x" } }) },
    ],
  },
  "PATCH /v1/projects/{slug}/flags/{key}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept`, body: { name: "Kept, renamed", description: "now described" } }),
    status: 200,
    expect: (w) => [{ type: "flag", action: "updated", project: w.slug, environment: null, key: "kept", changes: only({ name: ["Kept", "Kept, renamed"], description: [null, "now described"] }) }],
    rejected: [
      { why: "unknown flag", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/nowhere`, body: { name: "x" } }) },
      { why: "rule serving an unknown variant", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept`, body: { rules: [{ variant: "nope" }] } }) },
      { why: "same name (changes nothing)", status: 200, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept`, body: { name: "Kept" } }) },
    ],
  },
  "DELETE /v1/projects/{slug}/flags/{key}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags/doomed` }),
    status: 204,
    expect: (w) => [{ type: "flag", action: "deleted", project: w.slug, environment: null, key: "doomed", changes: deleted("name", "Doomed") }],
    rejected: [{ why: "unknown flag", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/nowhere` }) }],
  },
  "PUT /v1/projects/{slug}/flags/{key}/states/{environment}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/states/production`, body: { enabled: false, rolloutPercentage: 25 } }),
    status: 200,
    expect: (w) => [{ type: "flag_state", action: "disabled", project: w.slug, environment: "production", key: "kept", changes: only({ enabled: [true, false], rolloutPercentage: [null, 25] }) }],
    rejected: [
      { why: "unknown environment", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/states/nowhere`, body: { enabled: true } }) },
      { why: "rollout over 100", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/states/production`, body: { enabled: true, rolloutPercentage: 101 } }) },
      { why: "same state (changes nothing)", status: 200, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/states/production`, body: { enabled: true } }) },
    ],
  },
  "POST /v1/projects/{slug}/flags/{key}/schedules": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules`, body: { environment: "production", at: SCHEDULE_AT, state: { enabled: false } } }),
    status: 201,
    expect: (w, a) => [{ type: "schedule", action: "created", project: w.slug, environment: "production", key: "kept", resourceId: a.id, changes: created("status", "pending") }],
    rejected: [
      { why: "at in the past", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules`, body: { environment: "production", at: "2020-01-01T00:00:00Z", state: { enabled: true } } }) },
      { why: "a ramp with one bad step", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules`, body: { environment: "production", steps: [{ at: SCHEDULE_AT, state: { enabled: true } }, { at: SCHEDULE_AT, state: {} }] } }) },
      { why: "unknown flag", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/nowhere/schedules`, body: { environment: "production", at: SCHEDULE_AT, state: { enabled: true } } }) },
    ],
  },
  "DELETE /v1/projects/{slug}/flags/{key}/schedules/{id}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules/${w.scheduleId}` }),
    status: 200,
    expect: (w) => [{ type: "schedule", action: "updated", project: w.slug, environment: "production", key: "kept", resourceId: w.scheduleId, changes: only({ status: ["pending", "cancelled"] }) }],
    rejected: [
      { why: "unknown schedule", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules/sch_nowhere` }) },
      { why: "not pending", status: 409, call: (w) => ({ path: `/v1/projects/${w.slug}/flags/kept/schedules/${w.cancelledScheduleId}` }) },
      ],
    },
  "POST /v1/projects/{slug}/segments": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/segments`, body: { key: "made-seg", name: "Made", conditions: [], included: ["u1"] } }),
    status: 201,
    expect: (w, a) => [{ type: "segment", action: "created", project: w.slug, environment: null, key: "made-seg", resourceId: a.id, changes: created("name", "Made") }],
    rejected: [
      { why: "taken key", status: 409, call: (w) => ({ path: `/v1/projects/${w.slug}/segments`, body: { key: "kept-seg", name: "x", conditions: [] } }) },
      { why: "a segment naming a segment", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/segments`, body: { key: "x", name: "x", conditions: [{ attribute: "userId", operator: "in_segment", value: "kept-seg" }] } }) },
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere/segments", body: { key: "made-seg", name: "x", conditions: [] } }) },
    ],
  },
  "PATCH /v1/projects/{slug}/segments/{key}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/segments/kept-seg`, body: { included: ["u2"] } }),
    status: 200,
    expect: (w) => [{ type: "segment", action: "updated", project: w.slug, environment: null, key: "kept-seg", changes: only({ included: [["u1"], ["u2"]] }) }],
    rejected: [
      { why: "unknown segment", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/segments/nowhere`, body: { name: "x" } }) },
      { why: "same list (changes nothing)", status: 200, call: (w) => ({ path: `/v1/projects/${w.slug}/segments/kept-seg`, body: { included: ["u1"] } }) },
    ],
  },
  "DELETE /v1/projects/{slug}/segments/{key}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/segments/doomed-seg` }),
    status: 204,
    expect: (w) => [{ type: "segment", action: "deleted", project: w.slug, environment: null, key: "doomed-seg", changes: deleted("name", "Doomed") }],
    rejected: [
      { why: "unknown segment", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/segments/nowhere` }) },
      { why: "a rule uses it", status: 409, call: (w) => ({ path: `/v1/projects/${w.slug}/segments/used-seg` }) },
    ],
  },
  "POST /v1/projects/{slug}/webhooks": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/projects/${w.slug}/webhooks`, body: { url: "https://hooks.example.com/made", events: ["flag.updated"], secret: WEBHOOK_SECRET, enabled: false } }),
    status: 201,
    expect: (w, a) => [{ type: "webhook", action: "created", project: w.slug, resourceId: a.id, changes: created("url", "https://hooks.example.com/made") }],
    rejected: [
      { why: "short secret", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/webhooks`, body: { url: "https://hooks.example.com/x", events: ["flag.updated"], secret: "short" } }) },
      { why: "unknown project", status: 404, call: () => ({ path: "/v1/projects/nowhere/webhooks", body: { url: "https://hooks.example.com/x", events: ["flag.updated"], secret: WEBHOOK_SECRET } }) },
    ],
  },
  "PATCH /v1/webhooks/{webhookId}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/webhooks/${w.webhookId}`, body: { description: "described", secret: `${WEBHOOK_SECRET}-new` } }),
    status: 200,
    expect: (w) => [
      {
        type: "webhook",
        action: "updated",
        project: w.slug,
        resourceId: w.webhookId,
        changes: (c) => {
          expect(c.description).toEqual({ before: null, after: "described" });
          expect(c.secret).toEqual({ before: SECRET, after: SECRET, changed: true });
        },
      },
    ],
    rejected: [
      { why: "unknown webhook", status: 404, call: () => ({ path: "/v1/webhooks/wh_nowhere", body: { description: "x" } }) },
      { why: "bad events", status: 400, call: (w) => ({ path: `/v1/webhooks/${w.webhookId}`, body: { events: ["no.such.event"] } }) },
    ],
  },
  "DELETE /v1/webhooks/{webhookId}": {
    kinds: ALL,
    call: (w) => ({ path: `/v1/webhooks/${w.webhookId}` }),
    status: 204,
    expect: (w) => [{ type: "webhook", action: "deleted", project: w.slug, resourceId: w.webhookId, changes: deleted("url", "https://hooks.example.com/walk") }],
    rejected: [{ why: "unknown webhook", status: 404, call: () => ({ path: "/v1/webhooks/wh_nowhere" }) }],
  },
  "POST /v1/projects/{slug}/plugins": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/projects/${w.slug}/plugins`, body: { packageName: PLUGIN, version: "1.0.0", config: { apiKey: `${PLUGIN_SECRET}-${next()}` } } }),
    status: 201,
    expect: (w, a) => [{ type: "plugin", action: "created", project: w.slug, key: PLUGIN, resourceId: a.id, changes: maskedConfig(null, { apiKey: SECRET }) }],
    rejected: [
      { why: "unknown package", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins`, body: { packageName: "@flagsvc/nope", config: {} } }) },
      { why: "config against the schema", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins`, body: { packageName: PLUGIN, config: { apiKey: 5 } } }) },
      { why: "mgmt key", status: 403, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins`, body: { packageName: PLUGIN, config: {} }, headers: w.callers["mgmt key"].headers }) },
    ],
  },
  "PATCH /v1/projects/{slug}/plugins/{pluginId}": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/${w.pluginId}`, body: { config: { apiKey: `${PLUGIN_SECRET}-new` }, enabled: false } }),
    status: 200,
    expect: (w) => [{ type: "plugin", action: "updated", project: w.slug, key: PLUGIN, resourceId: w.pluginId, changes: (c) => expect(c).toEqual({ config: { before: { apiKey: SECRET }, after: { apiKey: SECRET }, changed: true } }) }],
    rejected: [
      { why: "unknown plugin", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/plugin_nowhere`, body: { enabled: true } }) },
      { why: "unknown version", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/${w.pluginId}`, body: { version: "9.9.9" } }) },
      { why: "unknown field", status: 400, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/${w.pluginId}`, body: { enable: true } }) },
    ],
  },
  "DELETE /v1/projects/{slug}/plugins/{pluginId}": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/${w.pluginId}` }),
    status: 204,
    expect: (w) => [{ type: "plugin", action: "deleted", project: w.slug, key: PLUGIN, resourceId: w.pluginId, changes: deleted("packageName", PLUGIN) }],
    rejected: [{ why: "unknown plugin", status: 404, call: (w) => ({ path: `/v1/projects/${w.slug}/plugins/plugin_nowhere` }) }],
  },
  "POST /v1/users": {
    kinds: ADMIN,
    call: () => ({ path: "/v1/users", body: { email: `made-${next()}@example.com`, password: PASSWORD, role: "viewer" } }),
    status: 201,
    expect: (_w, a) => [
      {
        type: "user",
        action: "created",
        project: null,
        resourceId: a.id,
        changes: (c) => {
          expect(c.email).toEqual({ before: null, after: a.email });
          expect(c.role).toEqual({ before: null, after: "viewer" });
        },
      },
    ],
    rejected: [
      { why: "taken email", status: 409, call: () => ({ path: "/v1/users", body: { email: "walk-admin@example.com", password: PASSWORD, role: "viewer" } }) },
      { why: "short password", status: 400, call: () => ({ path: "/v1/users", body: { email: "short@example.com", password: "short", role: "viewer" } }) },
      { why: "editor JWT", status: 403, call: () => ({ path: "/v1/users", body: { email: "e@example.com", password: PASSWORD, role: "viewer" }, headers: editor }) },
    ],
  },
  "PATCH /v1/users/{userId}": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/users/${w.userId}`, body: { role: "editor", password: `${PASSWORD} new` } }),
    status: 200,
    expect: (w) => [
      {
        type: "user",
        action: "updated",
        project: null,
        resourceId: w.userId,
        changes: (c) => {
          expect(c.role).toEqual({ before: "viewer", after: "editor" });
          // The password's field, whatever its name, shows only that it changed.
          const masked = Object.values(c).filter((v: any) => v.changed === true);
          expect(masked).toEqual([{ before: SECRET, after: SECRET, changed: true }]);
        },
      },
    ],
    rejected: [
      { why: "unknown user", status: 404, call: () => ({ path: "/v1/users/usr_nowhere", body: { role: "editor" } }) },
      { why: "bad role", status: 400, call: (w) => ({ path: `/v1/users/${w.userId}`, body: { role: "owner" } }) },
    ],
  },
  "DELETE /v1/users/{userId}": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/users/${w.userId}` }),
    status: 204,
    expect: (w) => [{ type: "user", action: "deleted", project: null, resourceId: w.userId, changes: deleted("email", `${w.slug}@example.com`) }],
    rejected: [{ why: "unknown user", status: 404, call: () => ({ path: "/v1/users/usr_nowhere" }) }],
  },
  "POST /v1/admin-keys": {
    kinds: ADMIN,
    call: () => ({ path: "/v1/admin-keys", body: { name: "made admin key" } }),
    status: 201,
    expect: (_w, a) => [{ type: "admin_key", action: "created", project: null, resourceId: a.id, changes: created("name", "made admin key") }],
    rejected: [
      { why: "bad body", status: 400, call: () => ({ path: "/v1/admin-keys", body: { name: "" } }) },
      { why: "full key", status: 403, call: (w) => ({ path: "/v1/admin-keys", body: { name: "x" }, headers: w.callers["full key"].headers }) },
    ],
  },
  "DELETE /v1/admin-keys/{keyId}": {
    kinds: ADMIN,
    call: (w) => ({ path: `/v1/admin-keys/${w.adminKeyId}` }),
    status: 204,
    expect: (w) => [{ type: "admin_key", action: "deleted", project: null, resourceId: w.adminKeyId, changes: deleted("name", `spare ${w.slug}`) }],
    rejected: [{ why: "unknown key", status: 404, call: () => ({ path: "/v1/admin-keys/key_nowhere" }) }],
  },
};

let h: TestApp;
let setup: Record<string, string>;
let instanceCallers: Pick<Record<Kind, Caller>, "admin key" | "admin JWT" | "editor JWT">;
let editor: Record<string, string>;
let viewer: Record<string, string>;

const insertUser = (role: "admin" | "editor" | "viewer", email: string): Promise<string> => seedUser(h.ctx, role, email, `$argon2id$walk$${crypto.randomUUID()}`);

async function userCaller(role: "admin" | "editor" | "viewer", email: string): Promise<Caller> {
  const id = await insertUser(role, email);
  const token = (await h.ctx.credentials.issueToken(id, role)).token;
  return { headers: bearer(token), actor: { type: "user", id, label: email }, secret: token };
}

async function adminKeyCaller(name: string): Promise<Caller> {
  const secret = await seedAdminKey(h.ctx, name);
  const { id } = (await h.ctx.stores.adminKeys.list()).find((k) => k.name === name)!;
  return { headers: bearer(secret), actor: { type: "admin_key", id, label: name }, secret };
}

async function apiKeyCaller(scope: "mgmt" | "full", slug: string): Promise<Caller> {
  const { id, secret } = await seedApiKey(h.ctx, scope, slug);
  return { headers: bearer(secret), actor: { type: "api_key", id, label: `${scope} key` }, secret };
}

/** A fresh project (written through the API with the setup key) and its subjects. */
async function world(): Promise<World> {
  const slug = `world-${next()}`;
  const send = async (method: string, path: string, body?: unknown, status = 201) => json(await h.request(method, path, { headers: setup, body }), status);
  const project = await send("POST", "/v1/projects", { slug, name: `World ${slug}` });
  await send("POST", `/v1/projects/${slug}/flags`, { key: "kept", name: "Kept" });
  await send("POST", `/v1/projects/${slug}/flags`, { key: "doomed", name: "Doomed" });
  await send("PUT", `/v1/projects/${slug}/flags/kept/states/production`, { enabled: true }, 200);
  await send("POST", `/v1/projects/${slug}/segments`, { key: "kept-seg", name: "Kept", conditions: [], included: ["u1"] });
  await send("POST", `/v1/projects/${slug}/segments`, { key: "doomed-seg", name: "Doomed", conditions: [] });
  await send("POST", `/v1/projects/${slug}/segments`, { key: "used-seg", name: "Used", conditions: [] });
  await send("POST", `/v1/projects/${slug}/flags`, { key: "seg-user", name: "Seg user", rules: [{ conditions: [{ attribute: "userId", operator: "in_segment", value: "used-seg" }] }] });
  const webhook = await send("POST", `/v1/projects/${slug}/webhooks`, { url: "https://hooks.example.com/walk", events: ["flag.updated"], secret: WEBHOOK_SECRET, enabled: false });
  const plugin = await send("POST", `/v1/projects/${slug}/plugins`, { packageName: PLUGIN, config: { apiKey: PLUGIN_SECRET } });
  await send("PATCH", `/v1/projects/${slug}/plugins/${plugin.id}`, { enabled: false }, 200);
  const schedule = await send("POST", `/v1/projects/${slug}/flags/kept/schedules`, { environment: "production", at: SCHEDULE_AT, state: { enabled: false } });
  const cancelled = await send("POST", `/v1/projects/${slug}/flags/kept/schedules`, { environment: "production", at: SCHEDULE_AT, state: { rolloutPercentage: 5 } });
  await send("DELETE", `/v1/projects/${slug}/flags/kept/schedules/${cancelled.id}`, undefined, 200);
  const userId = await insertUser("viewer", `${slug}@example.com`);
  const spare = await adminKeyCaller(`spare ${slug}`);
  return {
    slug,
    projectId: project.id,
    callers: { ...instanceCallers, "mgmt key": await apiKeyCaller("mgmt", slug), "full key": await apiKeyCaller("full", slug) },
    rotateKeyId: (await seedApiKey(h.ctx, "eval", slug)).id,
    deleteKeyId: (await seedApiKey(h.ctx, "eval", slug)).id,
    webhookId: webhook.id,
    userId,
    adminKeyId: spare.actor.id,
    pluginId: plugin.id,
    scheduleId: schedule.id,
    cancelledScheduleId: cancelled.id,
  };
}


/** Every table's rows: what a refused call must leave as it was. */
async function dump(): Promise<Record<string, string[]>> {
  const tables = await tableNames(h.ctx);
  // A plugin's status, position and counters are the host's runtime state, settled off the request.
  const columns = (name: string) => (name === "plugins" ? "id, project_id, package_name, version, enabled, config, installed_at, updated_at" : "*");
  const rows = async (name: string) => (await rawRows(h.ctx, `SELECT ${columns(name)} FROM "${name}"`)).map((r) => JSON.stringify(r)).sort();
  // Leases are renewed by the node's keeper every few seconds, whatever the requests do.
  return Object.fromEntries(await Promise.all(tables.filter((name) => name !== "leases").map(async (name) => [name, await rows(name)])));
}

/** Every secret the database holds (hashes, webhook secrets): none may appear in an entry. */
async function storedSecrets(): Promise<string[]> {
  const q = async (sql: string) => ((await rawRows(h.ctx, sql)) as { s: string | null }[]).map((r) => r.s).filter((s): s is string => s !== null);
  return [
    ...(await q("SELECT key_hash AS s FROM api_keys")),
    ...(await q("SELECT previous_hash AS s FROM api_keys")),
    ...(await q("SELECT key_hash AS s FROM admin_keys")),
    ...(await q("SELECT password_hash AS s FROM users")),
    ...(await q("SELECT secret AS s FROM webhooks")),
    ...(await q(onPostgres ? "SELECT config->>'apiKey' AS s FROM plugins" : "SELECT json_extract(config, '$.apiKey') AS s FROM plugins")),
  ];
}

/** The secret texts of a request and its answer: passwords, webhook secrets, a new key's secret. */
function sentSecrets(body: unknown, answer: Record<string, any>): string[] {
  const found: string[] = [];
  const b = (body ?? {}) as Record<string, unknown>;
  for (const f of ["password", "secret"]) if (typeof b[f] === "string") found.push(b[f] as string);
  const apiKey = (b.config as { apiKey?: unknown } | undefined)?.apiKey;
  if (typeof apiKey === "string") found.push(apiKey);
  if (typeof answer.key === "string" && answer.key.startsWith("svc_")) found.push(answer.key);
  return found;
}

beforeAll(async () => {
  h = await testApp({ SVC_RATE_LIMITS: "eval:100000,test:100000,mgmt:100000,full:100000,admin:100000,user:100000,anonymous:100000" });
  setup = bearer(await seedAdminKey(h.ctx, "walk setup"));
});
afterAll(async () => {
  await h.ctx.plugins.stopAll();
  h.close();
});

describe("the document's write routes", () => {
  test("every write route has a case or an excluded reason; Pro-only stubs answer 403 PRO_EDITION_REQUIRED in CE and write nothing", async () => {
    const doc = await json(await h.request("GET", "/v1/openapi.json", { headers: setup }), 200);
    const writes: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(ops)) if (!["get", "head", "options"].includes(method)) writes.push(`${method.toUpperCase()} ${path}`);
    }
    const missing = writes.filter((w) => !(w in CASES) && !(w in EXCLUDED) && !PRO_ONLY.includes(w));
    expect(missing).toEqual([]);
    // Every case and exclusion names a route that still exists.
    expect([...Object.keys(CASES), ...Object.keys(EXCLUDED), ...PRO_ONLY].filter((r) => !writes.includes(r))).toEqual([]);

    const before = await dump();
    for (const route of PRO_ONLY) {
      const [method, template] = route.split(" ") as [string, string];
      const res = await h.request(method, template.replace("{slug}", "default").replace("{integrationId}", "int_x"), { headers: setup, body: method === "DELETE" ? undefined : {} });
      expect({ route, error: (await json(res, 403)).error }).toEqual({ route, error: "PRO_EDITION_REQUIRED" });
    }
    expect(await dump()).toEqual(before);
  });
});

beforeAll(async () => {
  instanceCallers = {
    "admin key": await adminKeyCaller("walk admin"),
    "admin JWT": await userCaller("admin", "walk-admin@example.com"),
    "editor JWT": await userCaller("editor", "walk-editor@example.com"),
  };
  editor = instanceCallers["editor JWT"].headers;
  viewer = (await userCaller("viewer", "walk-viewer@example.com")).headers;
});

for (const [route, c] of Object.entries(CASES)) {
  const method = route.split(" ")[0]!;
  describe(route, () => {
    expect(c.kinds.length).toBeGreaterThanOrEqual(2);
    for (const kind of c.kinds) {
      test(`${kind}: ${c.status}, one entry per changed resource, by the caller, in the request, no secret in it`, async () => {
        const w = await world();
        const caller = w.callers[kind];
        const call = c.call(w);
        const mark = await lastPosition(h.ctx);
        const requestId = `walk-${next()}`;
        const res = await h.request(method, call.path, { headers: { ...caller.headers, "x-request-id": requestId }, body: call.body });
        const answer = await json(res, c.status);
        const entries = await entriesAfter(h.ctx, mark);
        const expected = c.expect(w, answer);
        expect(entries.map((e) => `${e.resource_type} ${e.action}`)).toEqual(expected.map((e) => `${e.type} ${e.action}`));
        expected.forEach((x, i) => {
          const e = entries[i]!;
          expect({ type: e.actor_type, id: e.actor_id, label: e.actor_label }).toEqual(caller.actor);
          expect(e.request_id).toBe(requestId);
          expect(e.id).toMatch(/^aud_/);
          expect(e.project_slug).toBe(x.project);
          if (x.environment !== undefined) expect(e.environment).toBe(x.environment);
          if (x.resourceId !== undefined) expect(e.resource_id).toBe(x.resourceId);
          if (x.key !== undefined) expect(e.resource_key).toBe(x.key);
          x.changes(JSON.parse(e.changes));
        });
        const text = JSON.stringify(entries);
        const secrets = [...(await storedSecrets()), ...sentSecrets(call.body, answer), caller.secret, ...Object.values(setup)];
        for (const secret of new Set(secrets)) expect({ secret, found: text.includes(secret) }).toEqual({ secret, found: false });
      });
    }

    test(`refused: ${[...c.rejected, ...forbidden()].map((r) => `${r.status} ${r.why}`).join(", ")}: nothing written`, async () => {
      const w = await world();
      for (const r of [...c.rejected, ...forbidden()]) {
        const own = r.call(w);
        // The access refusals reuse the route's own call with another credential.
        const call = own.path === "" ? { ...c.call(w), headers: own.headers } : own;
        const before = await dump();
        const res = await h.request(method, call.path, { headers: call.headers ?? setup, body: call.body });
        expect({ why: r.why, status: res.status, body: await res.text() }).toEqual({ why: r.why, status: r.status, body: expect.any(String) });
        expect({ why: r.why, changed: JSON.stringify(await dump()) !== JSON.stringify(before) }).toEqual({ why: r.why, changed: false });
      }
    });
  });
}

const flagsvc = (...args: string[]) => runCliBeside(h, ...args);

describe("the CLI", () => {
  const cli = { type: "cli", id: `cli:${cliAuthor().actor.label}`, label: cliAuthor().actor.label };

  test("admin create-key: one admin_key created entry by the cli actor, without the key", async () => {
    const mark = await lastPosition(h.ctx);
    const r = await flagsvc("admin", "create-key", "--name", "from the cli");
    expect(r.code).toBe(0);
    const secret = r.stdout.trim();
    expect(secret).toStartWith("svc_admin_");
    const entries = await entriesAfter(h.ctx, mark);
    expect(entries.map((e) => [e.actor_type, e.actor_id, e.actor_label, e.request_id, e.resource_type, e.action, e.project_slug])).toEqual([
      [cli.type, cli.id, cli.label, null, "admin_key", "created", null],
    ]);
    expect(JSON.parse(entries[0]!.changes).name).toEqual({ before: null, after: "from the cli" });
    for (const s of [secret, ...(await storedSecrets())]) expect(JSON.stringify(entries).includes(s)).toBe(false);
  });

  test("admin reset-password: one user updated entry by the cli actor, the password masked; an unknown email appends nothing", async () => {
    const id = await insertUser("viewer", "cli-target@example.com");
    const mark = await lastPosition(h.ctx);
    const r = await flagsvc("admin", "reset-password", "--email", "cli-target@example.com", "--password", PASSWORD);
    expect(r.code).toBe(0);
    const entries = await entriesAfter(h.ctx, mark);
    expect(entries.map((e) => [e.actor_type, e.actor_id, e.actor_label, e.resource_type, e.resource_id, e.action])).toEqual([[cli.type, cli.id, cli.label, "user", id, "updated"]]);
    expect(Object.values(JSON.parse(entries[0]!.changes))).toEqual([{ before: SECRET, after: SECRET, changed: true }]);
    for (const s of [PASSWORD, ...(await storedSecrets())]) expect(JSON.stringify(entries).includes(s)).toBe(false);

    const before = await dump();
    expect((await flagsvc("admin", "reset-password", "--email", "nobody@example.com", "--password", PASSWORD)).code).toBe(1);
    expect(await dump()).toEqual(before);
  });
});
