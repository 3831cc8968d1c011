/**
 * Every credential the service accepts, held in memory so that resolving one touches no
 * database (issue: identity and access, point 7): API keys and admin keys by the SHA-256 of
 * their secret, users by id, revoked login tokens by jti. Services call `reload()` after a
 * write that changes credentials; writes by another process (the `flagsvc admin` CLI) are
 * noticed through SQLite's `data_version` by `pollExternalChanges()`, run every second.
 * `lastUsedAt` is counted in memory and written by `flushLastUsed()` on a schedule.
 */
import { eq, gt, lt } from "drizzle-orm";
import { jwtVerify, SignJWT } from "jose";
import { transaction, type Store } from "../db/client";
import { adminKeys, apiKeys, environments, projects, revokedTokens, settings, users } from "../db/schema";
import { iso, type Clock } from "../lib/clock";
import { randomBase62 } from "../lib/ids";
import { sha256Hex } from "../lib/secrets";
import type { Principal, Role } from "./access";

export const TOKEN_TTL_SECONDS = 3600;
const JWT_SECRET_SETTING = "jwt_secret";

interface KeyRecord {
  principal: Extract<Principal, { kind: "apiKey" | "adminKey" }>;
  /** A rotated-out secret stays valid until then (ms); undefined: no end. */
  notAfter?: number;
}

export type Resolution =
  | { principal: Principal; failure: null }
  | { principal: null; failure: "missing" | "key" | "token" };

const MISSING: Resolution = { principal: null, failure: "missing" };
const BAD_KEY: Resolution = { principal: null, failure: "key" };
const BAD_TOKEN: Resolution = { principal: null, failure: "token" };

