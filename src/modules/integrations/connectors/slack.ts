/**
 * Slack (notifications): one readable message per flag change: who (the change log's actor),
 * what (the flag and the kind of change), which environment, and before -> after.
 *
 * Two ways in, as Slack offers them:
 * - an incoming webhook (a URL bound to one channel): POST the URL with { text, blocks };
 *   200 "ok"; errors as plain strings: 400 invalid_payload / no_text, 403 action_prohibited /
 *   invalid_token, 404 channel_not_found / no_service, 410 channel_is_archived, 500
 *   rollup_error; 429 with Retry-After.
 *   https://api.slack.com/messaging/webhooks ,
 *   https://api.slack.com/changelog/2016-05-17-changes-to-errors-for-incoming-webhooks
 * - a bot token + channel: POST https://slack.com/api/chat.postMessage, Authorization: Bearer
 *   xoxb-..., JSON { channel, text, blocks }; HTTP 200 with { ok, error } (invalid_auth,
 *   not_authed, account_inactive, token_revoked, channel_not_found, not_in_channel, is_archived,
 *   internal_error, fatal_error, ...), HTTP 429 + Retry-After when rate limited.
 *   https://api.slack.com/methods/chat.postMessage , https://api.slack.com/apis/rate-limits
 * Message text: mrkdwn, with &, < and > escaped: https://api.slack.com/reference/surfaces/formatting
 *
 * Idempotency: Slack offers none; a resend after a lost answer may post a message twice. The
 * event id is in the message's context line so a reader can tell.
 */
import { Type, type Static } from "@sinclair/typebox";
import { stateText } from "./events";
import { answered, apiHostField, apiUrl, badCredentials, excerpt, parseJson, retryAfterMs, statusOutcome } from "./http";
import type { Connector, FlagChangeEvent, Outcome, VendorRequest, VendorResponse } from "./types";

export const SLACK_API_HOST = "https://slack.com";
const POST_MESSAGE = "/api/chat.postMessage";

const configSchema = Type.Object(
  {
    webhookUrl: Type.Optional(
      Type.String({
        pattern: "^https?://",
        secret: true,
        description: "A Slack incoming-webhook URL (https://hooks.slack.com/services/...): messages go to the channel it was created for. Either this, or botToken with channel.",
      }),
    ),
    botToken: Type.Optional(
      Type.String({
        pattern: "^xox[a-z]-",
        secret: true,
        description: "A Slack bot token (xoxb-...) with the chat:write scope, used with channel through chat.postMessage.",
      }),
    ),
    channel: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "With botToken: the channel ID (C0123...) or #name to post to; the app must be a member of a private channel.",
      }),
    ),
    environments: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        minItems: 1,
        description: "Only changes in these environments (slugs) are posted; absent: every environment.",
      }),
    ),
    apiHost: apiHostField("A base URL that replaces the scheme and host of the webhook URL, or of https://slack.com for the bot token (a proxy).", SLACK_API_HOST),
  },
  {
    additionalProperties: false,
    // Either way in. The branches name their properties again: ajv's strict mode wants a required key defined beside it.
    anyOf: [
      { required: ["webhookUrl"], properties: { webhookUrl: { type: "string" } } },
      { required: ["botToken", "channel"], properties: { botToken: { type: "string" }, channel: { type: "string" } } },
    ],
  },
);

export type SlackConfig = Static<typeof configSchema>;

/** Slack's mrkdwn escapes. */
function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Who: the change log's actor as a person reads it. */
export function slackActor(actor: FlagChangeEvent["actor"]): string {
  switch (actor.type) {
    case "api_key":
      return `API key “${actor.label}”`;
    case "admin_key":
      return `admin key “${actor.label}”`;
    case "cli":
      return `${actor.label} (CLI)`;
    case "system":
      return `${actor.label} (system)`;
    default:
      return actor.label;
  }
}

const VERB: Record<FlagChangeEvent["event"], string> = {
  "flag.created": "created",
  "flag.updated": "updated",
  "flag.deleted": "deleted",
  "flag.enabled": "turned on",
  "flag.disabled": "turned off",
  "flag.stale": "marked stale",
};

