/**
 * First start on an empty data dir (decisions §1): create what a new instance needs, once.
 * Each step runs in order inside one transaction and may add lines to the start banner;
 * a step that creates a secret prints it here, once. Later modules add their own steps.
 */
import { SYSTEM, type ChangeDraft } from "./changes/entry";
import type { AppContext } from "./context";
import { adminKeyChange, newAdminKey } from "./modules/admin-keys/service";
import { generatePassword, hashPasswordSync, newUser, userChange } from "./modules/users/service";
import { DEFAULT_ENVIRONMENTS, newProject, projectCreated } from "./modules/projects/service";

export interface BootstrapStep {
  name: string;
  /** Runs inside the bootstrap transaction; returns banner lines and the changes it made. */
  run(ctx: AppContext, firstStart: boolean): StepResult;
}

export interface StepResult {
  lines: string[];
  changes: ChangeDraft[];
}

const NOTHING: StepResult = { lines: [], changes: [] };

const defaultProject: BootstrapStep = {
  name: "default project",
  run(ctx, firstStart) {
    // Only on the very first start: a user who deletes `default` does not get it back.
    if (!firstStart || ctx.stores.projects.countNow() > 0) return NOTHING;
    const project = newProject(ctx.clock, { slug: "default", name: "Default", environments: DEFAULT_ENVIRONMENTS });
    ctx.stores.projects.insertNow(project);
    return { lines: [`Created project "default" with environments ${DEFAULT_ENVIRONMENTS.map((e) => e.slug).join(", ")}.`], changes: [projectCreated(project)] };
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
    const { users, adminKeys } = ctx.stores;
    const noUser = users.countNow() === 0;
    const noKey = adminKeys.countNow() === 0;
    const configuredKeyMissing = noKey && ctx.config.adminKey !== undefined;
    if (!firstStart && !(noUser && noKey) && !configuredKeyMissing) return NOTHING;
    const lines: string[] = [];
    const changes: ChangeDraft[] = [];
    let generated = false;
    if (noUser) {
      const password = ctx.config.adminPassword ?? generatePassword();
      const user = newUser(ctx.clock, { email: ctx.config.adminEmail, passwordHash: hashPasswordSync(password), role: "admin" });
      users.insertNow(user);
      changes.push(userChange(user, "created"));
      generated ||= ctx.config.adminPassword === undefined;
      lines.push(`Admin login:  ${user.email} / ${ctx.config.adminPassword === undefined ? password : "(password from SVC_ADMIN_PASSWORD / --admin-password)"}`);
    }
    if (noKey) {
      const { key, secret } = newAdminKey(ctx.clock, { name: "bootstrap" }, ctx.config.adminKey);
      adminKeys.insertNow(key);
      changes.push(adminKeyChange(key, "created"));
      generated ||= ctx.config.adminKey === undefined;
      lines.push(`Admin key:    ${ctx.config.adminKey === undefined ? secret : "(from SVC_ADMIN_KEY / --admin-key)"}`);
    }
    if (lines.length === 0) return NOTHING;
    return { lines: generated ? [...lines, "Store these now: generated secrets are shown only this once."] : lines, changes };
  },
};

export const BOOTSTRAP_STEPS: BootstrapStep[] = [defaultProject, credentials];

export interface BootstrapResult {
  firstStart: boolean;
  lines: string[];
}

/**
 * One transaction, whose entries (the `system` actor) are published once it commits. Its
 * transaction runs before this returns: the caller's turn is not left before it is stored.
 */
export function bootstrap(ctx: AppContext, steps: readonly BootstrapStep[] = BOOTSTRAP_STEPS): Promise<BootstrapResult> {
  return ctx.changeLog.commit(SYSTEM, async (tx) => {
    const firstStart = await ctx.maintenance.claimFirstStart(tx, ctx.clock.now());
    const results = steps.map((step) => step.run(ctx, firstStart));
    return { result: { firstStart, lines: results.flatMap((r) => r.lines) }, changes: results.flatMap((r) => r.changes) };
  });
}
