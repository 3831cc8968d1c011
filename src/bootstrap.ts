/**
 * First start on an empty data dir (decisions §1): create what a new instance needs, once.
 * Each step runs in order inside one transaction and may add lines to the start banner;
 * a step that creates a secret prints it here, once. Later modules add their own steps.
 */
import { eq } from "drizzle-orm";
import type { AppContext } from "./context";
import { transaction } from "./db/client";
import { settings } from "./db/schema";
import { iso } from "./lib/clock";
import { countAdminKeys, createAdminKey } from "./modules/admin-keys/service";
import { countUsers, generatePassword, hashPasswordSync, insertUser } from "./modules/users/service";
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

/**
 * The first admin user (SVC_ADMIN_EMAIL / SVC_ADMIN_PASSWORD, the password generated when
 * unset) when no user exists, and the first admin key (SVC_ADMIN_KEY, else generated) when no
 * admin key exists. On the first start, or later when neither a user nor an admin key exists
 * (an instance bootstrapped by a version without identity, which nobody could enter). Later
 * starts also create a configured SVC_ADMIN_KEY when no admin key exists (decisions §1: "created
 * only when none exists"), but generate none: a second start prints no secret.
 * A generated secret is printed here, once; a configured one never is.
 */
const credentials: BootstrapStep = {
  name: "credentials",
  run(ctx, firstStart) {
    const noUser = countUsers(ctx) === 0;
    const noKey = countAdminKeys(ctx) === 0;
    const configuredKeyMissing = noKey && ctx.config.adminKey !== undefined;
    if (!firstStart && !(noUser && noKey) && !configuredKeyMissing) return [];
    const lines: string[] = [];
    let generated = false;
    if (noUser) {
      const password = ctx.config.adminPassword ?? generatePassword();
      const user = insertUser(ctx, ctx.clock, { email: ctx.config.adminEmail, passwordHash: hashPasswordSync(password), role: "admin" });
      generated ||= ctx.config.adminPassword === undefined;
      lines.push(`Admin login:  ${user.email} / ${ctx.config.adminPassword === undefined ? password : "(password from SVC_ADMIN_PASSWORD / --admin-password)"}`);
    }
    if (noKey) {
      const key = createAdminKey(ctx, ctx.clock, { name: "bootstrap" }, ctx.config.adminKey);
      generated ||= ctx.config.adminKey === undefined;
      lines.push(`Admin key:    ${ctx.config.adminKey === undefined ? key.key : "(from SVC_ADMIN_KEY / --admin-key)"}`);
    }
    if (lines.length === 0) return [];
    return generated ? [...lines, "Store these now: generated secrets are shown only this once."] : lines;
  },
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
