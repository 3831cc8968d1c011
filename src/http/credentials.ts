/**
 * Every credential the service accepts, held in memory so that resolving one touches no
 * database (issue: identity and access, point 7): API keys and admin keys by the SHA-256 of
 * their secret, users by id, revoked login tokens by jti. It reloads on the change-log entries
 * of writes that change credentials (`subscriber`, before the writer answers); entries appended
 * by another process (the `flagsvc admin` CLI) are noticed by `pollExternalChanges()`, run
 * every second.
 * `lastUsedAt` is counted in memory and written by `flushLastUsed()` on a schedule. All SQL is
 * in the `CredentialStore` (src/modules/credentials/store.ts).
 */
import { createHmac } from "node:crypto";
import { jwtVerify, SignJWT } from "jose";
import type { CredentialStore, Credentials, KeyUse } from "../modules/credentials/store";
import { iso, type Clock, type CoarseClock } from "../lib/clock";
import { randomBase62 } from "../lib/ids";
import { sameSecret, sha256Hex } from "../lib/secrets";
import type { RateLimitKind } from "../config";
import { Meter } from "./rate-limit";
import type { ApiKeyPrincipal, Failure, Principal, Role } from "./access";
import type { ChangeEntry } from "../changes/entry";

export const TOKEN_TTL_SECONDS = 3600;

/** What a stream is bound to: a key, its project and environment, and which of its secrets. */
export interface StreamBinding {
  keyId: string;
  projectId: string;
  environmentId: string;
  secretTag: string;
}

/** A key secret's tag (`Principal.secretTag`): the first 16 hex characters of the SHA-256 of its stored hash. */
export const secretTag = (keyHash: string): string => sha256Hex(keyHash).slice(0, 16);

/**
 * When a key was last used (`dirty` until the flush writes it), and its rate-limit meter in the
 * same object (one object per request to touch); kept across reloads, so neither restarts when
 * any credential changes.
 */
class Usage extends Meter {
  at = 0;
  dirty = false;
  constructor(
    kind: RateLimitKind,
    readonly key: KeyUse["kind"],
  ) {
    super(kind);
  }
}

/**
 * Who is calling; `meter`: a key's own rate-limit counter (others are counted by id or address).
 * `csrf`: set when the login token came in the session cookie (never for `Authorization`): the
 * `X-CSRF-Token` an unsafe request must carry (src/http/auth.ts checks it).
 */
export type Resolution =
  | { principal: Principal; failure: null; meter: Meter | null; csrf?: string }
  | { principal: null; failure: Failure; meter: null };

/** The console's session cookie (docs/console.md): the login token, `HttpOnly; Secure; SameSite=Strict`. */
export const SESSION_COOKIE = "flagsvc_session";

/**
 * A key's resolution, made once per reload (resolving a key allocates nothing); the record of a
 * rotated-out secret stays valid until `notAfter` (ms).
 */
interface KeyRecord {
  principal: Extract<Principal, { kind: "apiKey" | "adminKey" }>;
  failure: null;
  meter: Usage;
  notAfter?: number;
}

const MISSING: Resolution = { principal: null, failure: "missing", meter: null };
const BAD_KEY: Resolution = { principal: null, failure: "key", meter: null };
const BAD_TOKEN: Resolution = { principal: null, failure: "token", meter: null };
const NO_BEARER: Resolution = { principal: null, failure: "noBearer", meter: null };

/** Three dot-separated parts, as a JWT (whose header, base64url JSON, begins `eyJ`); counted without allocating. */
function jwtShaped(value: string): boolean {
  const first = value.indexOf(".");
  if (first < 0) return false;
  const second = value.indexOf(".", first + 1);
  return second > 0 && value.indexOf(".", second + 1) < 0;
}

export class CredentialRegistry {
  private keys = new Map<string, KeyRecord>();
  /** API keys by id: the record of the current secret, then that of the previous one (grace period). */
  private byKeyId = new Map<string, KeyRecord[]>();
  private readonly reloadListeners: (() => void)[] = [];
  /**
   * `Authorization` values already resolved to a key, so that its later requests skip parsing
   * and hashing. Only valid keys get in (guessing cannot grow it), bounded by the number of
   * keys, and emptied by every reload, so a deleted or rotated key is refused at once. Whoever
   * can read this process's memory holds the JWT secret too: this adds no exposure.
   */
  private byHeader = new Map<string, KeyRecord>();
  /**
   * The `Authorization` value resolved last and its key. Requests mostly repeat the previous
   * caller's header (an SDK, a service): comparing with it (`sameSecret`, in constant time)
   * costs less than hashing the value for the map. Cleared with `byHeader`.
   */
  private lastHeader = "";
  private lastRecord: KeyRecord | null = null;
  private usage = new Map<string, Usage>();
  /**
   * `validAfter` (Unix seconds): tokens dated (`iat`) earlier are refused. A password change sets
   * it past the change's own second (`tokensValidFrom`): `iat` has whole-second resolution, so
   * tokens of that second are refused too, and `issueToken` dates later tokens at least this late.
   */
  private users = new Map<string, { email: string; role: Role; validAfter: number }>();
  private revoked = new Map<string, number>();
  /** Users' last token use (login tokens are not the hot path). */
  private userLastUsed = new Map<string, number>();
  /** The change log's last position as of the last reload or poll: entries after it are news. */
  private seenPosition = 0;
  private readonly secret: Uint8Array;

