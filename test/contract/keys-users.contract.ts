/** UserStore, AdminKeyStore and ApiKeyStore (src/modules/{users,admin-keys,api-keys}/store.ts) through their interfaces. */
import { describe, expect, test } from "bun:test";
import type { AdminKeyStore, StoredAdminKey } from "../../src/modules/admin-keys/store";
import type { ApiKeyStore, NewApiKeyRow } from "../../src/modules/api-keys/store";
import type { StoredUser, UserStore } from "../../src/modules/users/store";
import { AUTHOR, change, onFresh, refuse, Refused, seedProject, T0, T1, T2, type MakeBackend } from "./backend";

const user = (id: string, email: string, role: StoredUser["role"] = "viewer"): StoredUser => ({ id, email, role, passwordHash: `hash-${id}`, tokensValidAfter: null, createdAt: T0, updatedAt: T0 });
const adminKey = (id: string, createdAt = T0): StoredAdminKey => ({ id, name: `key ${id}`, keyPrefix: `adm_${id}`, keyHash: `hash-${id}`, createdAt, lastUsedAt: null });
const apiKey = (id: string, environmentId: string, createdAt = T0): NewApiKeyRow => ({ id, projectId: "p1", environmentId, name: `key ${id}`, scope: "eval", keyHash: `hash-${id}`, keyPrefix: `fs_${id}`, createdAt });

export function describeUserStoreContract(makeBackend: MakeBackend) {
  describe("UserStore contract", () => {
    test("create (a taken email: false), byEmail with its hash, get, list by email, count", async () => {
      await onFresh(makeBackend, async (b) => {
        const users: UserStore = b.stores.users;
        expect(await users.create(AUTHOR, user("u1", "zoe@example.com", "admin"), change("user", "u1", "zoe@example.com"))).toBe(true);
        expect(await users.create(AUTHOR, user("u2", "al@example.com"), change("user", "u2", "al@example.com"))).toBe(true);
        expect(await users.create(AUTHOR, user("u3", "zoe@example.com"), change("user", "u3", "zoe@example.com"))).toBe(false);
        expect(await users.byEmail("zoe@example.com")).toEqual(user("u1", "zoe@example.com", "admin"));
        expect(await users.byEmail("nobody@example.com")).toBeUndefined();
        expect(await users.get("u2")).toEqual({ id: "u2", email: "al@example.com", role: "viewer" });
        expect((await users.list()).map((u) => u.email)).toEqual(["al@example.com", "zoe@example.com"]);
        expect(await users.count()).toBe(2);
      });
    });

    test("update and remove: decide sees the admin count; a refusal or no change writes nothing", async () => {
      await onFresh(makeBackend, async (b) => {
        const users: UserStore = b.stores.users;
        await users.create(AUTHOR, user("u1", "a@example.com", "admin"), change("user", "u1", "a"));
        await users.create(AUTHOR, user("u2", "b@example.com"), change("user", "u2", "b"));
        const admins: number[] = [];
        await expect(users.update(AUTHOR, "u1", (_c, n) => (admins.push(n), refuse()))).rejects.toBeInstanceOf(Refused);
        await users.update(AUTHOR, "u2", (c) => ({ result: { ...c!, role: "editor" }, changes: [] }));
        expect((await users.get("u2"))!.role).toBe("viewer");
        await users.update(AUTHOR, "u2", (c, n) => (admins.push(n), { result: { ...c!, role: "admin", passwordHash: "new", tokensValidAfter: T1, updatedAt: T1 }, changes: [change("user", "u2", "b", null, "updated")] }));
        expect(await users.byEmail("b@example.com")).toMatchObject({ role: "admin", passwordHash: "new", tokensValidAfter: T1, updatedAt: T1 });
        await expect(users.remove(AUTHOR, "u1", (_c, n) => (admins.push(n), refuse()))).rejects.toBeInstanceOf(Refused);
        await users.remove(AUTHOR, "u1", (c) => change("user", c!.id, c!.email, null, "deleted"));
        expect(admins).toEqual([1, 1, 2]);
        expect(await users.get("u1")).toBeUndefined();
        expect(await users.count()).toBe(1);
      });
    });
  });
}

