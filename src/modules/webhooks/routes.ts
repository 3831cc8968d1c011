/** Webhooks and their delivery log: routes (api-spec: Webhooks; decisions §10). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent, queryInt } from "../../http/schema";
import { ProjectParams } from "../projects/model";
import {
  Delivery,
  DELIVERY_LIMIT_MAX,
  DeliveryList,
  DeliveryParams,
  DeliveryQuery,
  EVENT_NAMES,
  NewWebhook,
  SECRET_MAX,
  SECRET_MIN,
  Webhook,
  WebhookList,
  WebhookParams,
  WebhookPatch,
} from "./model";
import type { WebhookService } from "./service";

const TAGS = ["Webhooks"];
const WHO =
  "Who: admin keys, API keys of scope mgmt or full (their own project only: another project's webhook or delivery is 403 FORBIDDEN), login JWTs of role admin or editor.";
const FIELDS = `\`url\` http or https (no credentials in it; a literal address that SVC_OUTBOUND_ALLOWED_HOSTS refuses, e.g. 127.0.0.1 under the default \`external\`, is a 400; host names are checked when a delivery is sent); \`events\` a non-empty list of distinct names among ${EVENT_NAMES.join(", ")}; \`secret\` ${SECRET_MIN} to ${SECRET_MAX} characters, never returned; \`environments\` distinct slugs of environments of the project (an unknown one is a 400), empty or omitted = every environment, including ones added later; \`description\` up to 2,000 characters; \`enabled\` (default true): a disabled webhook gets no new deliveries and its pending ones wait until it is enabled again.`;
const EVENTS = "Events: creating a flag emits flag.created, a PATCH that changes it flag.updated, deleting it flag.deleted, each once per environment of the project with that environment's state (previousState = currentState for created and updated; currentState.enabled false for deleted); a state PUT that turns enabled on emits flag.enabled, off flag.disabled (also when the rollout changes with it), one that changes only rolloutPercentage flag.updated; a PATCH or PUT that changes nothing emits nothing. Payload `{ id: \"evt_...\", event, projectSlug, environment, timestamp, data: { flagKey, previousState: { enabled }, currentState: { enabled } } }`, the same bytes on every delivery of the event; the flag.updated of a rollout-only state PUT also carries `rolloutPercentage` (a number, or null when unset) in both states, `{ enabled, rolloutPercentage }`, and no other event does.";
const AUDIT = "Recorded in the audit log (docs/audit.md) as one entry of resource `webhook` (no key: a URL can carry a token), the secret always `********` (with `changed: true` when set or replaced); a change of `enabled` is action `updated`; a PATCH that changes nothing and a refused request record nothing.";
const NOT_AUDITED = "Not recorded in the audit log: it changes when a delivery is sent, not a resource; the delivery log is its record.";
const DELIVERY = `Deliveries: a POST of the event's JSON payload with \`Content-Type: application/json\`, \`X-Service-Signature: sha256=<hex HMAC-SHA256 of the body keyed with the secret>\`, \`X-Service-Event\`, \`X-Service-Delivery\` (the delivery id), \`User-Agent: flagsvc-webhooks/VERSION\`. Success: a 2xx within SVC_WEBHOOK_TIMEOUT_MS; redirects are not followed. Retries after SVC_WEBHOOK_RETRY_DELAYS (default 1 min, 5 min, 30 min, 2 h); the 5th failed attempt marks the delivery failed. At-least-once: dedupe by the payload's \`id\`.`;

export const webhooksRoutes = (webhooks: WebhookService) =>
  new Elysia({ name: "flagsvc/webhooks" })
    .use(accessGuard())
    .post("/v1/projects/:slug/webhooks", async ({ params, body, principal, set, status }) => status(201, await webhooks.create(authorOf({ principal, set }), params.slug, body)), {
      access: "webhooks",
      params: ProjectParams,
      body: NewWebhook,
      response: { 201: Webhook },
      detail: {
        tags: TAGS,
        summary: "Register a webhook",
        description: `${FIELDS} Events of flags of this project are delivered from the next change on. ${EVENTS} ${DELIVERY} ${AUDIT} Unknown project 404. ${WHO}`,
      },
    })
    .get("/v1/projects/:slug/webhooks", async ({ params }) => ({ webhooks: await webhooks.list(params.slug) }), {
      access: "webhooks",
      params: ProjectParams,
      response: { 200: WebhookList },
      detail: { tags: TAGS, summary: "List a project's webhooks", description: `Oldest first; never with the secret. Unknown project 404. ${WHO}` },
    })
    .get("/v1/webhooks/:webhookId", ({ principal, params }) => webhooks.get(principal, params.webhookId), {
      access: "webhooks",
      params: WebhookParams,
      response: { 200: Webhook },
      detail: { tags: TAGS, summary: "Get a webhook", description: `Never with the secret. Unknown id 404. ${WHO}` },
    })
    .patch("/v1/webhooks/:webhookId", ({ params, body, principal, set }) => webhooks.update(authorOf({ principal, set }), principal, params.webhookId, body), {
      access: "webhooks",
      params: WebhookParams,
      body: WebhookPatch,
      response: { 200: Webhook },
      detail: {
        tags: TAGS,
        summary: "Update a webhook",
        description: `Any of url, events, secret, environments, description (null clears it), enabled; the fields sent replace the stored ones, with the rules of registration. ${FIELDS} Pending deliveries are sent with the webhook as it is when attempted (new URL, new secret). A PATCH that changes nothing leaves \`updatedAt\` alone. ${AUDIT} Unknown id 404. ${WHO}`,
      },
    })
    .delete(
      "/v1/webhooks/:webhookId",
      async ({ params, principal, set, status }) => {
        await webhooks.delete(authorOf({ principal, set }), principal, params.webhookId);
        return status(204);
      },
      {
        access: "webhooks",
        params: WebhookParams,
        detail: {
          tags: TAGS,
          summary: "Delete a webhook",
          responses: noContent("Deleted, with its deliveries"),
          description: `Permanent; its deliveries (pending ones included) go with it. ${AUDIT} Unknown id 404. ${WHO}`,
        },
      },
    )
    .get("/v1/webhooks/:webhookId/deliveries", async ({ principal, params, query }) => ({ deliveries: await webhooks.listDeliveries(principal, params.webhookId, { ...query, limit: queryInt(query.limit) }) }), {
      access: "webhooks",
      params: WebhookParams,
      query: DeliveryQuery,
      response: { 200: DeliveryList },
      detail: {
        tags: TAGS,
        summary: "List a webhook's deliveries",
        description: `Newest first. \`limit\` 1 to ${DELIVERY_LIMIT_MAX} (default 20); \`status\` pending, succeeded or failed. A delivery is one event to this webhook: \`attempts\` so far (at most 5), \`nextAttemptAt\` while pending, and of the last attempt \`lastAttemptAt\`, \`responseStatus\` (null without a response), \`error\` (short text, null on success) and \`durationMs\`. Deliveries are kept 30 days. Unknown id 404. ${WHO}`,
      },
    })
    .post(
      "/v1/webhook-deliveries/:deliveryId/redeliver",
      async ({ principal, params, status }) => status(202, await webhooks.redeliver(principal, params.deliveryId)),
      {
        access: "webhooks",
        params: DeliveryParams,
        response: { 202: Delivery },
        detail: {
          tags: TAGS,
          summary: "Redeliver an event",
          description: `No body. For a failed (or succeeded) delivery: 202 with a new delivery of the same event to the same webhook (same event id, same payload bytes, signed with the webhook's current secret), \`redeliveryOf\` set to the given id, attempted at once and retried on the same schedule. The original delivery keeps its state. 409 CONFLICT when the delivery is still pending (it will be attempted anyway; to attempt it now, see attempt-now) or the webhook is disabled. ${NOT_AUDITED} Unknown id 404. ${WHO}`,
        },
      },
    )
    .post(
      "/v1/webhook-deliveries/:deliveryId/attempt-now",
      async ({ principal, params, status }) => status(202, await webhooks.attemptNow(principal, params.deliveryId)),
      {
        access: "webhooks",
        params: DeliveryParams,
        response: { 202: Delivery },
        detail: {
          tags: TAGS,
          summary: "Attempt a pending delivery now",
          description: `No body. For a pending delivery waiting for a retry: it is attempted now instead of at its \`nextAttemptAt\`. 202 with the same delivery (no new one), \`nextAttemptAt\` set to the time of the request (due now), \`attempts\` and the last attempt's fields as they were; the outcome shows in the delivery list a moment later. The attempt is the delivery's next one on the schedule: it counts in \`attempts\` (5 at most), and if it fails the following retry is due after the schedule's delay for it, counted from this attempt (the attempt that was due later is not made in addition); the failure of the 5th attempt marks it failed. A delivery already due (its attempt in flight or about to start) is answered as it is and attempted once, never twice at the same time. Deliveries already due to the same webhook go first. 409 CONFLICT when the delivery is not pending (failed: redeliver it instead; succeeded: nothing is left to attempt) or the webhook is disabled (its pending deliveries resume when it is enabled). ${NOT_AUDITED} Unknown id 404. ${WHO}`,
        },
      },
    );
