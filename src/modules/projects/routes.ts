/** Projects and environments: routes. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";

export const projectsRoutes = (_ctx: AppContext) => new Elysia({ name: "flagsvc/projects" });
