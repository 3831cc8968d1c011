/**
 * The drizzle schema: the one description of every table. Migrations are generated from it
 * with `npm run db:generate` (drizzle-kit) and embedded into the binary (src/db/migrations).
 * Timestamps are ISO 8601 UTC text with milliseconds: readable, and they sort as they compare.
 */
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { Condition, Prerequisite, Rule, Variant } from "../evaluation/types";

export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
  /** Days without evaluations (or with one value served to everyone) after which a flag is stale (docs/insights.md). */
  staleAfterDays: integer("stale_after_days").notNull().default(30),
});

export const environments = sqliteTable(
  "environments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    slug: text("slug").notNull(),
    name: text("name").notNull(),
    createdAt: text("created_at").notNull(),
    /** A project's environments in the order given (at creation) or added: the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
  },
  (table) => [
    uniqueIndex("environments_project_slug").on(table.projectId, table.slug),
    // A project's environments in the order they were added (seq), read by every management
    // request: without it SQLite sorts them in a temporary b-tree (21 us against 7).
    index("environments_project_seq").on(table.projectId, table.seq),
  ],
);

/** Instance-wide settings and markers (bootstrap time, generated secrets), one row per key. */
export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** Login users (decisions §4). Emails are stored lower-case; passwords as argon2id hashes. */
export const users = sqliteTable("users", {
  id: text("id").primaryKey(),
  email: text("email").notNull().unique(),
  passwordHash: text("password_hash").notNull(),
  role: text("role", { enum: ["admin", "editor", "viewer"] }).notNull(),
  /** Login tokens dated (`iat`) before this whole second are refused: set by a password change. */
  tokensValidAfter: text("tokens_valid_after"),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** Instance-wide admin keys `svc_admin_...`, stored only as SHA-256 hashes. */
export const adminKeys = sqliteTable("admin_keys", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  keyHash: text("key_hash").notNull().unique(),
  keyPrefix: text("key_prefix").notNull(),
  createdAt: text("created_at").notNull(),
  /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
  seq: integer("seq").notNull().default(0),
  lastUsedAt: text("last_used_at"),
});

/**
 * Project API keys `svc_sk_{scope}_...`, bound to one project and environment, stored only as
 * SHA-256 hashes. After a rotation with a grace period the previous hash stays valid until
 * `previous_expires_at`. Deleting the environment or project deletes (revokes) the key.
 */
export const apiKeys = sqliteTable(
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
    /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
    lastUsedAt: text("last_used_at"),
  },
  (table) => [index("api_keys_project").on(table.projectId), index("api_keys_environment").on(table.environmentId)],
);

/** Login tokens revoked by logout, kept until they would have expired anyway. */
export const revokedTokens = sqliteTable("revoked_tokens", {
  jti: text("jti").primaryKey(),
  expiresAt: text("expires_at").notNull(),
});

/**
 * Flags (api-spec: Flag; decisions §6). `variants` and `rules` are JSON text, already
 * validated in full by the flags service; rules carry their stable `rule_...` ids.
 */
export const flags = sqliteTable(
  "flags",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    variants: text("variants", { mode: "json" }).notNull().$type<Variant[]>(),
    rules: text("rules", { mode: "json" }).notNull().$type<Rule[]>(),
    /** The attribute rollouts and weights bucket by; null: `userId` (the default, never stored). */
    bucketBy: text("bucket_by"),
    /** The flags that must be met first (docs/targeting.md, Prerequisites); null: none (never stored empty). */
    prerequisites: text("prerequisites", { mode: "json" }).$type<Prerequisite[]>(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [uniqueIndex("flags_project_key").on(table.projectId, table.key)],
);

/**
 * Segments (docs/targeting.md, Segments): reusable sets of users that flag rules name with
 * in_segment/not_in_segment. `conditions`, `included` and `excluded` are JSON text, validated in
 * full by the segments service.
 */
export const segments = sqliteTable(
  "segments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    conditions: text("conditions", { mode: "json" }).notNull().$type<Condition[]>(),
    included: text("included", { mode: "json" }).notNull().$type<string[]>(),
    excluded: text("excluded", { mode: "json" }).notNull().$type<string[]>(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [uniqueIndex("segments_project_key").on(table.projectId, table.key)],
);

/** A flag's state per environment; no row: disabled there. Goes with its flag or environment. */
/** A row of one flag in one environment: gone with either (flag states, insights). */
const flagInEnvironment = () => ({
  flagId: text("flag_id")
    .notNull()
    .references(() => flags.id, { onDelete: "cascade" }),
  environmentId: text("environment_id")
    .notNull()
    .references(() => environments.id, { onDelete: "cascade" }),
});

export const flagStates = sqliteTable(
  "flag_states",
  {
    ...flagInEnvironment(),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    /** 0 to 100 with at most 3 decimals; null: everyone. */
    rolloutPercentage: real("rollout_percentage"),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.flagId, table.environmentId] }), index("flag_states_environment").on(table.environmentId)],
);