  /**
   * `requestClock`: the clock admission reads; every reload forgets its reading, so that a key
   * created or rotated just now is not seen used before that moment. Resolves nothing until
   * the first `reload()` (`CredentialRegistry.open` does it).
   */
  constructor(
    private readonly store: CredentialStore,
    private readonly clock: Clock,
    jwtSecret: string,
    private readonly requestClock?: CoarseClock,
  ) {
    this.secret = new TextEncoder().encode(jwtSecret);
  }

  /** A registry loaded from `store`. */
  static async open(store: CredentialStore, clock: Clock, jwtSecret: string, requestClock?: CoarseClock): Promise<CredentialRegistry> {
    const registry = new CredentialRegistry(store, clock, jwtSecret, requestClock);
    await registry.reload();
    return registry;
  }

  /** Reads every credential from the store (after a write, or another process's write). */
  async reload(): Promise<void> {
    this.apply(await this.store.load(this.clock.now()));
  }

  /** Replaces what the registry resolves from by `loaded` (synchronously: no request sees half of it). */
  private apply(loaded: Credentials): void {
    const keys = new Map<string, KeyRecord>();
    const previousUsage = this.usage;
    const usage = new Map<string, Usage>();
    const usageOf = (id: string, kind: RateLimitKind, key: Usage["key"]) => {
      const u = previousUsage.get(id) ?? new Usage(kind, key);
      usage.set(id, u);
      return u;
    };
    const rows = loaded.apiKeys;
    const byKeyId = new Map<string, KeyRecord[]>();
    for (const r of rows) {
      const principal = (keyHash: string): ApiKeyPrincipal => ({
        kind: "apiKey",
        id: r.id,
        name: r.name,
        scope: r.scope,
        projectId: r.projectId,
        projectSlug: r.projectSlug,
        environmentId: r.environmentId,
        environmentSlug: r.environmentSlug,
        secretTag: secretTag(keyHash),
      });
      const u = usageOf(r.id, r.scope, "apiKey");
      const records: KeyRecord[] = [{ principal: principal(r.keyHash), failure: null, meter: u }];
      if (r.previousHash && r.previousExpiresAt) records.push({ principal: principal(r.previousHash), failure: null, meter: u, notAfter: Date.parse(r.previousExpiresAt) });
      keys.set(r.keyHash, records[0]!);
      if (records[1]) keys.set(r.previousHash!, records[1]);
      byKeyId.set(r.id, records);
    }
    for (const r of loaded.adminKeys) {
      keys.set(r.keyHash, { principal: { kind: "adminKey", id: r.id, name: r.name }, failure: null, meter: usageOf(r.id, "admin", "adminKey") });
    }
    const userRows = loaded.users.map((u) => [u.id, { email: u.email, role: u.role, validAfter: u.tokensValidAfter ? Math.ceil(Date.parse(u.tokensValidAfter) / 1000) : 0 }] as const);
    this.users = new Map(userRows);
    for (const id of this.userLastUsed.keys()) if (!this.users.has(id)) this.userLastUsed.delete(id);
    this.revoked = new Map(loaded.revoked.map((r) => [r.jti, Date.parse(r.expiresAt)]));
    this.keys = keys;
    this.byKeyId = byKeyId;
    this.usage = usage;
    this.byHeader = new Map();
    this.lastHeader = "";
    this.lastRecord = null;
    this.requestClock?.expire();
    this.seenPosition = loaded.position;
    for (const listener of this.reloadListeners) listener();
  }

  /**
   * Called after every reload (a write that changed credentials, or another process's): the
   * stream hub re-checks its open streams, so that those of a deleted key or a rotated-out
   * secret end at once.
   */
  onReload(listener: () => void): void {
    this.reloadListeners.push(listener);
  }