export class CredentialRegistry {
  private keys = new Map<string, KeyRecord>();
  /** `validAfter`: Unix seconds; tokens issued earlier are refused (set by a password change). */
  private users = new Map<string, { email: string; role: Role; validAfter: number }>();
  private revoked = new Map<string, number>();
  private lastUsed = new Map<string, number>();
  /** Keys used since the last flush, and which table holds each. */
  private dirty = new Map<string, typeof apiKeys | typeof adminKeys>();
  private dataVersion = -1;
  private readonly secret: Uint8Array;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    jwtSecret: string,
  ) {
    this.secret = new TextEncoder().encode(jwtSecret);
    this.reload();
  }

  /** Reads every credential from the database (after a write, or another process's write). */
  reload(): void {
    const { db } = this.store;
    const keys = new Map<string, KeyRecord>();
    const rows = db
      .select({
        id: apiKeys.id,
        scope: apiKeys.scope,
        keyHash: apiKeys.keyHash,
        previousHash: apiKeys.previousHash,
        previousExpiresAt: apiKeys.previousExpiresAt,
        projectId: apiKeys.projectId,
        projectSlug: projects.slug,
        environmentId: apiKeys.environmentId,
        environmentSlug: environments.slug,
      })
      .from(apiKeys)
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .all();
    for (const r of rows) {
      const principal = {
        kind: "apiKey" as const,
        id: r.id,
        scope: r.scope,
        projectId: r.projectId,
        projectSlug: r.projectSlug,
        environmentId: r.environmentId,
        environmentSlug: r.environmentSlug,
      };
      keys.set(r.keyHash, { principal });
      if (r.previousHash && r.previousExpiresAt) keys.set(r.previousHash, { principal, notAfter: Date.parse(r.previousExpiresAt) });
    }
    for (const r of db.select({ id: adminKeys.id, keyHash: adminKeys.keyHash }).from(adminKeys).all()) {
      keys.set(r.keyHash, { principal: { kind: "adminKey", id: r.id } });
    }
    const now = iso(this.clock.now());
    this.users = new Map(
      db
        .select({ id: users.id, email: users.email, role: users.role, tokensValidAfter: users.tokensValidAfter })
        .from(users)
        .all()
        .map((u) => [u.id, { email: u.email, role: u.role, validAfter: u.tokensValidAfter ? Math.floor(Date.parse(u.tokensValidAfter) / 1000) : 0 }]),
    );
    this.revoked = new Map(
      db.select().from(revokedTokens).where(gt(revokedTokens.expiresAt, now)).all().map((r) => [r.jti, Date.parse(r.expiresAt)]),
    );
    this.keys = keys;
    this.dataVersion = this.readDataVersion();
  }

  /** Reloads when another process committed to the database since the last look. */
  pollExternalChanges(): boolean {
    if (this.readDataVersion() === this.dataVersion) return false;
    this.reload();
    return true;
  }

  private readDataVersion(): number {
    return (this.store.sqlite.query("PRAGMA data_version").get() as { data_version: number }).data_version;
  }

  /** The principal behind an `Authorization` header value; no I/O. */
  async resolve(authorization: string | null): Promise<Resolution> {
    if (authorization === null) return MISSING;
    if (authorization.length < 8 || authorization.slice(0, 7).toLowerCase() !== "bearer ") return BAD_KEY;
    const token = authorization.slice(7).trim();
    if (token.startsWith("svc_")) return this.resolveKey(token);
    if (token.split(".").length === 3) return this.resolveToken(token);
    return BAD_KEY;
  }

  private resolveKey(secret: string): Resolution {
    const record = this.keys.get(sha256Hex(secret));
    if (record === undefined) return BAD_KEY;
    const now = this.clock.now();
    if (record.notAfter !== undefined && now >= record.notAfter) return BAD_KEY;
    this.lastUsed.set(record.principal.id, now);
    this.dirty.set(record.principal.id, record.principal.kind === "apiKey" ? apiKeys : adminKeys);
    return { principal: record.principal, failure: null };
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
    this.lastUsed.set(payload.sub!, this.clock.now());
    return {
      principal: { kind: "user", id: payload.sub!, email: user.email, role: user.role, jti: payload.jti!, expiresAt: payload.exp! * 1000 },
      failure: null,
    };
  }

  /** A signed login token for `userId` (HS256, one hour, claims sub, role, exp, iat, jti). */
  async issueToken(userId: string, role: Role): Promise<{ token: string; expiresAt: number }> {
    const iat = Math.floor(this.clock.now() / 1000);
    const exp = iat + TOKEN_TTL_SECONDS;
    const token = await new SignJWT({ role })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(userId)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(randomBase62(22))
      .sign(this.secret);
    return { token, expiresAt: exp * 1000 };
  }

  /** Revokes a login token until it would have expired (logout). */
  revoke(jti: string, expiresAt: number): void {
    this.store.db.insert(revokedTokens).values({ jti, expiresAt: iso(expiresAt) }).onConflictDoNothing().run();
    this.revoked.set(jti, expiresAt);
  }

  /** When the credential with this id was last used, as this process knows it. */
  lastUsedAt(id: string): number | undefined {
    return this.lastUsed.get(id);
  }

  /** Writes the last-use times of keys used since the last flush; drops expired revocations. */
  flushLastUsed(): void {
    const now = this.clock.now();
    const { db } = this.store;
    const dirty = this.dirty;
    this.dirty = new Map();
    transaction(this.store, () => {
      for (const [id, table] of dirty) db.update(table).set({ lastUsedAt: iso(this.lastUsed.get(id)!) }).where(eq(table.id, id)).run();
      db.delete(revokedTokens).where(lt(revokedTokens.expiresAt, iso(now))).run();
    });
    for (const [jti, exp] of this.revoked) if (exp <= now) this.revoked.delete(jti);
  }

  /** Forgets the last-use times of deleted credentials. */
  forget(ids: string[]): void {
    for (const id of ids) {
      this.lastUsed.delete(id);
      this.dirty.delete(id);
    }
  }
}

/** The JWT secret: SVC_JWT_SECRET, else one generated at first need and kept in the database. */
export function jwtSecret(store: Store, configured: string | undefined, clock: Clock): string {
  if (configured !== undefined) return configured;
  const row = store.db.select().from(settings).where(eq(settings.key, JWT_SECRET_SETTING)).get();
  if (row) return row.value;
  const value = randomBase62(64);
  const now = iso(clock.now());
  store.db.insert(settings).values({ key: JWT_SECRET_SETTING, value, updatedAt: now }).onConflictDoNothing().run();
  return store.db.select().from(settings).where(eq(settings.key, JWT_SECRET_SETTING)).get()!.value;
}

