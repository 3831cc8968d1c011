/**
 * The credential of an OFREP change stream's URL (`GET /ofrep/v1/events?token=...`): a browser's
 * EventSource cannot send headers, so the URL carries its own credential, which must not be the
 * API key (URLs end up in proxies' logs and browser histories).
 *
 * A token is `base64url(JSON payload) + "." + base64url(HMAC-SHA256(payload part))`, keyed by a
 * key derived from the JWT secret. It binds the key id, the key's project and environment, and
 * which of the key's secrets was presented (`secretTag`): a deleted key, or a secret rotated out
 * (once its grace period ends), makes the token worthless although the key id lives on.
 *
 * Tokens are deterministic within a 12-hour window: the same key gets the same URL on every bulk
 * evaluation of that window (the stock web provider reconnects whenever the URL set changes). A
 * token expires at the end of the window after the one it was issued in: valid 12 to 24 hours.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { pathOf } from "../../http/path";
import type { ApiKeyPrincipal } from "../../http/access";
import type { StreamBinding } from "../../http/credentials";

export const TOKEN_WINDOW_MS = 12 * 3600 * 1000;
/** The path whose URLs carry a token. */
export const EVENTS_PATH = "/ofrep/v1/events";
/** What the key is derived from the JWT secret with (HMAC-SHA256 of this text). */
const KEY_LABEL = "flagsvc ofrep stream token";
/** Longer is not a token of ours: refused before any work. */
export const MAX_TOKEN_LENGTH = 1024;

/** What a valid token grants: a stream of this key's environment, until `expiresAt` (ms). */
export interface StreamGrant extends StreamBinding {
  expiresAt: number;
}

/** The payload, with short names (it travels in a URL). */
interface Payload {
  k: string;
  p: string;
  e: string;
  s: string;
  /** Expiry, Unix seconds. */
  x: number;
}

export class StreamTokens {
  private readonly key: Buffer;

  constructor(jwtSecret: string) {
    this.key = createHmac("sha256", jwtSecret).update(KEY_LABEL).digest();
  }

  /** The token of `principal` at `now` (ms): the same for every call in the same 12-hour window. */
  issue(principal: ApiKeyPrincipal, now: number): string {
    const expiresAt = (Math.floor(now / TOKEN_WINDOW_MS) + 2) * TOKEN_WINDOW_MS;
    const payload: Payload = { k: principal.id, p: principal.projectId, e: principal.environmentId, s: principal.secretTag, x: expiresAt / 1000 };
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    return `${body}.${this.mac(body).toString("base64url")}`;
  }

  /**
   * The grant of a token this instance issued and that has not expired at `now` (ms), else null.
   * Whether its key and secret are still valid is the credential registry's to say
   * (`CredentialRegistry.streamPrincipal`).
   */
  verify(token: string, now: number): StreamGrant | null {
    if (token.length > MAX_TOKEN_LENGTH) return null;
    const dot = token.indexOf(".");
    if (dot <= 0) return null;
    const body = token.slice(0, dot);
    const sent = Buffer.from(token.slice(dot + 1), "base64url");
    const expected = this.mac(body);
    if (sent.length !== expected.length || !timingSafeEqual(sent, expected)) return null;
    let payload: Partial<Payload>;
    try {
      payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
    } catch {
      return null;
    }
    const { k, p, e, s, x } = payload;
    if (typeof k !== "string" || typeof p !== "string" || typeof e !== "string" || typeof s !== "string" || typeof x !== "number") return null;
    const expiresAt = x * 1000;
    if (!(now < expiresAt)) return null;
    return { keyId: k, projectId: p, environmentId: e, secretTag: s, expiresAt };
  }

  /**
   * The grant of the token in a change stream's URL (`/ofrep/v1/events?token=...`), for
   * admission: the connect is counted against the key's own rate limit, not its client
   * address's. Null for any other URL, or a token `verify` refuses.
   */
  grantOfUrl(url: string, now: number): StreamGrant | null {
    const query = url.indexOf("?");
    if (query < 0) return null;
    if (pathOf(url) !== EVENTS_PATH) return null;
    const token = new URLSearchParams(url.slice(query + 1)).get("token");
    return token === null ? null : this.verify(token, now);
  }

  private mac(body: string): Buffer {
    return createHmac("sha256", this.key).update(body).digest();
  }
}
