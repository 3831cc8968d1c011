/**
 * The drizzle `pg-core` schema of the PostgreSQL backend: src/db/schema.ts table by table, with
 * the same table and column names (so that an export, a query or a log line reads the same on
 * both). Migrations are generated from it with `npm run db:generate:pg -- --name NAME`
 * (drizzle-kit, drizzle.pg.config.ts) into src/db/pg/migrations and embedded into the binary.
 *
 * What differs from SQLite, and why:
 * - Timestamps stay ISO 8601 UTC **text** with milliseconds, as on SQLite, not timestamptz. The
 *   store interfaces carry exactly these strings (`createdAt: "2026-11-22T10:00:00.000Z"`), the
 *   services compare them as text (a cutoff, a schedule's `at`) and the contract suites compare
 *   records for equality across backends. timestamptz would arrive as a Date and have to be
 *   mapped back in every store, with a time zone and a precision (microseconds) to get wrong
 *   and nothing gained: the text sorts as it compares. (Bucket times in ms stay numbers.)
 * - JSON columns are `json` (the text as written, as SQLite keeps it: see `json` below); booleans are `boolean`; SQLite's `real` is `double precision`.
 * - `change_log.position` and `change_events.position` are `bigint` identities (mode number):
 *   the rowid/AUTOINCREMENT of SQLite. Positions stored elsewhere (`event_position`) are bigint.
 * - The `seq` ordering columns are identities (by default: an import may give them), so the
 *   stores never compute max + 1, which is only safe where writers are serialised.
 */
import { sql } from "drizzle-orm";
import { bigint, boolean, customType, doublePrecision, index, integer, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import type { Condition, Prerequisite, Rule, Variant } from "../../evaluation/types";

/**
 * A JSON column: `json`, not `jsonb`. `jsonb` normalises objects (keys reordered by length then
 * bytes, duplicates dropped), so a record read back would answer its keys in another order than
 * it was written and than SQLite (which keeps the text) answers them: API answers, ETags (hashes
 * of the record as answered) and `diff`s (compared as JSON text) would differ by backend. `json`
 * keeps the text as written. Not drizzle's own `json`/`jsonb`: with Bun's driver it stringifies
 * the value and Bun encodes that string again, storing a JSON *string*, and Bun refuses a bare
 * boolean for a JSON parameter. So the JSON text is sent as text and cast: every value (object,
 * array, string, boolean, number) is stored as the JSON it is, and Bun hands it back parsed.
 * Queries into it use the `json_*` functions (or cast to jsonb where an operator needs it).
 */
const json = <T>(name: string) =>
  customType<{ data: T; driverData: unknown }>({
    dataType: () => "json",
    toDriver: (value) => sql`${JSON.stringify(value)}::text::json`,
    fromDriver: (value) => value as T,
  })(name);

/** Creation order (docs/architecture.md, Storage: explicit order), from an identity. */
const seq = () => integer("seq").notNull().generatedByDefaultAsIdentity();
/** A change-log position. */
const position = (name: string) => bigint(name, { mode: "number" });

export const projects = pgTable("projects", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
  staleAfterDays: integer("stale_after_days").notNull().default(30),
});

export const environments = pgTable(
  "environments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    slug: text("slug").notNull(),
    name: text("name").notNull(),
    createdAt: text("created_at").notNull(),
    seq: seq(),
  },
  (table) => [uniqueIndex("environments_project_slug").on(table.projectId, table.slug), index("environments_project_seq").on(table.projectId, table.seq)],
);

export const settings = pgTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
});

export const users = pgTable("users", {
  id: text("id").primaryKey(),
  email: text("email").notNull().unique(),
  passwordHash: text("password_hash").notNull(),
  role: text("role", { enum: ["admin", "editor", "viewer"] }).notNull(),
  tokensValidAfter: text("tokens_valid_after"),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

export const adminKeys = pgTable("admin_keys", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  keyHash: text("key_hash").notNull().unique(),
  keyPrefix: text("key_prefix").notNull(),
  createdAt: text("created_at").notNull(),
  seq: seq(),
  lastUsedAt: text("last_used_at"),
});

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    environmentId: text("environment_id")
      .notNull()
      .references(() => environments.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    scope: text("scope", { enum: ["eval", "test", "mgmt", "full", "client"] }).notNull(),
    keyHash: text("key_hash").notNull().unique(),
    keyPrefix: text("key_prefix").notNull(),
    previousHash: text("previous_hash"),
    previousExpiresAt: text("previous_expires_at"),
    createdAt: text("created_at").notNull(),
    seq: seq(),
    lastUsedAt: text("last_used_at"),
  },
  (table) => [index("api_keys_project").on(table.projectId), index("api_keys_environment").on(table.environmentId)],
);

export const revokedTokens = pgTable("revoked_tokens", {
  jti: text("jti").primaryKey(),
  expiresAt: text("expires_at").notNull(),
});

