/**
 * Webhooks and their delivery log (decisions §10). The secret is stored to sign deliveries and
 * never leaves this module in a record, a log line or a change-log entry (`"********"` there).
 * Routes without a project in the path (`/v1/webhooks/{id}`, deliveries, redeliver) check the
 * caller's project here, as the API-key routes do: unknown id 404, an API key of another
 * project 403.
 *
 * Webhook writes commit with their change-log entry (a PATCH that changes nothing appends
 * none); the outbox, a subscriber, wakes the sender when a PATCH enables a webhook again.
 * Redeliver and attempt-now are delivery operations, not changes of a resource: no entry, and
 * they wake the sender themselves.
 */
import { diff, whole, type Author, type ChangeDraft, type Changes } from "../../changes/entry";
import { MESSAGES, type Principal } from "../../http/access";
import { conflict, forbidden, notFound, validationError, type ErrorDetail } from "../../http/errors";
import { iso, type Clock } from "../../lib/clock";
import { newId } from "../../lib/ids";
import type { Scheduler } from "../../lib/scheduler";
import { checkUrl, type OutboundPolicy } from "../../lib/outbound";
import { requireProject } from "../projects/service";
import type { Project, ProjectReader } from "../projects/store";
import type { Deliveries } from "./dispatcher";
import type { DeliveryStatus, EventName } from "./model";
import { recordOf, type DeliveryRecord, type StoredWebhook, type WebhookRecord, type WebhookStore } from "./store";

