/**
 * The access table of decisions §4, cell by cell, against `decide` (the one place that reads
 * it), and the credential registry's memory-only resolution.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE, openDatabase } from "../../src/db/client";
import { decide, MESSAGES, type AccessGroup, type Principal, type Role, type Scope } from "../../src/http/access";
import { ChangeBus } from "../../src/changes/bus";
import { cliAuthor } from "../../src/changes/entry";
import { SqliteChangeLog } from "../../src/changes/sqlite";
import { CredentialRegistry } from "../../src/http/credentials";
import { SqliteCredentialStore } from "../../src/modules/credentials/store";
import { adminKeyService } from "../../src/modules/admin-keys/service";
import { createStores } from "../../src/db/sqlite-backend";
import { coarseClock, iso } from "../../src/lib/clock";
import { newId } from "../../src/lib/ids";
import { bearer, seedAdminKey, seedApiKey, testApp } from "../helpers";

const key = (scope: Scope, projectSlug = "default"): Principal => ({
  kind: "apiKey",
  id: "key_x",
  name: "x",
  scope,
  projectId: "proj_x",
  projectSlug,
  environmentId: "env_x",
  environmentSlug: "development",
  secretTag: "0123456789abcdef",
});
const user = (role: Role): Principal => ({ kind: "user", id: "usr_x", email: "u@x", role, jti: "j", expiresAt: 0 });
const ADMIN_KEY: Principal = { kind: "adminKey", id: "key_admin", name: "admin" };

type Cell = "yes" | "read" | "-";
/** Rows: endpoint groups. Columns: eval, test, mgmt, full, admin key, JWT admin, editor, viewer, client. */
const TABLE: Record<AccessGroup, [Cell, Cell, Cell, Cell, Cell, Cell, Cell, Cell, Cell]> = {
  evaluate: ["yes", "yes", "-", "yes", "-", "-", "-", "-", "yes"],
  testing: ["-", "yes", "-", "yes", "-", "yes", "yes", "read", "-"],
  definitions: ["yes", "yes", "yes", "yes", "-", "-", "-", "-", "-"],
  projects: ["-", "-", "yes", "yes", "yes", "yes", "read", "read", "-"],
  projectCreate: ["-", "-", "-", "-", "yes", "yes", "-", "-", "-"],
  environments: ["-", "-", "yes", "yes", "yes", "yes", "read", "read", "-"],
  flags: ["-", "-", "yes", "yes", "yes", "yes", "yes", "read", "-"],
  apiKeys: ["-", "-", "yes", "yes", "yes", "yes", "yes", "read", "-"],
  webhooks: ["-", "-", "yes", "yes", "yes", "yes", "yes", "-", "-"],
  // A POST that writes nothing: every reader of the flags.
  evaluateAs: ["-", "-", "yes", "yes", "yes", "yes", "yes", "yes", "-"],
  admin: ["-", "-", "-", "-", "yes", "yes", "-", "-", "-"],
  // Read-only groups: no route writes, and the roles are given no write.
  audit: ["-", "-", "yes", "yes", "yes", "read", "read", "read", "-"],
  auditInstance: ["-", "-", "-", "-", "yes", "read", "-", "-", "-"],
  session: ["-", "-", "-", "-", "-", "yes", "yes", "yes", "-"],
};
const COLUMNS: [string, Principal][] = [
  ["eval", key("eval")],
  ["test", key("test")],
  ["mgmt", key("mgmt")],
  ["full", key("full")],
  ["admin key", ADMIN_KEY],
  ["JWT admin", user("admin")],
  ["JWT editor", user("editor")],
  ["JWT viewer", user("viewer")],
  ["client", key("client")],
];

