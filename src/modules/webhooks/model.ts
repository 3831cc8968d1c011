/** Webhooks and their deliveries: request and response schemas (api-spec: Webhook, Events; decisions §10). */
import type { TLiteral } from "@sinclair/typebox";
import { t } from "elysia";
import { MAX_URL_LENGTH } from "../../lib/outbound";
import { ONE_TO_100, QueryInt, ResponseInt, Timestamp } from "../../http/schema";

/**
 * flag.stale (docs/insights.md): sent only to webhooks that list it; the five before it are what
 * a subscription made before it existed lists at most, so none of those gets it.
 */
export const EVENT_NAMES = ["flag.created", "flag.updated", "flag.deleted", "flag.enabled", "flag.disabled", "flag.stale"] as const;
export type EventName = (typeof EVENT_NAMES)[number];
export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export const SECRET_MIN = 16;
export const SECRET_MAX = 256;
export const DESCRIPTION_MAX = 2000;
export const MAX_ENVIRONMENTS = 50;
export const DELIVERY_LIMIT_MAX = 100;

/** One literal schema per value, keeping the tuple's types. */
const literals = <const T extends readonly string[]>(values: T) => values.map((v) => t.Literal(v)) as { -readonly [K in keyof T]: TLiteral<T[K]> };

// Unions of literals, not t.UnionEnum: that gives the schema a `default` (its first value),
// which Elysia fills into an omitted query parameter.
const EventValue = t.Union(
  literals(EVENT_NAMES),
  { description: EVENT_NAMES.join(", "), error: `Must be one of ${EVENT_NAMES.join(", ")}` },
);
const Status = (description: string, error?: string) =>
  t.Union(literals(DELIVERY_STATUSES), { description, ...(error ? { error } : {}) });


const Url = () =>
  t.String({
    minLength: 1,
    maxLength: MAX_URL_LENGTH,
    description: `http or https URL, at most ${MAX_URL_LENGTH} characters, without credentials; a literal address refused by SVC_OUTBOUND_ALLOWED_HOSTS is a 400`,
    error: `Must be an http or https URL of at most ${MAX_URL_LENGTH} characters`,
  });

const Events = () =>
  t.Array(EventValue, {
    minItems: 1,
    maxItems: EVENT_NAMES.length,
    description: "A non-empty set of event names; each at most once",
    error: `Must be a non-empty array of distinct event names (${EVENT_NAMES.join(", ")})`,
  });

const Secret = () =>
  t.String({
    minLength: SECRET_MIN,
    maxLength: SECRET_MAX,
    description: `${SECRET_MIN} to ${SECRET_MAX} characters; keys the HMAC-SHA256 of X-Service-Signature; never returned`,
    error: `Must be a string of ${SECRET_MIN} to ${SECRET_MAX} characters`,
  });

const Environments = () =>
  t.Array(t.String({ minLength: 1, maxLength: 64, error: "Must be an environment slug" }), {
    maxItems: MAX_ENVIRONMENTS,
    description: "Slugs of environments of the project whose events this webhook receives; empty (the default): every environment, including ones added later",
    error: `Must be an array of at most ${MAX_ENVIRONMENTS} environment slugs`,
  });

const Description = () => t.String({ maxLength: DESCRIPTION_MAX, error: `Must be a string of at most ${DESCRIPTION_MAX} characters` });

export const NewWebhook = t.Object(
  {
    url: Url(),
    events: Events(),
    secret: Secret(),
    environments: t.Optional(Environments()),
    description: t.Optional(Description()),
    enabled: t.Optional(t.Boolean({ description: "Default true; a disabled webhook gets no new deliveries and its pending ones wait" })),
  },
  { additionalProperties: false, title: "NewWebhook" },
);

export const WebhookPatch = t.Object(
  {
    url: t.Optional(Url()),
    events: t.Optional(Events()),
    secret: t.Optional(Secret()),
    environments: t.Optional(Environments()),
    description: t.Optional(t.Union([Description(), t.Null()], { description: "null clears it" })),
    enabled: t.Optional(t.Boolean()),
  },
  { additionalProperties: false, title: "WebhookPatch" },
);

export const Webhook = t.Object(
  {
    id: t.String({ description: "wh_..." }),
    projectSlug: t.String(),
    url: t.String(),
    events: t.Array(t.String(), { description: "Event names, in the order given" }),
    environments: t.Array(t.String(), { description: "Environment slugs; empty: every environment" }),
    description: t.Union([t.String(), t.Null()], { description: "null when not set" }),
    enabled: t.Boolean(),
    createdAt: Timestamp(),
    updatedAt: Timestamp("Moves when a field changes (the secret included)"),
  },
  { title: "Webhook", description: "The secret is never returned" },
);

export const WebhookList = t.Object({ webhooks: t.Array(Webhook) }, { title: "WebhookList" });

export const Delivery = t.Object(
  {
    id: t.String({ description: "del_...: 8 characters of creation time, then 22 random (ids sort by time)" }),
    webhookId: t.String({ description: "wh_..." }),
    eventId: t.String({ description: "evt_... (time-ordered like delivery ids): the `id` of the payload; the same for every delivery of one event" }),
    event: t.String({ description: "The event name" }),
    status: Status("pending (will be attempted), succeeded (a 2xx), failed (5 attempts failed; never tried again)"),
    attempts: ResponseInt({ description: "Attempts made so far, 0 to 5" }),
    nextAttemptAt: t.Union([Timestamp(), t.Null()], { description: "When the next attempt is due (pending only); null when done" }),
    lastAttemptAt: t.Union([Timestamp(), t.Null()], { description: "Start of the last attempt; null before the first" }),
    responseStatus: t.Union([ResponseInt(), t.Null()], { description: "HTTP status of the last attempt; null when it got no response (refused, timed out, blocked)" }),
    error: t.Union([t.String(), t.Null()], { description: "Why the last attempt failed (short text); null after a success or before the first attempt" }),
    durationMs: t.Union([ResponseInt(), t.Null()], { description: "Duration of the last attempt in milliseconds" }),
    redeliveryOf: t.Union([t.String(), t.Null()], { description: "For a manual redelivery: the delivery it redelivers" }),
    createdAt: Timestamp(),
  },
  { title: "WebhookDelivery" },
);

export const DeliveryList = t.Object({ deliveries: t.Array(Delivery) }, { title: "WebhookDeliveryList" });

export const DeliveryQuery = t.Object(
  {
    limit: t.Optional(QueryInt(ONE_TO_100, `Default 20, at most ${DELIVERY_LIMIT_MAX}`, `Must be an integer from 1 to ${DELIVERY_LIMIT_MAX}`)),
    status: t.Optional(Status("Only deliveries in this status", `Must be one of ${DELIVERY_STATUSES.join(", ")}`)),
  },
  { additionalProperties: false },
);

export const WebhookParams = t.Object({ webhookId: t.String({ description: "wh_..." }) });
export const DeliveryParams = t.Object({ deliveryId: t.String({ description: "del_..." }) });