  /**
   * The API key behind a stream's grant (src/modules/streams/tokens.ts), or of an open stream:
   * the key of that id, project and environment whose secret of that tag is still accepted
   * (a rotated-out secret only until the end of its grace period). No I/O.
   */
  streamPrincipal(grant: StreamBinding, now: number): ApiKeyPrincipal | undefined {
    return this.streamRecord(grant, now)?.principal as ApiKeyPrincipal | undefined;
  }

  /**
   * Whether the caller of a long-lived request (an audit-log stream) opened at `openedAt` (ms) is
   * still accepted as it was: an API key's secret (as `streamPrincipal`), an admin key not
   * deleted, a login token not expired nor revoked (logout), of a user still there with the same
   * role and no password change since. No I/O.
   */
  stillAccepts(principal: Principal, openedAt: number, now: number): boolean {
    switch (principal.kind) {
      case "apiKey":
        return this.streamPrincipal({ keyId: principal.id, projectId: principal.projectId, environmentId: principal.environmentId, secretTag: principal.secretTag }, now) !== undefined;
      case "adminKey":
        return this.usage.get(principal.id)?.key === "adminKey";
      case "user": {
        const user = this.users.get(principal.id);
        return user !== undefined && user.role === principal.role && user.validAfter * 1000 <= openedAt && now < principal.expiresAt && !this.revoked.has(principal.jti);
      }
    }
  }

  /** `streamPrincipal` as admission takes it: the key's resolution, its use counted (rate limit, last use). */
  resolveStream(grant: StreamBinding, now: number): Resolution | undefined {
    const record = this.streamRecord(grant, now);
    return record && this.use(record, now);
  }

  private streamRecord(grant: StreamBinding, now: number): KeyRecord | undefined {
    const records = this.byKeyId.get(grant.keyId);
    if (records === undefined) return undefined;
    for (const record of records) {
      const p = record.principal as ApiKeyPrincipal;
      if (p.secretTag !== grant.secretTag || p.projectId !== grant.projectId || p.environmentId !== grant.environmentId) continue;
      if (record.notAfter !== undefined && now >= record.notAfter) return undefined;
      return record;
    }
    return undefined;
  }

  /**
   * Reloads when another process appended a credential entry to the change log since the last
   * look (`CredentialStore.externalCredentialChange`); true when it reloaded.
   */
  async pollExternalChanges(): Promise<boolean> {
    const { changed, position } = await this.store.externalCredentialChange(this.seenPosition);
    this.seenPosition = Math.max(this.seenPosition, position);
    if (!changed) return false;
    await this.reload();
    return true;
  }

  /**
   * The change log's subscriber: an entry of a key, a user, or what keys belong to (a deleted
   * project or environment) reloads the registry before the writer answers (the bus awaits it).
   */
  readonly subscriber = async (entries: readonly ChangeEntry[]): Promise<void> => {
    if (entries.some(touchesCredentials)) await this.reload();
  };

  /**
   * The principal behind an `Authorization` header value; no I/O. Keys resolve synchronously
   * (the common case, on the evaluation path: no promise, no microtask); only a login token,
   * whose signature check is asynchronous, returns a promise.
   */
  resolve(authorization: string | null, now = this.clock.now()): Resolution | Promise<Resolution> {
    if (authorization === null) return MISSING;
    if (this.lastRecord !== null && sameSecret(authorization, this.lastHeader)) return this.use(this.lastRecord, now);
    const known = this.byHeader.get(authorization);
    if (known !== undefined) {
      this.lastHeader = authorization;
      this.lastRecord = known;
      return this.use(known, now);
    }
    if (authorization.length < 8 || authorization.slice(0, 7).toLowerCase() !== "bearer ") {
      // One of our keys or a login token sent bare (`Authorization: svc_...`): say what was expected.
      return authorization.startsWith("svc_") || (authorization.startsWith("eyJ") && jwtShaped(authorization)) ? NO_BEARER : BAD_KEY;
    }
    const token = authorization.slice(7).trim();
    if (token.startsWith("svc_")) {
      const record = this.keys.get(sha256Hex(token));
      if (record === undefined) return BAD_KEY;
      if (this.byHeader.size < 2 * this.keys.size) this.byHeader.set(authorization, record);
      return this.use(record, now);
    }
    if (token.split(".").length === 3) return this.resolveToken(token);
    return BAD_KEY;
  }

  /**
   * The principal behind the session cookie's value (a login token, nothing else), with the
   * CSRF token its unsafe requests must carry. An API key put in the cookie is refused as a
   * token: the cookie is the console's, which signs in with a password only.
   */
  async resolveSession(token: string): Promise<Resolution> {
    if (!jwtShaped(token)) return BAD_TOKEN;
    const auth = await this.resolveToken(token);
    if (auth.principal === null) return auth;
    return { principal: auth.principal, failure: null, meter: null, csrf: this.csrfToken((auth.principal as Extract<Principal, { kind: "user" }>).jti) };
  }

