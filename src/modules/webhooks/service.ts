/**
 * Webhooks and their delivery log (decisions §10). The secret is stored to sign deliveries and
 * never leaves this module in a record or a log line. Routes without a project in the path
 * (`/v1/webhooks/{id}`, deliveries, redeliver) check the caller's project here, as the API-key
 * routes do: unknown id 404, an API key of another project 403.
 */
import { and, asc, desc, eq, sql } from "drizzle-orm";
import type { AppContext } from "../../context";
import { transaction } from "../../db/client";
import { projects, webhookDeliveries, webhookEvents, webhooks } from "../../db/schema";
import { MESSAGES, type Principal } from "../../http/access";
import { conflict, forbidden, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { iso } from "../../lib/clock";
import { newId } from "../../lib/ids";
import { checkUrl, OutboundPolicy } from "../../lib/outbound";
import { requireProjectNow, type Project } from "../projects/service";
import { newDelivery } from "./events";
import type { DeliveryStatus, EventName } from "./model";

export interface WebhookRecord {
  id: string;
  projectSlug: string;
  url: string;
  events: string[];
  environments: string[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface DeliveryRecord {
  id: string;
  webhookId: string;
  eventId: string;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  responseStatus: number | null;
  error: string | null;
  durationMs: number | null;
  redeliveryOf: string | null;
  createdAt: string;
}

export interface NewWebhookInput {
  url: string;
  events: EventName[];
  secret: string;
  environments?: string[];
  description?: string;
  enabled?: boolean;
}

export interface WebhookPatchInput {
  url?: string;
  events?: EventName[];
  secret?: string;
  environments?: string[];
  description?: string | null;
  enabled?: boolean;
}

// ---- validation --------------------------------------------------------------------------

/** What the schema cannot check: the URL against the outbound policy, repeats, environments of the project. */
function checkInput(ctx: AppContext, project: Project, input: { url?: string; events?: string[]; environments?: string[] }): void {
  const details: ErrorDetail[] = [];
  if (input.url !== undefined) {
    const problem = checkUrl(input.url, new OutboundPolicy(ctx.config.outboundAllowedHosts));
    if (problem) details.push({ path: "body.url", message: problem });
  }
  const repeats = (list: readonly string[], path: string, what: string) =>
    list.forEach((v, i) => {
      if (list.indexOf(v) !== i) details.push({ path: `${path}[${i}]`, message: `Duplicate ${what} ${v}` });
    });
  if (input.events) repeats(input.events, "body.events", "event");
  if (input.environments) {
    repeats(input.environments, "body.environments", "environment");
    input.environments.forEach((slug, i) => {
      if (!project.environments.some((e) => e.slug === slug)) {
        details.push({ path: `body.environments[${i}]`, message: `Project ${project.slug} has no environment ${slug}` });
      }
    });
  }
  if (details.length > 0) throw validationError("Invalid webhook", details);
}

// ---- webhooks ----------------------------------------------------------------------------

const WEBHOOK_COLUMNS = {
  id: webhooks.id,
  projectId: webhooks.projectId,
  projectSlug: projects.slug,
  url: webhooks.url,
  events: webhooks.events,
  environments: webhooks.environments,
  secret: webhooks.secret,
  description: webhooks.description,
  enabled: webhooks.enabled,
  createdAt: webhooks.createdAt,
  updatedAt: webhooks.updatedAt,
};

interface WebhookRow extends WebhookRecord {
  projectId: string;
  secret: string;
}

const selectWebhooks = (ctx: AppContext) => ctx.db.select(WEBHOOK_COLUMNS).from(webhooks).innerJoin(projects, eq(projects.id, webhooks.projectId));

/** The record: everything but the project id and the secret. */
function toRecord(row: WebhookRow): WebhookRecord {
  const { projectId: _p, secret: _s, ...record } = row;
  return record;
}

/** The webhook behind `/v1/webhooks/{id}`: unknown 404; an API key of another project 403. */
function requireWebhook(ctx: AppContext, principal: Principal, webhookId: string): WebhookRow {
  const row = selectWebhooks(ctx).where(eq(webhooks.id, webhookId)).get();
  if (!row) throw notFound(`Webhook ${webhookId}`);
  if (principal.kind === "apiKey" && principal.projectId !== row.projectId) throw forbidden(MESSAGES.otherProject);
  return row;
}

/** GET /v1/projects/{slug}/webhooks: oldest first. */
export function listWebhooks(ctx: AppContext, slug: string): WebhookRecord[] {
  const project = requireProjectNow(ctx, slug);
  return selectWebhooks(ctx)
    .where(eq(webhooks.projectId, project.id))
    .orderBy(asc(webhooks.createdAt), sql`${webhooks}.rowid`)
    .all()
    .map(toRecord);
}

/** POST /v1/projects/{slug}/webhooks. The guard has already matched an API key's project to `slug`. */
export function createWebhook(ctx: AppContext, slug: string, input: NewWebhookInput): WebhookRecord {
  const project = requireProjectNow(ctx, slug);
  checkInput(ctx, project, input);
  const now = iso(ctx.clock.now());
  const row = {
    id: newId("wh"),
    projectId: project.id,
    url: input.url,
    events: input.events,
    environments: input.environments ?? [],
    secret: input.secret,
    description: input.description ?? null,
    enabled: input.enabled ?? true,
    createdAt: now,
    updatedAt: now,
  };
  ctx.db.insert(webhooks).values(row).run();
  const { id, ...rest } = row;
  return toRecord({ id, projectSlug: project.slug, ...rest }); // the record's key order, as GET
}

export function getWebhook(ctx: AppContext, principal: Principal, webhookId: string): WebhookRecord {
  return toRecord(requireWebhook(ctx, principal, webhookId));
}

/**
 * PATCH /v1/webhooks/{id}: the fields sent replace the stored ones; `updatedAt` moves only
 * when something changed. Pending deliveries use the webhook as it is when they are attempted
 * (new URL, new secret); enabling it again resumes its pending deliveries at once.
 */
export function updateWebhook(ctx: AppContext, principal: Principal, webhookId: string, patch: WebhookPatchInput): WebhookRecord {
  const current = requireWebhook(ctx, principal, webhookId);
  checkInput(ctx, requireProjectNow(ctx, current.projectSlug), patch);
  const next: WebhookRow = {
    ...current,
    url: patch.url ?? current.url,
    events: patch.events ?? current.events,
    environments: patch.environments ?? current.environments,
    secret: patch.secret ?? current.secret,
    description: patch.description === undefined ? current.description : patch.description,
    enabled: patch.enabled ?? current.enabled,
  };
  if (JSON.stringify(next) === JSON.stringify(current)) return toRecord(current);
  next.updatedAt = iso(ctx.clock.now());
  const { url, events, environments, secret, description, enabled, updatedAt } = next;
  ctx.db.update(webhooks).set({ url, events, environments, secret, description, enabled, updatedAt }).where(eq(webhooks.id, webhookId)).run();
  if (enabled && !current.enabled) ctx.deliveries.kick([webhookId]);
  return toRecord(next);
}

/** DELETE /v1/webhooks/{id}: with its deliveries (an attempt in flight finishes unrecorded). */
export function deleteWebhook(ctx: AppContext, principal: Principal, webhookId: string): void {
  transaction(ctx, () => {
    requireWebhook(ctx, principal, webhookId);
    ctx.db.delete(webhooks).where(eq(webhooks.id, webhookId)).run();
  });
}

// ---- deliveries --------------------------------------------------------------------------

const DELIVERY_COLUMNS = {
  id: webhookDeliveries.id,
  webhookId: webhookDeliveries.webhookId,
  eventId: webhookDeliveries.eventId,
  event: webhookEvents.event,
  status: webhookDeliveries.status,
  attempts: webhookDeliveries.attempts,
  nextAttemptAt: webhookDeliveries.nextAttemptAt,
  lastAttemptAt: webhookDeliveries.lastAttemptAt,
  responseStatus: webhookDeliveries.responseStatus,
  error: webhookDeliveries.error,
  durationMs: webhookDeliveries.durationMs,
  redeliveryOf: webhookDeliveries.redeliveryOf,
  createdAt: webhookDeliveries.createdAt,
};

const selectDeliveries = (ctx: AppContext) =>
  ctx.db.select(DELIVERY_COLUMNS).from(webhookDeliveries).innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId));

/** GET /v1/webhooks/{id}/deliveries: newest first, `limit` (default 20), optional `status`. */
export function listDeliveries(ctx: AppContext, principal: Principal, webhookId: string, query: { limit?: number; status?: DeliveryStatus }): DeliveryRecord[] {
  requireWebhook(ctx, principal, webhookId);
  const where = [eq(webhookDeliveries.webhookId, webhookId)];
  if (query.status) where.push(eq(webhookDeliveries.status, query.status));
  return selectDeliveries(ctx)
    .where(and(...where))
    .orderBy(desc(webhookDeliveries.createdAt), desc(sql`${webhookDeliveries}.rowid`))
    .limit(query.limit ?? 20)
    .all();
}

/**
 * POST /v1/webhook-deliveries/{id}/redeliver: a new pending delivery of the same event to the
 * same webhook (same id and payload text), due at once, with `redeliveryOf` set. The original
 * keeps its state. 409 while the original is pending (it will be attempted anyway) or while
 * the webhook is disabled (nothing would be sent).
 */
export function redeliver(ctx: AppContext, principal: Principal, deliveryId: string): DeliveryRecord {
  const record = transaction(ctx, () => {
    const original = ctx.db
      .select({ webhookId: webhookDeliveries.webhookId, eventId: webhookDeliveries.eventId, status: webhookDeliveries.status })
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.id, deliveryId))
      .get();
    if (!original) throw notFound(`Delivery ${deliveryId}`);
    const webhook = requireWebhook(ctx, principal, original.webhookId);
    if (original.status === "pending") throw conflict(`Delivery ${deliveryId} is still pending: it will be attempted again on its schedule`);
    if (!webhook.enabled) throw conflict(`Webhook ${webhook.id} is disabled: enable it before redelivering`);
    const row = newDelivery(webhook.id, original.eventId, iso(ctx.clock.now()), deliveryId);
    ctx.db.insert(webhookDeliveries).values(row).run();
    return selectDeliveries(ctx).where(eq(webhookDeliveries.id, row.id)).get()!;
  });
  ctx.deliveries.kick([record.webhookId]);
  return record;
}

