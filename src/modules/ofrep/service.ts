/**
 * OFREP v0.3.0 evaluation (docs/openfeature.md): the evaluation service's results, seen through
 * the one OpenFeature mapping (src/evaluation/openfeature.ts). A flag's own failure is an
 * `OfrepError` carrying OFREP's body; the routes (routes.ts) put every other failure in OFREP's
 * shapes too.
 */
import { isIdentified, isResolutionError, resolution, toEvalContext, type OpenFeatureErrorCode, type Resolution, type ResolutionError } from "../../evaluation/openfeature";
import type { Principal, ApiKeyPrincipal } from "../../http/access";
import { ApiError } from "../../http/errors";
import { Answer } from "../../http/native";
import type { Clock } from "../../lib/clock";
import { EVENTS_PATH } from "../streams/tokens";
import { apiKeyOf, type EvaluationService } from "../evaluation/service";
import type { OfrepRequest } from "./model";

/** What the OFREP bulk answer needs of the change streams (src/modules/streams/). */
export interface ChangeFeed {
  /** The last change of an environment: its change-log position and time (ms). */
  lastChange(environmentId: string): { position: number; at: number };
  /** Resolves once this node has applied the change at `position` (false: not within `timeoutMs`). */
  waitFor(position: number, timeoutMs: number): Promise<boolean>;
}

/** The signed credential of an environment's change-stream URL (never the API key). */
export interface StreamTokenIssuer {
  issue(principal: ApiKeyPrincipal, now: number): string;
}

/** OFREP's default; a hidden browser tab closes its stream after this long. */
const INACTIVITY_DELAY_SEC = 120;
/** How long a refetch announced by a change waits for this node to apply that change. */
const CATCH_UP_MS = 2_000;

export type OfrepAnswer = { key: string } & Resolution;

/** A failure in OFREP's shape: a flag's (`{ key, errorCode, errorDetails }`) or a bulk request's. */
export class OfrepError extends ApiError {
  constructor(
    status: number,
    readonly ofrep: { errorCode: OpenFeatureErrorCode; errorDetails: string; key?: string },
  ) {
    super(status, status === 404 ? "NOT_FOUND" : "VALIDATION_ERROR", ofrep.errorDetails);
  }
}

const statusOf = (code: OpenFeatureErrorCode) => (code === "FLAG_NOT_FOUND" ? 404 : 400);

export interface OfrepServiceDeps {
  evaluation: EvaluationService;
  changes: ChangeFeed;
  streams: StreamTokenIssuer;
  clock: Clock;
}

export class OfrepService {
  constructor(private readonly deps: OfrepServiceDeps) {}

  /** `POST /ofrep/v1/evaluate/flags/{key}`. */
  evaluateFlag(principal: Principal, key: string, body: OfrepRequest, sessionToken: string | null): OfrepAnswer {
    const context = toEvalContext(body.context);
    if (isResolutionError(context)) throw new OfrepError(400, { key, ...context });
    const { result, flag } = this.deps.evaluation.evaluateWith(principal, key, context, sessionToken);
    const answer = resolution(result, flag, isIdentified(context), apiKeyOf(principal).environmentSlug);
    if (isResolutionError(answer)) throw new OfrepError(statusOf(answer.errorCode), { key, ...answer });
    return { key, ...answer };
  }

  /**
   * `POST /ofrep/v1/evaluate/flags`: every flag of the key's environment, its ETag, and the
   * change stream. A refetch that a change-stream message triggered waits (briefly) until this
   * node has applied that change, so that it never answers with the state before it.
   */
  bulk(principal: Principal, body: OfrepRequest, sessionToken: string | null, request: Request): Answer | Promise<Answer> {
    const key = apiKeyOf(principal);
    const context = toEvalContext(body.context);
    if (isResolutionError(context)) throw new OfrepError(400, context);
    const awaited = this.announced(key.environmentId, new URL(request.url).searchParams);
    const answer = () => this.bulkNow(principal, context, sessionToken, request.headers.get("if-none-match"));
    return awaited === null ? answer() : this.deps.changes.waitFor(awaited, CATCH_UP_MS).then(answer);
  }

  private bulkNow(principal: Principal, context: Exclude<ReturnType<typeof toEvalContext>, ResolutionError>, sessionToken: string | null, ifNoneMatch: string | null): Answer {
    const key = apiKeyOf(principal);
    const identified = isIdentified(context);
    const flags = this.deps.evaluation.evaluateAll(principal, context, sessionToken).map(({ result, flag }) => {
      const r = resolution(result, flag, identified, key.environmentSlug);
      return { key: result.flagKey, ...r };
    });
    const last = this.deps.changes.lastChange(key.environmentId);
    const token = this.deps.streams.issue(key, this.deps.clock.now());
    const text = JSON.stringify({
      flags,
      eventStreams: [{ type: "sse", endpoint: { requestUri: `${EVENTS_PATH}?token=${token}` }, inactivityDelaySec: INACTIVITY_DELAY_SEC }],
      metadata: { version: String(last.position), environment: key.environmentSlug },
    });
    const etag = `"${Bun.hash(text).toString(36)}"`;
    if (ifNoneMatch !== null && matchesEtag(ifNoneMatch, etag)) return new Answer(304, null, { etag });
    return new Answer(200, text, { etag });
  }

  /**
   * The change a refetch was told of (OFREP's `flagConfigEtag`, `flagConfigLastModified`) when
   * this node has not applied it yet: the position to wait for; else null. Values it cannot
   * read are ignored: they are hints, and the answer is right without them on a node that is
   * up to date.
   */
  private announced(environmentId: string, query: URLSearchParams): number | null {
    const last = this.deps.changes.lastChange(environmentId);
    const etag = query.get("flagConfigEtag");
    const position = etag === null ? Number.NaN : Number(etag.replace(/^W\//, "").replace(/"/g, ""));
    if (Number.isSafeInteger(position) && position > last.position) return position;
    const modified = query.get("flagConfigLastModified");
    if (modified !== null && Number.isNaN(position)) {
      const ms = /^\d+$/.test(modified) ? Number(modified) * 1000 : Date.parse(modified);
      // Whole seconds: a change within the same second as the last one known is not "newer".
      if (Number.isFinite(ms) && Math.floor(ms / 1000) > Math.floor(last.at / 1000)) return last.position + 1;
    }
    return null;
  }
}

/** `If-None-Match`: `*`, or a list of tags, weak ones compared by their opaque part (RFC 9110 weak comparison). */
function matchesEtag(header: string, etag: string): boolean {
  if (header.trim() === "*") return true;
  return header.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag);
}