/**
 * Test sessions (api-spec: Test session; decisions §8). `token` is what `X-Service-Session`
 * carries: the id itself on CE, a separate random secret on Pro. It is kept in plain text
 * because GET returns it; a session lives at most 24 hours.
 */
export const testSessions = sqliteTable(
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

/** One override of a session: flag key -> boolean or string (JSON text). Goes with its session. */
export const sessionOverrides = sqliteTable(
  "session_overrides",
  {
    sessionId: text("session_id")
      .notNull()
      .references(() => testSessions.id, { onDelete: "cascade" }),
    flagKey: text("flag_key").notNull(),
    value: text("value", { mode: "json" }).notNull().$type<boolean | string>(),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.sessionId, table.flagKey] })],
);

/**
 * Webhooks (decisions §10). `environments`: environment slugs an event must match; an empty
 * array means all. `secret` keys the HMAC signature, so it is kept (never returned).
 */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    events: text("events", { mode: "json" }).notNull().$type<string[]>(),
    environments: text("environments", { mode: "json" }).notNull().$type<string[]>(),
    secret: text("secret").notNull(),
    description: text("description"),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    createdAt: text("created_at").notNull(),
    /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("webhooks_project").on(table.projectId)],
);

/**
 * Events (the outbox): written in the same transaction as the change that causes them.
 * `payload` is the exact JSON text every delivery of the event sends and signs.
 */
export const webhookEvents = sqliteTable(
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

/** One event to one webhook; retried on the schedule until it succeeds or fails for good. */
export const webhookDeliveries = sqliteTable(
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
    /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
  },
  (table) => [
    // The sender's queue, per webhook (DeliveryQueue.due, src/modules/webhooks/store.ts): due order, ids from the index alone.
    index("webhook_deliveries_due").on(table.webhookId, table.status, table.nextAttemptAt, table.id),
    // Retention's "no delivery refers to this event", and the cascade when an event goes.
    index("webhook_deliveries_event").on(table.eventId),
    index("webhook_deliveries_webhook").on(table.webhookId, table.createdAt),
    index("webhook_deliveries_seq").on(table.seq),
    index("webhook_deliveries_created").on(table.createdAt),
  ],
);

/**
 * The change log (docs/audit.md): one entry per resource a write changed, appended in the same
 * transaction as the change. `position` (the rowid) is the order of commit (SQLite serialises
 * writers), so a consumer can ask for "everything after N"; retention never deletes the newest
 * entry, so positions are never reused. `id` is the entry's public, time-ordered id.
 * No foreign key: the history of a deleted project or user stays. `changes` is JSON text with
 * every secret masked before it gets here.
 *
 * One secondary index only: each costs every write a page in the WAL (measured: ~35-60 us a
 * commit here, against a budget of 15 % of a state PUT). A resource's history (`resourceKey`,
 * in a project or instance-wide) uses it; every other read walks the rowid newest first.
 */
export const changeLog = sqliteTable(
  "change_log",
  {
    position: integer("position").primaryKey(),
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
    changes: text("changes").notNull(),
  },
  (table) => [index("change_log_key").on(table.resourceKey, table.position)],
);

/**
 * Installed plugins (decisions §11): one row per install in a project. `enabled` is what the
 * operator asked for (restarts activate the enabled ones again); `status` and `errorMessage`
 * are where the host left it. `config` holds secrets in clear (the plugin needs them): the API,
 * logs and the change log show them as "********". `eventPosition` is the change-log position
 * of the last change handed to the plugin's `onEvent` (at least once across restarts).
 * `secretKeys` are the config keys ever stored while the plugin's package marked them secret:
 * they stay masked whatever a later version's schema says.
 */
export const plugins = sqliteTable(
  "plugins",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    packageName: text("package_name").notNull(),
    version: text("version").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    status: text("status").notNull(),
    config: text("config", { mode: "json" }).notNull().$type<Record<string, unknown>>(),
    secretKeys: text("secret_keys", { mode: "json" }).notNull().default([]).$type<string[]>(),
    errorMessage: text("error_message"),
    eventPosition: integer("event_position").notNull().default(0),
    eventsHandled: integer("events_handled").notNull().default(0),
    errors: integer("errors").notNull().default(0),
    lastEventAt: text("last_event_at"),
    evaluationsDropped: integer("evaluations_dropped").notNull().default(0),
    installedAt: text("installed_at").notNull(),
    /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("plugins_project").on(table.projectId)],
);

/** `downloads` of the marketplace: installs of each package on this instance, removed ones included. */
export const pluginDownloads = sqliteTable("plugin_downloads", {
  packageName: text("package_name").primaryKey(),
  installs: integer("installs").notNull(),
});

/**
 * The change-event queue: the webhook payload (decisions §10) of each flag change of a project
 * with an enabled plugin or integration, and who made it (the change log's actor), stored in
 * the transaction of the change (at least once across restarts). `position` (AUTOINCREMENT:
 * never reused) orders it; each reader (a plugin, an integration) stores how far it has been
 * handed (`event_position`); rows every reader of the project is past are pruned.
 */
