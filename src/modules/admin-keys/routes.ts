/** Admin keys: routes. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";

export const adminKeysRoutes = (_ctx: AppContext) => new Elysia({ name: "flagsvc/admin-keys" });