export function describeAdminKeyStoreContract(makeBackend: MakeBackend) {
  describe("AdminKeyStore contract", () => {
    test("create (a stored hash: false), list oldest first without hashes, count, remove with what would remain", async () => {
      await onFresh(makeBackend, async (b) => {
        const keys: AdminKeyStore = b.stores.adminKeys;
        await b.stores.users.create(AUTHOR, user("u1", "a@example.com", "admin"), change("user", "u1", "a"));
        expect(await keys.create(AUTHOR, adminKey("k2", T1), change("admin_key", "k2", null))).toBe(true);
        expect(await keys.create(AUTHOR, adminKey("k1", T0), change("admin_key", "k1", null))).toBe(true);
        expect(await keys.create(AUTHOR, { ...adminKey("k3"), keyHash: "hash-k1" }, change("admin_key", "k3", null))).toBe(false);
        expect(await keys.list()).toEqual([
          { id: "k1", name: "key k1", keyPrefix: "adm_k1", createdAt: T0, lastUsedAt: null },
          { id: "k2", name: "key k2", keyPrefix: "adm_k2", createdAt: T1, lastUsedAt: null },
        ]);
        expect(await keys.count()).toBe(2);
        let seen: unknown;
        await expect(keys.remove(AUTHOR, "k1", (c, remaining) => ((seen = [c?.keyHash, remaining]), refuse()))).rejects.toBeInstanceOf(Refused);
        expect(seen).toEqual(["hash-k1", { keys: 2, adminUsers: 1 }]);
        await keys.remove(AUTHOR, "k1", (c) => change("admin_key", c!.id, null, null, "deleted"));
        expect((await keys.list()).map((k) => k.id)).toEqual(["k2"]);
      });
    });
  });
}

export function describeApiKeyStoreContract(makeBackend: MakeBackend) {
  describe("ApiKeyStore contract", () => {
    test("create, list oldest first with the environment's slug, find with its secrets, rotate, remove", async () => {
      await onFresh(makeBackend, async (b) => {
        const keys: ApiKeyStore = b.stores.apiKeys;
        const p = await seedProject(b.stores.projects);
        await keys.create(AUTHOR, apiKey("k2", "p1-e2", T1), change("api_key", "k2", null, p));
        await keys.create(AUTHOR, apiKey("k1", "p1-e1", T0), change("api_key", "k1", null, p));
        expect(await keys.list(p.id)).toEqual([
          { id: "k1", name: "key k1", scope: "eval", environment: "dev", projectId: "p1", keyPrefix: "fs_k1", createdAt: T0, lastUsedAt: null },
          { id: "k2", name: "key k2", scope: "eval", environment: "prod", projectId: "p1", keyPrefix: "fs_k2", createdAt: T1, lastUsedAt: null },
        ]);
        expect(await keys.find("k1")).toMatchObject({ projectSlug: "alpha", keyHash: "hash-k1", previousHash: null, previousExpiresAt: null });
        await expect(keys.rotate(AUTHOR, "k1", () => refuse())).rejects.toBeInstanceOf(Refused);
        const rotated = await keys.rotate(AUTHOR, "k1", (c) => ({
          result: { keyHash: "hash-new", keyPrefix: "fs_new", previousHash: c!.keyHash, previousExpiresAt: T2 },
          changes: [change("api_key", "k1", null, p, "rotated")],
        }));
        expect(rotated).toMatchObject({ id: "k1", keyHash: "hash-new", keyPrefix: "fs_new", previousHash: "hash-k1", previousExpiresAt: T2 });
        expect(await keys.find("k1")).toEqual(rotated);
        await expect(keys.remove(AUTHOR, "k2", () => refuse())).rejects.toBeInstanceOf(Refused);
        await keys.remove(AUTHOR, "k2", (c) => change("api_key", c!.id, null, p, "deleted"));
        expect(await keys.find("k2")).toBeUndefined();
        expect((await keys.list(p.id)).map((k) => k.id)).toEqual(["k1"]);
        // An environment's removal takes its keys (and the project's, all of them).
        await b.stores.projects.removeEnvironment(AUTHOR, "alpha", "dev", (c, contents) => {
          expect(contents.apiKeys).toEqual([{ id: "k1", name: "key k1" }]);
          return { result: c!.environments[0]!, changes: [change("environment", "p1-e1", "dev", p, "deleted")] };
        });
        expect(await keys.list(p.id)).toEqual([]);
      });
    });
  });
}
