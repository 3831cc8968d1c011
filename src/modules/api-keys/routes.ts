/** Project API keys: routes. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";

export const apiKeysRoutes = (_ctx: AppContext) => new Elysia({ name: "flagsvc/api-keys" });