export const flags = pgTable(
  "flags",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    variants: json<Variant[]>("variants").notNull(),
    rules: json<Rule[]>("rules").notNull(),
    bucketBy: text("bucket_by"),
    prerequisites: json<Prerequisite[]>("prerequisites"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [uniqueIndex("flags_project_key").on(table.projectId, table.key)],
);

export const segments = pgTable(
  "segments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    conditions: json<Condition[]>("conditions").notNull(),
    included: json<string[]>("included").notNull(),
    excluded: json<string[]>("excluded").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [uniqueIndex("segments_project_key").on(table.projectId, table.key)],
);

/** A row of one flag in one environment: gone with either (flag states, insights). */
const flagInEnvironment = () => ({
  flagId: text("flag_id")
    .notNull()
    .references(() => flags.id, { onDelete: "cascade" }),
  environmentId: text("environment_id")
    .notNull()
    .references(() => environments.id, { onDelete: "cascade" }),
});

export const flagStates = pgTable(
  "flag_states",
  {
    ...flagInEnvironment(),
    enabled: boolean("enabled").notNull(),
    rolloutPercentage: doublePrecision("rollout_percentage"),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.flagId, table.environmentId] }), index("flag_states_environment").on(table.environmentId)],
);

export const testSessions = pgTable(
  "test_sessions",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    token: text("token").notNull().unique(),
    label: text("label"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (table) => [index("test_sessions_project").on(table.projectId), index("test_sessions_expires").on(table.expiresAt)],
);

export const sessionOverrides = pgTable(
  "session_overrides",
  {
    sessionId: text("session_id")
      .notNull()
      .references(() => testSessions.id, { onDelete: "cascade" }),
    flagKey: text("flag_key").notNull(),
    value: json<boolean | string>("value").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.sessionId, table.flagKey] })],
);

export const webhooks = pgTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    events: json<string[]>("events").notNull(),
    environments: json<string[]>("environments").notNull(),
    secret: text("secret").notNull(),
    description: text("description"),
    enabled: boolean("enabled").notNull(),
    createdAt: text("created_at").notNull(),
    seq: seq(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("webhooks_project").on(table.projectId)],
);

/** `payload` stays text: it is the exact JSON every delivery sends and signs (jsonb would reformat it). */
export const webhookEvents = pgTable(
  "webhook_events",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    environment: text("environment").notNull(),
    payload: text("payload").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (table) => [index("webhook_events_created").on(table.createdAt)],
);

export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    eventId: text("event_id")
      .notNull()
      .references(() => webhookEvents.id, { onDelete: "cascade" }),
    status: text("status", { enum: ["pending", "succeeded", "failed"] }).notNull(),
    attempts: integer("attempts").notNull(),
    nextAttemptAt: text("next_attempt_at"),
    lastAttemptAt: text("last_attempt_at"),
    responseStatus: integer("response_status"),
    error: text("error"),
    durationMs: integer("duration_ms"),
    redeliveryOf: text("redelivery_of"),
    createdAt: text("created_at").notNull(),
    seq: seq(),
    /**
     * PostgreSQL only: until when a node's claim holds the delivery (its attempt in flight), null
     * once the outcome is stored; no other node takes it meanwhile (src/modules/webhooks/pg-store.ts).
     */
    claimedUntil: text("claimed_until"),
  },
  (table) => [
    index("webhook_deliveries_due").on(table.webhookId, table.status, table.nextAttemptAt, table.id),
    index("webhook_deliveries_event").on(table.eventId),
    index("webhook_deliveries_webhook").on(table.webhookId, table.createdAt),
    index("webhook_deliveries_seq").on(table.seq),
    index("webhook_deliveries_created").on(table.createdAt),
  ],
);

/**
 * The change log (src/db/schema.ts, docs/audit.md). `position`: a bigint identity, taken in the
 * write's transaction; PostgreSQL does not serialise writers, so the change log (src/changes/pg.ts)
 * does what makes positions commit in order. `changes` is json (its keys in the order written).
 */
export const changeLog = pgTable(
  "change_log",
  {
    position: position("position").primaryKey().generatedAlwaysAsIdentity(),
    id: text("id").notNull(),
    at: text("at").notNull(),
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id").notNull(),
    actorLabel: text("actor_label").notNull(),
    requestId: text("request_id"),
    projectId: text("project_id"),
    projectSlug: text("project_slug"),
    environment: text("environment"),
    resourceType: text("resource_type").notNull(),
    resourceId: text("resource_id").notNull(),
    resourceKey: text("resource_key"),
    action: text("action").notNull(),
    changes: json<Record<string, unknown>>("changes").notNull(),
  },
  (table) => [index("change_log_key").on(table.resourceKey, table.position)],
);

