/** Integration connectors (decisions §12): pure, no I/O. The sender (not built yet) performs the requests. */
import type { TObject } from "@sinclair/typebox";

export const CATEGORIES = ["analytics", "cdp", "crm", "monitoring", "notifications"] as const;
export type Category = (typeof CATEGORIES)[number];

/** One evaluation, as the evaluation-record stream (src/modules/evaluation/records.ts) hands it over. */
export interface EvaluationRecord {
  flagKey: string; environment: string; enabled: boolean; variant: string | null;
  reason: string; ruleId: string | null; userId: string | null; evaluatedAt: string;
}

/** One flag change: the webhook event payload (docs: Webhooks) and who made it (the change log's actor). */
export interface FlagChangeEvent {
  id: string;                       // evt_... : stable across retries
  event: "flag.created" | "flag.updated" | "flag.deleted" | "flag.enabled" | "flag.disabled" | "flag.stale";
  projectSlug: string; environment: string; timestamp: string;
  data: {
    flagKey: string; previousState: { enabled: boolean; rolloutPercentage?: number | null }; currentState: { enabled: boolean; rolloutPercentage?: number | null };
    /** flag.stale only (docs/insights.md). */
    stale?: { reason: string; since: string };
  };
  actor: { type: string; id: string; label: string };
}

/** A request to the vendor. `events`: how many events it carries (stats count accepted events, not requests). */
export interface VendorRequest {
  method: "POST" | "PUT" | "GET";
  url: string;
  headers: Record<string, string>;
  body: string;
  events: number;
}

/** The vendor's answer as the sender reads it. */
export interface VendorResponse { status: number; headers: Record<string, string>; body: string }

export type Outcome =
  /** Taken: `accepted` events stored by the vendor, `rejected` refused for good (a partial failure: not retried). */
  | { kind: "sent"; accepted: number; rejected: number; error: string | null }
  /** Try the same request again later (5xx, 429, timeouts): after `retryAfterMs` when the vendor says (Retry-After). */
  | { kind: "retry"; error: string; retryAfterMs: number | null }
  /**
   * Never retried (bad credentials, a malformed request): `error` shown as the integration's
   * lastError. `credentials`: the vendor refused the credentials; the sender pauses the
   * integration instead of sending more that would be refused alike.
   */
  | { kind: "failed"; error: string; credentials?: boolean };

export interface Connector<C extends Record<string, unknown> = Record<string, unknown>> {
  type: string;
  category: Category;
  name: string;
  description: string;
  /** JSON Schema of the config (TypeBox `t.Object`), secrets marked `secret: true`, defaults given, optional `apiHost`. */
  configSchema: TObject;
  /** Evaluation records -> requests, split at the vendor's batch limits. Absent: the type does not take evaluations. */
  evaluations?(records: readonly EvaluationRecord[], config: C, nowMs: number): VendorRequest[];
  /**
   * The sender hands this connector evaluations once a second, everything it received in that
   * second, never more often (Datadog: one count point per series per second; a second sent
   * twice would overwrite itself).
   */
  everySecond?: boolean;
  /**
   * Rules a JSON Schema of one property cannot say (Slack: a webhook URL, or a bot token and a
   * channel), checked after the schema; one entry per offending key.
   */
  check?(config: C): { key: string; message: string }[];
  /** Requests in flight at once for one integration; default 4. Slack: 1 (a channel reads in order). */
  concurrency?: number;
  /** Flag changes -> requests. Absent: the type does not take changes. */
  changes?(changes: readonly FlagChangeEvent[], config: C): VendorRequest[];
  /** How the sender must treat the vendor's answer to `request`. */
  outcome(request: VendorRequest, response: VendorResponse): Outcome;
  /**
   * After a partial refusal in which the vendor stored nothing (Amplitude's 400 naming bad events):
   * the request with the other events (same ids), which the sender sends again; null when none.
   */
  remainder?(request: VendorRequest, response: VendorResponse): VendorRequest | null;
}