describe("decide: every cell of the access table", () => {
  for (const [group, cells] of Object.entries(TABLE) as [AccessGroup, Cell[]][]) {
    cells.forEach((cell, i) => {
      const [name, principal] = COLUMNS[i]!;
      test(`${group} × ${name}: ${cell}`, () => {
        const read = decide(principal, group, "GET", "default");
        const write = decide(principal, group, "POST", "default");
        expect(read.allow).toBe(cell !== "-");
        expect(write.allow).toBe(cell === "yes");
        for (const d of [read, write]) {
          if (d.allow) continue;
          expect(d.status).toBe(403);
          if (principal.kind === "apiKey") expect(d.message).toBe(MESSAGES.scope);
        }
      });
    });
  }

  test("no credential: 401 with the spec's message (keys) or the token message; no header at all says so in details", () => {
    expect(decide(null, "flags", "GET")).toEqual({ allow: false, status: 401, message: "Invalid or expired API key" });
    expect(decide(null, "flags", "GET", undefined, "token")).toEqual({ allow: false, status: 401, message: "Invalid or expired token" });
    expect(decide(null, "evaluate", "POST", undefined, "missing")).toEqual({
      allow: false,
      status: 401,
      message: "Invalid or expired API key",
      details: [{ path: "headers.authorization", message: "Missing: send Authorization: Bearer <credential>" }],
    });
    expect(decide(null, "flags", "GET", undefined, "noBearer")).toEqual({
      allow: false,
      status: 401,
      message: "Invalid or expired API key",
      details: [{ path: "headers.authorization", message: 'Expected "Authorization: Bearer <key>"; the header holds a key without the Bearer prefix' }],
    });
  });

  test("a kind of credential a group never takes is told what it takes, from the table; API keys keep the spec's message", () => {
    const takes: Partial<Record<AccessGroup, string>> = {
      evaluate: "Evaluation takes a project API key of scope eval, test, full or client",
      testing: "The Testing API takes a project API key of scope test or full",
      definitions: "The definitions API takes a project API key of scope eval, test, mgmt or full",
      session: "This endpoint takes a login token (POST /v1/auth/login)",
    };
    for (const [group, message] of Object.entries(takes) as [AccessGroup, string][]) {
      expect(MESSAGES.takes(group)).toBe(message);
      for (const [, principal] of COLUMNS) {
        const d = decide(principal, group, "POST", "default");
        if (d.allow) continue;
        // A login token short of a role of a group that takes login tokens (the Testing API): the role message.
        const roleRefused = principal.kind === "user" && group === "testing";
        expect(d.message).toBe(principal.kind === "apiKey" ? MESSAGES.scope : roleRefused ? MESSAGES.role(principal.role) : message);
      }
    }
    // A role short of a group that takes login tokens keeps the role message.
    expect(decide(user("viewer"), "flags", "POST")).toEqual({ allow: false, status: 403, message: MESSAGES.role("viewer") });
  });

  test("a key on another project's path: 403", () => {
    for (const scope of ["mgmt", "full"] as const) {
      expect(decide(key(scope, "default"), "flags", "GET", "other")).toEqual({ allow: false, status: 403, message: MESSAGES.otherProject });
    }
    // Admin keys and users are instance-wide.
    expect(decide(ADMIN_KEY, "flags", "GET", "other").allow).toBe(true);
    expect(decide(user("editor"), "flags", "POST", "other").allow).toBe(true);
  });
});