export const changeEvents = sqliteTable(
  "change_events",
  {
    position: integer("position").primaryKey({ autoIncrement: true }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    payload: text("payload").notNull(),
    /** `{ type, id, label }` of the change log's actor, as JSON. */
    actor: text("actor").notNull().default("{}"),
  },
  (table) => [index("change_events_project").on(table.projectId, table.position)],
);

/**
 * Integrations (Pro; decisions §12): one managed connector per row. `config` holds secrets in
 * clear (the sender needs them); the API and the change log mask them. `stats` count events the
 * vendor accepted. `eventPosition`: how far its flag changes have been sent (at least once).
 */
export const integrations = sqliteTable(
  "integrations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    config: text("config", { mode: "json" }).notNull().$type<Record<string, unknown>>(),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    sent: integer("sent").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    lastError: text("last_error"),
    lastSentAt: text("last_sent_at"),
    eventPosition: integer("event_position").notNull().default(0),
    createdAt: text("created_at").notNull(),
    /** Creation order (docs/architecture.md, Storage: explicit order): the store writes max + 1. */
    seq: integer("seq").notNull().default(0),
    updatedAt: text("updated_at").notNull(),
  },
  (table) => [index("integrations_project").on(table.projectId)],
);

/**
 * Scheduled changes of a flag's state (docs/targeting.md, "Scheduled changes"). `state` is the
 * partial state to PUT at `at` (ISO UTC, so the text sorts as the time); `status` is pending,
 * applied, failed or cancelled. The flag and environment are kept by id without a foreign key:
 * a schedule outlives them and fails at its time (`error`). It goes with its project. The
 * creator (`created_by_*`) is the actor of the change it applies.
 */
export const schedules = sqliteTable(
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
    state: text("state", { mode: "json" }).notNull().$type<{ enabled?: boolean; rolloutPercentage?: number | null }>(),
    status: text("status").notNull(),
    createdByType: text("created_by_type").notNull(),
    createdById: text("created_by_id").notNull(),
    createdByLabel: text("created_by_label").notNull(),
    createdAt: text("created_at").notNull(),
    appliedAt: text("applied_at"),
    error: text("error"),
  },
  (table) => [index("schedules_status_at").on(table.status, table.at), index("schedules_project_at").on(table.projectId, table.at)],
);

/**
 * Evaluation insights (docs/insights.md): counts per flag, environment, bucket, variant label
 * and reason, written by the flusher in one batch per flush (adding to the row). Hourly buckets
 * (`day` 0) are kept 30 days, then rolled into daily ones (`day` 1), kept a year. `bucket`: the
 * bucket's start, ms since the epoch (UTC hour or day).
 */
export const flagInsights = sqliteTable(
  "flag_insights",
  {
    ...flagInEnvironment(),
    day: integer("day", { mode: "boolean" }).notNull(),
    bucket: integer("bucket").notNull(),
    variant: text("variant").notNull(),
    reason: text("reason").notNull(),
    count: integer("count").notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.flagId, table.environmentId, table.day, table.bucket, table.variant, table.reason] }),
    // The rollup and the retention read by granularity and age.
    index("flag_insights_age").on(table.day, table.bucket),
    index("flag_insights_environment").on(table.environmentId),
  ],
);

/** When a flag was last evaluated in an environment by production traffic (never a test-session override). */
export const flagLastEvaluated = sqliteTable(
  "flag_last_evaluated",
  {
    ...flagInEnvironment(),
    /** ms since the epoch */
    at: integer("at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.flagId, table.environmentId] }), index("flag_last_evaluated_environment").on(table.environmentId)],
);

/** A stale flag (docs/insights.md, Stale flags): set and cleared by the detection job; its flag.stale event went out when the row was made. */
export const flagStale = sqliteTable("flag_stale", {
  flagId: text("flag_id")
    .primaryKey()
    .references(() => flags.id, { onDelete: "cascade" }),
  /** not_evaluated | fully_rolled_out */
  reason: text("reason").notNull(),
  /** ISO 8601: when the flag became stale. */
  since: text("since").notNull(),
});

/**
 * Failed logins by email (decisions §4, the lockout): the first failure of the current window
 * and how many since. In the database rather than in memory so that the nodes sharing one
 * database lock an email together (docs/scaling.md); a success deletes the row, and rows whose
 * window has ended are pruned hourly.
 */
export const loginFailures = sqliteTable(
  "login_failures",
  {
    email: text("email").primaryKey(),
    firstAt: text("first_at").notNull(),
    count: integer("count").notNull(),
  },
  (table) => [index("login_failures_first").on(table.firstAt)],
);

/**
 * Leases (src/modules/leases/): which node runs a piece of background work that must run on one
 * node at a time (`plugin:<id>`, `integration:<id>`). `holder` is the node's id (generated at
 * each start); `expires_at` in ms since the epoch. On SQLite the one process is granted every lease.
 */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: integer("expires_at").notNull(),
});
