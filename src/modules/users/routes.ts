/** Login users: routes. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";

export const usersRoutes = (_ctx: AppContext) => new Elysia({ name: "flagsvc/users" });
