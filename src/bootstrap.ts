/**
 * First start on an empty data dir (decisions §1): create what a new instance needs, once.
 * Each step runs in order inside one transaction and may add lines to the start banner;
 * a step that creates a secret prints it here, once. Later modules add their own steps
 * (the identity module adds the first admin user and admin key).
 */
import { eq } from "drizzle-orm";
import type { AppContext } from "./context";
import { transaction } from "./db/client";
import { settings } from "./db/schema";
import { iso } from "./lib/clock";
import { countProjects, createProject, DEFAULT_ENVIRONMENTS } from "./modules/projects/service";

export interface BootstrapStep {
  name: string;
  /** Runs inside the bootstrap transaction; returns banner lines. */
  run(ctx: AppContext, firstStart: boolean): string[];
}

const BOOTSTRAPPED_AT = "bootstrapped_at";

const defaultProject: BootstrapStep = {
  name: "default project",
  run(ctx, firstStart) {
    // Only on the very first start: a user who deletes `default` does not get it back.
    if (!firstStart || countProjects(ctx) > 0) return [];
    createProject(ctx, ctx.clock, { slug: "default", name: "Default", environments: DEFAULT_ENVIRONMENTS });
    return [`Created project "default" with environments ${DEFAULT_ENVIRONMENTS.map((e) => e.slug).join(", ")}.`];
  },
};

/** Where credentials come from. The identity module replaces this step with the first admin user and key. */
const credentials: BootstrapStep = {
  name: "credentials",
  run: (_ctx, firstStart) =>
    firstStart
      ? ["Credentials: none exist yet. Login users and API keys arrive with the identity module;", "until then this version serves only /v1/health and the API docs."]
      : [],
};

export const BOOTSTRAP_STEPS: BootstrapStep[] = [defaultProject, credentials];

export interface BootstrapResult {
  firstStart: boolean;
  lines: string[];
}

export function bootstrap(ctx: AppContext, steps: readonly BootstrapStep[] = BOOTSTRAP_STEPS): BootstrapResult {
  return transaction(ctx, () => {
    const marker = ctx.db.select().from(settings).where(eq(settings.key, BOOTSTRAPPED_AT)).get();
    const firstStart = marker === undefined;
    const lines = steps.flatMap((step) => step.run(ctx, firstStart));
    if (firstStart) {
      const now = iso(ctx.clock.now());
      ctx.db.insert(settings).values({ key: BOOTSTRAPPED_AT, value: now, updatedAt: now }).run();
    }
    return { firstStart, lines };
  });
}