export type { DeliveryRecord, WebhookRecord } from "./store";

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
function checkInput(outbound: OutboundPolicy, project: Project, input: { url?: string; events?: string[]; environments?: string[] }): void {
  const details: ErrorDetail[] = [];
  if (input.url !== undefined) {
    const problem = checkUrl(input.url, outbound);
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

// ---- change-log entries ------------------------------------------------------------------

/** The fields of an entry: the record as the API answers it, with the secret, which `diff` and `whole` mask. */
const fieldsOf = (w: StoredWebhook) => ({ ...recordOf(w), secret: w.secret });
const SECRETS = ["secret"] as const;

/**
 * A webhook's entry: no resource key (its URL may carry a token, and is no name); no
 * environment (its `environments` filter is one of its fields).
 */
function webhookChange(webhook: StoredWebhook, action: ChangeDraft["action"], changes: Changes): ChangeDraft {
  return { project: { id: webhook.projectId, slug: webhook.projectSlug }, environment: null, resource: { type: "webhook", id: webhook.id, key: null }, action, changes };
}

// ---- the service -------------------------------------------------------------------------

export interface WebhookServiceDeps {
  webhooks: WebhookStore;
  projects: ProjectReader;
  clock: Clock;
  /** SVC_OUTBOUND_ALLOWED_HOSTS: what a registered URL may name. */
  outbound: OutboundPolicy;
  /** The sender: redeliver and attempt-now wake it for their webhook. */
  deliveries: Pick<Deliveries, "kick">;
}

export type WebhookService = ReturnType<typeof webhookService>;

export function webhookService({ webhooks, projects, clock, outbound, deliveries }: WebhookServiceDeps) {
  /** The webhook behind `/v1/webhooks/{id}`: unknown 404; an API key of another project 403. */
  const webhookIn = (principal: Principal, webhookId: string, webhook: StoredWebhook | undefined): StoredWebhook => {
    if (!webhook) throw notFound(`Webhook ${webhookId}`);
    if (principal.kind === "apiKey" && principal.projectId !== webhook.projectId) throw forbidden(MESSAGES.otherProject);
    return webhook;
  };
  const requireWebhook = async (principal: Principal, webhookId: string) => webhookIn(principal, webhookId, await webhooks.find(webhookId));

  return {
    /** GET /v1/projects/{slug}/webhooks: oldest first. */
    async list(slug: string): Promise<WebhookRecord[]> {
      return webhooks.list((await requireProject(projects, slug)).id);
    },

    /** POST /v1/projects/{slug}/webhooks. The guard has already matched an API key's project to `slug`. */
    async create(author: Author, slug: string, input: NewWebhookInput): Promise<WebhookRecord> {
      const project = await requireProject(projects, slug);
      checkInput(outbound, project, input);
      const now = iso(clock.now());
      const webhook: StoredWebhook = {
        id: newId("wh"),
        projectSlug: project.slug,
        url: input.url,
        events: input.events,
        environments: input.environments ?? [],
        description: input.description ?? null,
        enabled: input.enabled ?? true,
        createdAt: now,
        updatedAt: now,
        projectId: project.id,
        secret: input.secret,
      };
      await webhooks.create(author, webhook, webhookChange(webhook, "created", whole(fieldsOf(webhook), "created", SECRETS)));
      return recordOf(webhook);
    },

    get: async (principal: Principal, webhookId: string): Promise<WebhookRecord> => recordOf(await requireWebhook(principal, webhookId)),

    /**
     * PATCH /v1/webhooks/{id}: the fields sent replace the stored ones; `updatedAt` moves only
     * when something changed. Pending deliveries use the webhook as it is when they are attempted
     * (new URL, new secret); enabling it again resumes its pending deliveries at once (the outbox
     * wakes the sender on the entry). The entry's action is `updated` whatever changed,
     * `enabled` included (decisions: Webhooks).
     */
    async update(author: Author, principal: Principal, webhookId: string, patch: WebhookPatchInput): Promise<WebhookRecord> {
      const found = await requireWebhook(principal, webhookId);
      checkInput(outbound, await requireProject(projects, found.projectSlug), patch);
      const updated = await webhooks.update(author, webhookId, (stored) => {
        const current = webhookIn(principal, webhookId, stored);
        const next: StoredWebhook = {
          ...current,
          url: patch.url ?? current.url,
          events: patch.events ?? current.events,
          environments: patch.environments ?? current.environments,
          secret: patch.secret ?? current.secret,
          description: patch.description === undefined ? current.description : patch.description,
          enabled: patch.enabled ?? current.enabled,
        };
        const changes = diff(fieldsOf(current), fieldsOf(next), { secrets: SECRETS });
        if (Object.keys(changes).length === 0) return { result: current, changes: [] };
        next.updatedAt = iso(clock.now());
        return { result: next, changes: [webhookChange(next, "updated", changes)] };
      });
      return recordOf(updated);
    },

    /** DELETE /v1/webhooks/{id}: with its deliveries (an attempt in flight finishes unrecorded). */
    async delete(author: Author, principal: Principal, webhookId: string): Promise<void> {
      await webhooks.remove(author, webhookId, (stored) => {
        const webhook = webhookIn(principal, webhookId, stored);
        return webhookChange(webhook, "deleted", whole(fieldsOf(webhook), "deleted", SECRETS));
      });
    },

    /** GET /v1/webhooks/{id}/deliveries: newest first, `limit` (default 20), optional `status`. */
    async listDeliveries(principal: Principal, webhookId: string, query: { limit?: number; status?: DeliveryStatus }): Promise<DeliveryRecord[]> {
      await requireWebhook(principal, webhookId);
      return webhooks.deliveries(webhookId, { limit: query.limit ?? 20, status: query.status });
    },

    /**
     * POST /v1/webhook-deliveries/{id}/redeliver: a new pending delivery of the same event to the
     * same webhook (same id and payload text), due at once, with `redeliveryOf` set. The original
     * keeps its state. 409 while the original is pending (it will be attempted anyway) or while
     * the webhook is disabled (nothing would be sent).
     */
    async redeliver(principal: Principal, deliveryId: string): Promise<DeliveryRecord> {
      const record = await webhooks.redeliver(deliveryId, (original, stored) => {
        if (!original) throw notFound(`Delivery ${deliveryId}`);
        const webhook = webhookIn(principal, original.webhookId, stored);
        if (original.status === "pending") throw conflict(`Delivery ${deliveryId} is still pending: it will be attempted again on its schedule`);
        if (!webhook.enabled) throw conflict(`Webhook ${webhook.id} is disabled: enable it before redelivering`);
        return iso(clock.now());
      });
      void deliveries.kick([record.webhookId]);
      return record;
    },

    /**
     * POST /v1/webhook-deliveries/{id}/attempt-now: a pending delivery waiting for a retry becomes
     * due now (`nextAttemptAt` = now) and the sender is woken as for a new delivery. The attempt is
     * the delivery's next one on its schedule: it counts in `attempts`, and a failure schedules the
     * following retry by the delays, from this attempt. One already due (its attempt in flight, or
     * about to start: the sender holds a delivery from its start until its outcome is stored, and
     * only due deliveries are started) is answered as it is, and attempted once. 409 when it is not
     * pending (a failed one may be redelivered) or while the webhook is disabled.
     */
    async attemptNow(principal: Principal, deliveryId: string): Promise<DeliveryRecord> {
      const record = await webhooks.attemptNow(deliveryId, (delivery, stored) => {
        if (!delivery) throw notFound(`Delivery ${deliveryId}`);
        const webhook = webhookIn(principal, delivery.webhookId, stored);
        if (delivery.status === "failed") {
          throw conflict(`Delivery ${deliveryId} has failed and is not attempted again: redeliver it (POST /v1/webhook-deliveries/${deliveryId}/redeliver)`);
        }
        if (delivery.status === "succeeded") throw conflict(`Delivery ${deliveryId} has succeeded: nothing is left to attempt`);
        if (!webhook.enabled) throw conflict(`Webhook ${webhook.id} is disabled: enable it to resume its pending deliveries`);
        const now = iso(clock.now());
        return delivery.nextAttemptAt !== null && delivery.nextAttemptAt <= now ? null : now; // null: due already
      });
      void deliveries.kick([record.webhookId]);
      return record;
    },
  };
}

/**
 * The server's webhook jobs: a pass over due deliveries every second (retries; the first
 * attempt is kicked by the write itself), the retention clean-up daily at 03:41, and a pass
 * right away for deliveries that came due while the process was down.
 */
export function scheduleWebhookJobs({ scheduler, deliveries }: { scheduler: Scheduler; deliveries: Deliveries }): void {
  scheduler.every("webhook-deliveries", "* * * * * *", () => deliveries.kick());
  scheduler.every("webhook-retention", "0 41 3 * * *", () => deliveries.prune(), { oneNode: true });
  deliveries.kick();
}