export const plugins = pgTable(
  "plugins",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    packageName: text("package_name").notNull(),
    version: text("version").notNull(),
    enabled: boolean("enabled").notNull(),
    status: text("status").notNull(),
    config: json<Record<string, unknown>>("config").notNull(),
    secretKeys: json<string[]>("secret_keys").notNull().default(sql`'[]'::json`),
    errorMessage: text("error_message"),
    eventPosition: position("event_position").notNull().default(0),
    eventsHandled: integer("events_handled").notNull().default(0),
    errors: integer("errors").notNull().default(0),
    lastEventAt: text("last_event_at"),
    evaluationsDropped: integer("evaluations_dropped").notNull().default(0),
    installedAt: text("installed_at").notNull(),
    seq: seq(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("plugins_project").on(table.projectId)],
);

export const pluginDownloads = pgTable("plugin_downloads", {
  packageName: text("package_name").primaryKey(),
  installs: integer("installs").notNull(),
});

/** The change-event queue (src/db/schema.ts). `payload` stays text: the exact webhook payload. */
export const changeEvents = pgTable(
  "change_events",
  {
    position: position("position").primaryKey().generatedAlwaysAsIdentity(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    payload: text("payload").notNull(),
    actor: text("actor").notNull().default("{}"),
  },
  (table) => [index("change_events_project").on(table.projectId, table.position)],
);

export const integrations = pgTable(
  "integrations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    config: json<Record<string, unknown>>("config").notNull(),
    enabled: boolean("enabled").notNull(),
    sent: integer("sent").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    lastError: text("last_error"),
    lastSentAt: text("last_sent_at"),
    eventPosition: position("event_position").notNull().default(0),
    createdAt: text("created_at").notNull(),
    seq: seq(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("integrations_project").on(table.projectId)],
);

export const schedules = pgTable(
  "schedules",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    flagId: text("flag_id").notNull(),
    flagKey: text("flag_key").notNull(),
    environmentId: text("environment_id").notNull(),
    environment: text("environment").notNull(),
    at: text("at").notNull(),
    state: json<{ enabled?: boolean; rolloutPercentage?: number | null }>("state").notNull(),
    status: text("status").notNull(),
    createdByType: text("created_by_type").notNull(),
    createdById: text("created_by_id").notNull(),
    createdByLabel: text("created_by_label").notNull(),
    createdAt: text("created_at").notNull(),
    appliedAt: text("applied_at"),
    error: text("error"),
    /**
     * PostgreSQL only: until when a node's scheduler holds this pending schedule (taken by
     * `due`, src/modules/schedules/pg-store.ts), so that two nodes never apply it both; a node
     * that dies holding it lets it go when this time passes. Never part of a schedule's answer.
     */
    claimedUntil: text("claimed_until"),
  },
  (table) => [index("schedules_status_at").on(table.status, table.at), index("schedules_project_at").on(table.projectId, table.at)],
);

export const flagInsights = pgTable(
  "flag_insights",
  {
    ...flagInEnvironment(),
    day: boolean("day").notNull(),
    /** ms since the epoch */
    bucket: bigint("bucket", { mode: "number" }).notNull(),
    variant: text("variant").notNull(),
    reason: text("reason").notNull(),
    count: bigint("count", { mode: "number" }).notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.flagId, table.environmentId, table.day, table.bucket, table.variant, table.reason] }),
    index("flag_insights_age").on(table.day, table.bucket),
    index("flag_insights_environment").on(table.environmentId),
  ],
);

export const flagLastEvaluated = pgTable(
  "flag_last_evaluated",
  {
    ...flagInEnvironment(),
    /** ms since the epoch */
    at: bigint("at", { mode: "number" }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.flagId, table.environmentId] }), index("flag_last_evaluated_environment").on(table.environmentId)],
);

export const flagStale = pgTable("flag_stale", {
  flagId: text("flag_id")
    .primaryKey()
    .references(() => flags.id, { onDelete: "cascade" }),
  reason: text("reason").notNull(),
  since: text("since").notNull(),
});

/** Failed logins by email (schema.ts: loginFailures): shared by the nodes, so the lockout holds across them. */
export const loginFailures = pgTable(
  "login_failures",
  {
    email: text("email").primaryKey(),
    firstAt: text("first_at").notNull(),
    count: integer("count").notNull(),
  },
  (table) => [index("login_failures_first").on(table.firstAt)],
);

/**
 * PostgreSQL only: one row (id 1) whose `revision` every test-session write moves in its
 * transaction (and announces with NOTIFY flagsvc_test_sessions): what the other nodes compare
 * with theirs each second to catch a notification they missed (src/modules/testing/pg-sync.ts).
 */
export const testSessionRevision = pgTable("test_session_revision", {
  id: integer("id").primaryKey(),
  revision: bigint("revision", { mode: "number" }).notNull(),
});

/** Leases (src/modules/leases/): `expires_at` in ms since the epoch, by the database's clock (one clock for every node). */
export const leases = pgTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: bigint("expires_at", { mode: "number" }).notNull(),
});
