/** Login, logout, me: routes. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";

export const authRoutes = (_ctx: AppContext) => new Elysia({ name: "flagsvc/auth" });