  /**
   * The CSRF token of a login token: the HMAC-SHA256 of its `jti` with the JWT secret (base64url).
   * Nothing stored: it is valid exactly as long as its token, and a page of another origin
   * cannot compute it or read it (it is only in `GET`/`POST /v1/auth/session` answers).
   */
  csrfToken(jti: string): string {
    return createHmac("sha256", this.secret).update(jti).digest("base64url");
  }

  private use(record: KeyRecord, now: number): Resolution {
    if (record.notAfter !== undefined && now >= record.notAfter) return BAD_KEY;
    record.meter.at = now;
    record.meter.dirty = true;
    return record;
  }

  private async resolveToken(token: string): Promise<Resolution> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, this.secret, {
        algorithms: ["HS256"],
        currentDate: new Date(this.clock.now()),
        requiredClaims: ["sub", "jti", "exp", "iat"],
      }));
    } catch {
      return BAD_TOKEN;
    }
    const user = this.users.get(payload.sub!);
    if (user === undefined || this.revoked.has(payload.jti!) || payload.iat! < user.validAfter) return BAD_TOKEN;
    this.userLastUsed.set(payload.sub!, this.clock.now());
    return {
      principal: { kind: "user", id: payload.sub!, email: user.email, role: user.role, jti: payload.jti!, expiresAt: payload.exp! * 1000 },
      failure: null,
      meter: null,
    };
  }

  /**
   * A signed login token for `userId` (HS256, one hour, claims sub, role, exp, iat, jti); issued
   * in the same second as a password change, it is dated the next second (see `users`).
   */
  async issueToken(userId: string, role: Role): Promise<{ token: string; expiresAt: number; jti: string }> {
    const iat = Math.max(Math.floor(this.clock.now() / 1000), this.users.get(userId)?.validAfter ?? 0);
    const exp = iat + TOKEN_TTL_SECONDS;
    const jti = randomBase62(22);
    const token = await new SignJWT({ role })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(userId)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(this.secret);
    return { token, expiresAt: exp * 1000, jti };
  }

  /** Revokes a login token until it would have expired (logout): refused here at once, stored before this resolves. */
  async revoke(jti: string, expiresAt: number): Promise<void> {
    this.revoked.set(jti, expiresAt);
    await this.store.revoke(jti, expiresAt);
  }

  /** When the credential with this id was last used, as this process knows it. */
  lastUsedAt(id: string): number | undefined {
    const at = this.usage.get(id)?.at;
    return at ? at : this.userLastUsed.get(id);
  }

  /**
   * Writes the last-use times of keys used since the last flush; drops expired revocations. A
   * key used again while this writes stays dirty (its newer time is written by the next flush).
   */
  async flushLastUsed(): Promise<void> {
    const now = this.clock.now();
    const dirty = [...this.usage].filter(([, u]) => u.dirty);
    const uses: KeyUse[] = dirty.map(([id, u]) => ({ kind: u.key, id, at: u.at }));
    await this.store.recordUse(uses, now);
    dirty.forEach(([, u], i) => {
      if (u.at === uses[i]!.at) u.dirty = false;
    });
    for (const [jti, exp] of this.revoked) if (exp <= now) this.revoked.delete(jti);
  }

}

/** Change-log entries that change what credentials resolve to. */
function touchesCredentials({ resource, action }: ChangeEntry): boolean {
  switch (resource.type) {
    case "api_key":
    case "admin_key":
    case "user":
      return true;
    case "project":
    case "environment":
      return action === "deleted";
    default:
      return false;
  }
}

/**
 * What a password change stores as the user's `tokensValidAfter`: the first whole second whose
 * tokens count, later than the change's own second and than the previous value, since a token
 * issued after the previous change may be dated up to it (`issueToken`). Older rows hold the
 * change's time in milliseconds, read as the next whole second.
 */
export function tokensValidFrom(previous: string | null, now: number): string {
  const after = previous ? Math.ceil(Date.parse(previous) / 1000) : 0;
  return iso((Math.max(Math.floor(now / 1000), after) + 1) * 1000);
}

/** The JWT secret: SVC_JWT_SECRET, else one generated at first need and kept in the database. */
export function jwtSecret(store: CredentialStore, configured: string | undefined, clock: Clock): Promise<string> {
  if (configured !== undefined) return Promise.resolve(configured);
  return store.jwtSecret(() => randomBase62(64), clock.now());
}