/**
 * POST /v1/webhook-deliveries/{id}/attempt-now: a pending delivery waiting for a retry becomes
 * due now (`nextAttemptAt` = now) and the sender is woken as for a new delivery. The attempt is
 * the delivery's next one on its schedule: it counts in `attempts`, and a failure schedules the
 * following retry by the delays, from this attempt. One already due (its attempt in flight, or
 * about to start: the sender holds a delivery from its start until its outcome is stored, and
 * only due deliveries are started) is answered as it is, and attempted once. 409 when it is not
 * pending (a failed one may be redelivered) or while the webhook is disabled.
 */
export function attemptNow(ctx: AppContext, principal: Principal, deliveryId: string): DeliveryRecord {
  const record = transaction(ctx, () => {
    const delivery = selectDeliveries(ctx).where(eq(webhookDeliveries.id, deliveryId)).get();
    if (!delivery) throw notFound(`Delivery ${deliveryId}`);
    const webhook = requireWebhook(ctx, principal, delivery.webhookId);
    if (delivery.status === "failed") {
      throw conflict(`Delivery ${deliveryId} has failed and is not attempted again: redeliver it (POST /v1/webhook-deliveries/${deliveryId}/redeliver)`);
    }
    if (delivery.status === "succeeded") throw conflict(`Delivery ${deliveryId} has succeeded: nothing is left to attempt`);
    if (!webhook.enabled) throw conflict(`Webhook ${webhook.id} is disabled: enable it to resume its pending deliveries`);
    const now = iso(ctx.clock.now());
    if (delivery.nextAttemptAt !== null && delivery.nextAttemptAt <= now) return delivery; // due already
    ctx.db.update(webhookDeliveries).set({ nextAttemptAt: now }).where(eq(webhookDeliveries.id, deliveryId)).run();
    return { ...delivery, nextAttemptAt: now };
  });
  ctx.deliveries.kick([record.webhookId]);
  return record;
}

/**
 * The server's webhook jobs: a pass over due deliveries every second (retries; the first
 * attempt is kicked by the write itself), the retention clean-up daily at 03:41, and a pass
 * right away for deliveries that came due while the process was down.
 */
export function scheduleWebhookJobs(ctx: AppContext): void {
  ctx.scheduler.every("webhook-deliveries", "* * * * * *", () => ctx.deliveries.kick());
  ctx.scheduler.every("webhook-retention", "0 41 3 * * *", () => ctx.deliveries.prune());
  ctx.deliveries.kick();
}