/** The message's text: "<who> turned on *checkout* in *production* (project shop): off → on, rollout 50%". */
export function slackText(change: FlagChangeEvent): string {
  const { flagKey, previousState, currentState } = change.data;
  const verb = VERB[change.event] ?? change.event;
  return `${esc(slackActor(change.actor))} ${verb} flag *${esc(flagKey)}* in *${esc(change.environment)}* (project ${esc(change.projectSlug)}): ${stateText(previousState)} → ${stateText(currentState)}`;
}

function message(change: FlagChangeEvent): Record<string, unknown> {
  const text = slackText(change);
  return {
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text } },
      { type: "context", elements: [{ type: "mrkdwn", text: `${esc(change.timestamp)} · ${esc(change.event)} · ${esc(change.id)}` }] },
    ],
  };
}

/** The webhook URL, its scheme and host replaced by `apiHost` when one is set. */
function webhookTarget(config: SlackConfig): string {
  const url = new URL(config.webhookUrl!);
  return apiUrl(config.apiHost, url.origin, `${url.pathname}${url.search}`);
}

function changes(list: readonly FlagChangeEvent[], config: SlackConfig): VendorRequest[] {
  const wanted = config.environments ? new Set(config.environments) : null;
  const kept = list.filter((c) => wanted === null || wanted.has(c.environment));
  if (config.webhookUrl) {
    const url = webhookTarget(config);
    return kept.map((c) => ({ method: "POST", url, headers: { "content-type": "application/json" }, body: JSON.stringify(message(c)), events: 1 }));
  }
  const url = apiUrl(config.apiHost, SLACK_API_HOST, POST_MESSAGE);
  const headers = { "content-type": "application/json; charset=utf-8", authorization: `Bearer ${config.botToken}` };
  return kept.map((c) => ({ method: "POST", url, headers, body: JSON.stringify({ channel: config.channel, unfurl_links: false, ...message(c) }), events: 1 }));
}

const BAD_CREDENTIALS = new Set(["invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "invalid_token", "no_service", "no_team", "team_disabled", "missing_scope"]);
const TRANSIENT = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited", "rate_limited", "rollup_error"]);

/** An answer read by Slack's error code: bad credentials, a transient error of chat.postMessage's HTTP 200 (retried), or failed. */
function byCode(code: string, response: VendorResponse): Outcome {
  const { status } = response;
  if (status === 401 || BAD_CREDENTIALS.has(code)) return badCredentials("Slack", status, code);
  if (status < 300 && TRANSIENT.has(code)) return { kind: "retry", error: answered("Slack", status, code), retryAfterMs: retryAfterMs(response.headers) };
  return { kind: "failed", error: answered("Slack", status, code) };
}

function outcome(request: VendorRequest, response: VendorResponse): Outcome {
  const viaBot = new URL(request.url).pathname.endsWith(POST_MESSAGE);
  const { status } = response;
  const code = (r: VendorResponse) => excerpt(r.body, 80) || "nothing";
  if (viaBot && status >= 200 && status < 300) {
    // chat.postMessage answers HTTP 200 { ok, error }.
    const answer = parseJson(response.body) as { ok?: unknown; error?: unknown } | null;
    if (answer?.ok === true) return { kind: "sent", accepted: request.events, rejected: 0, error: null };
    return byCode(typeof answer?.error === "string" ? answer.error : code(response), response);
  }
  // Webhooks answer a plain error string; a 403 is action_prohibited unless it names the token.
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return byCode(code(response), response);
  return statusOutcome("Slack", request, response, { detail: code });
}

export const slack: Connector<SlackConfig> = {
  type: "slack",
  category: "notifications",
  name: "Slack",
  description: "A message in a Slack channel for each flag change: who changed which flag, in which environment, before → after (an incoming webhook, or a bot token and a channel).",
  configSchema,
  // The schema's anyOf, as the API checks it (TypeBox's checker reads an object's properties only).
  check(config) {
    if (config.webhookUrl !== undefined) return [];
    if (config.botToken === undefined && config.channel === undefined) return [{ key: "webhookUrl", message: "Required: a webhook URL, or botToken with channel" }];
    if (config.botToken === undefined) return [{ key: "botToken", message: "Required with channel (or give webhookUrl instead)" }];
    if (config.channel === undefined) return [{ key: "channel", message: "Required with botToken" }];
    return [];
  },
  changes,
  outcome,
  // A channel reads in order: one message in flight at a time.
  concurrency: 1,
};
