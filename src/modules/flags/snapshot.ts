/**
 * Fills the evaluation snapshot (src/evaluation/snapshot.ts) from the database: whole at
 * start-up, one project after a change to its environments. Flag and state writes update the
 * snapshot directly (flags service). Runs on writes and at start, never on evaluation.
 */
import { asc, eq } from "drizzle-orm";
import type { Store } from "../../db/client";
import { environments, flags, flagStates, projects } from "../../db/schema";
import { Snapshot, type ProjectData } from "../../evaluation/snapshot";

/** A store that may carry this process's snapshot (the server's does; the admin CLI's does not). */
export type SnapshotStore = Store & { snapshot?: Snapshot };

function projectData({ db }: Store, projectId: string): ProjectData {
  const environmentIds = db.select({ id: environments.id }).from(environments).where(eq(environments.projectId, projectId)).all().map((e) => e.id);
  const defs = db
    .select({ key: flags.key, variants: flags.variants, rules: flags.rules })
    .from(flags)
    .where(eq(flags.projectId, projectId))
    .orderBy(asc(flags.key))
    .all();
  const states = db
    .select({ flagKey: flags.key, environmentId: flagStates.environmentId, enabled: flagStates.enabled, rolloutPercentage: flagStates.rolloutPercentage })
    .from(flagStates)
    .innerJoin(flags, eq(flags.id, flagStates.flagId))
    .where(eq(flags.projectId, projectId))
    .all()
    .map(({ flagKey, environmentId, enabled, rolloutPercentage }) => ({ flagKey, environmentId, state: { enabled, rolloutPercentage } }));
  return { environmentIds, flags: defs, states };
}

export function loadSnapshot(store: Store): Snapshot {
  const snapshot = new Snapshot();
  for (const { id } of store.db.select({ id: projects.id }).from(projects).all()) snapshot.setProject(id, projectData(store, id));
  return snapshot;
}

/**
 * Every service that creates or deletes a project or an environment calls this after the
 * write: the project is read again (or dropped when it is gone).
 */
export function projectChanged(store: SnapshotStore, projectId: string): void {
  const { snapshot } = store;
  if (!snapshot) return;
  const exists = store.db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId)).get();
  if (exists) snapshot.setProject(projectId, projectData(store, projectId));
  else snapshot.removeProject(projectId);
}