describe("credential registry", () => {
  test("resolves from memory: keys by hash, unknown and malformed credentials fail", async () => {
    const h = await testApp();
    try {
      const { id, secret } = await seedApiKey(h.ctx, "eval");
      const r = await h.ctx.credentials.resolve(`Bearer ${secret}`);
      expect(r.principal).toMatchObject({ kind: "apiKey", id, scope: "eval", projectSlug: "default", environmentSlug: "development" });
      expect((await h.ctx.credentials.resolve(`bearer ${secret}`)).principal?.id).toBe(id);
      for (const bad of [`Bearer ${secret}x`, `Basic ${secret}`, secret, "Bearer ", "Bearer a.b.c"]) {
        expect((await h.ctx.credentials.resolve(bad)).principal).toBeNull();
      }
      expect(await h.ctx.credentials.resolve(null)).toEqual({ principal: null, failure: "missing", meter: null });
      // Our keys and JWTs sent without `Bearer ` are told apart from other malformed values.
      const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln";
      for (const bare of [secret, "svc_admin_unknown", jwt]) expect((await h.ctx.credentials.resolve(bare)).failure).toBe("noBearer");
      for (const other of [`Basic ${secret}`, "Token abc", "a.b.c", `Token ${jwt}`]) expect((await h.ctx.credentials.resolve(other)).failure).toBe("key");
    } finally {
      h.close();
    }
  });

  test("a repeated header resolves again (the last-seen entry), alternating keys each resolve, a dropped key is refused at once", async () => {
    const h = await testApp();
    try {
      const a = await seedApiKey(h.ctx, "eval");
      const b = await seedApiKey(h.ctx, "mgmt");
      // Each header a fresh string of equal content, as a request brings it.
      for (const [secret, id] of [[a.secret, a.id], [a.secret, a.id], [b.secret, b.id], [a.secret, a.id], [b.secret, b.id], [b.secret, b.id]]) {
        expect((await h.ctx.credentials.resolve(`Bearer ${secret}`)).principal?.id).toBe(id!);
      }
      // The last value differing only in its last character is another (unknown) key.
      const near = `Bearer ${b.secret.slice(0, -1)}${b.secret.endsWith("A") ? "B" : "A"}`;
      expect(await h.ctx.credentials.resolve(near)).toEqual({ principal: null, failure: "key", meter: null });
      h.sqlite.run("DELETE FROM api_keys WHERE id = ?", [b.id]);
      await h.ctx.credentials.reload();
      expect(await h.ctx.credentials.resolve(`Bearer ${b.secret}`)).toEqual({ principal: null, failure: "key", meter: null });
      expect((await h.ctx.credentials.resolve(`Bearer ${a.secret}`)).principal?.id).toBe(a.id);
    } finally {
      h.close();
    }
  });

  test("a reload forgets the admission clock's reading: a key created just now is not seen used before its creation", async () => {
    const h = await testApp();
    try {
      let t = Date.parse("2026-11-22T11:00:00.000Z");
      const requestClock = coarseClock({ now: () => t }, 60_000);
      const registry = new CredentialRegistry(new SqliteCredentialStore(h), h.clock, "a-jwt-secret-for-this-test", requestClock);
      expect(requestClock.now()).toBe(t);
      t += 5;
      await registry.reload(); // as after a key is written
      expect(requestClock.now()).toBe(t);
    } finally {
      h.close();
    }
  });

  test("lastUsedAt is kept in memory and written by the flush, not per request", async () => {
    const h = await testApp();
    try {
      const { id, secret } = await seedApiKey(h.ctx, "eval");
      const admin = await seedAdminKey(h.ctx, "flush test");
      h.clock.ms = Date.parse("2026-11-22T11:00:00.000Z");
      await h.request("GET", "/v1/health", { headers: bearer(secret) });
      await h.request("GET", "/v1/health", { headers: bearer(admin) });
      const stored = () => h.sqlite.query("SELECT last_used_at FROM api_keys WHERE id = ?").get(id) as { last_used_at: string | null };
      expect(stored().last_used_at).toBeNull();
      expect(h.ctx.credentials.lastUsedAt(id)).toBe(h.clock.ms);
      await h.ctx.credentials.flushLastUsed();
      expect(stored().last_used_at).toBe("2026-11-22T11:00:00.000Z");
      expect(h.sqlite.query("SELECT last_used_at FROM admin_keys WHERE name = 'flush test'").get()).toEqual({ last_used_at: "2026-11-22T11:00:00.000Z" });
    } finally {
      h.close();
    }
  });

  test("a key written by another process (as the CLI does) is picked up by pollExternalChanges", async () => {
    const h = await testApp();
    try {
      const other = openDatabase(join(h.dir, DB_FILE)); // the CLI: its own connection and change log, no registry
      const { adminKeys } = createStores(new SqliteChangeLog(other, new ChangeBus(), h.clock));
      const { key: secret } = await adminKeyService({ adminKeys, clock: h.clock }).create(cliAuthor(), { name: "cli" });
      other.sqlite.close();
      expect((await h.ctx.credentials.resolve(`Bearer ${secret}`)).principal).toBeNull();
      expect(await h.ctx.credentials.pollExternalChanges()).toBe(true);
      expect((await h.ctx.credentials.resolve(`Bearer ${secret}`)).principal?.kind).toBe("adminKey");
      expect(await h.ctx.credentials.pollExternalChanges()).toBe(false);
    } finally {
      h.close();
    }
  });

  test("another connection's other writes (the background worker's) reload nothing", async () => {
    const h = await testApp();
    try {
      const other = openDatabase(join(h.dir, DB_FILE));
      other.sqlite.run("INSERT INTO settings (key, value, updated_at) VALUES ('unrelated', 'x', ?)", [iso(0)]);
      other.sqlite.close();
      expect(await h.ctx.credentials.pollExternalChanges()).toBe(false);
    } finally {
      h.close();
    }
  });

  test("issued tokens resolve until revoked or expired", async () => {
    const h = await testApp();
    try {
      const id = newId("usr");
      h.sqlite.run("INSERT INTO users (id, email, password_hash, role, created_at, updated_at) VALUES (?, 'a@b.c', 'x', 'editor', 'x', 'x')", [id]);
      await h.ctx.credentials.reload();
      const { token, expiresAt } = await h.ctx.credentials.issueToken(id, "editor");
      const ok = await h.ctx.credentials.resolve(`Bearer ${token}`);
      expect(ok.principal).toMatchObject({ kind: "user", id, role: "editor", expiresAt });
      await h.ctx.credentials.revoke((ok.principal as { jti: string }).jti, expiresAt);
      expect(await h.ctx.credentials.resolve(`Bearer ${token}`)).toEqual({ principal: null, failure: "token", meter: null });
      const second = (await h.ctx.credentials.issueToken(id, "editor")).token;
      h.clock.advance(3600_000);
      expect((await h.ctx.credentials.resolve(`Bearer ${second}`)).principal).toBeNull();
    } finally {
      h.close();
    }
  });
});

describe("passwords", () => {
  test("unknown emails verify against a hash of the same cost as real ones, which no password matches", async () => {
    const { DUMMY_HASH } = await import("../../src/modules/auth/service");
    const { hashPassword, PASSWORD_OPTIONS } = await import("../../src/modules/users/service");
    const params = (hash: string) => hash.split("$").slice(1, 4).join("$");
    expect(params(DUMMY_HASH)).toBe(`argon2id$v=19$m=${PASSWORD_OPTIONS.memoryCost},t=${PASSWORD_OPTIONS.timeCost},p=1`);
    expect(params(await hashPassword("a real password"))).toBe(params(DUMMY_HASH));
    expect(await Bun.password.verify("anything at all", DUMMY_HASH)).toBe(false);
  });
});
