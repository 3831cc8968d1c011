/**
 * Keeps the evaluation snapshot (src/evaluation/snapshot.ts) in step with the change log: filled
 * whole at start-up, then a subscriber of every commit (src/changes/bus.ts): a flag's entry
 * recompiles that flag, a state's entry that state, a segment's entry that segment and every
 * flag of its project that uses it, a project's or an environment's entry reads the project again. It runs before the writer answers (read-your-writes), never on evaluation.
 */
import type { Subscriber } from "../../changes/bus";
import type { ChangeEntry, Changes } from "../../changes/entry";
import type { FlagState } from "../../evaluation/types";
import { isStaleChange } from "../webhooks/events";
import { Snapshot } from "../../evaluation/snapshot";
import type { SnapshotSource } from "./store";

/** Every project, read at start-up (the server fills it before it listens). */
export async function loadSnapshot(source: SnapshotSource): Promise<Snapshot> {
  const snapshot = new Snapshot();
  for (const id of await source.projectIds()) {
    const data = await source.project(id);
    if (data) snapshot.setProject(id, data);
  }
  return snapshot;
}

/**
 * The snapshot's subscriber. Commits are applied one after another, in commit order, whatever
 * the source's reads cost: each waits for the one before. `after` hears each commit once the
 * snapshot holds it (applied, or failed and logged), in the same order, before the writer
 * answers: the streams (src/modules/streams/hub.ts), whose clients refetch at once and must
 * evaluate the new state. It must not throw; what it starts asynchronously is its own.
 */
export function snapshotSubscriber(snapshot: Snapshot, source: SnapshotSource, after?: (entries: readonly ChangeEntry[]) => void): Subscriber {
  let tail: Promise<void> = Promise.resolve();
  return (entries) => {
    const applied = tail.then(() => apply(snapshot, source, entries));
    const done = after ? applied.finally(() => after(entries)) : applied;
    tail = done.catch(() => undefined); // the bus logs the failure; the next commit still applies
    return done;
  };
}

async function apply(snapshot: Snapshot, source: SnapshotSource, entries: readonly ChangeEntry[]): Promise<void> {
  for (const { project, resource, action, environment, changes } of entries) {
    if (project === null) continue;
    switch (resource.type) {
      case "project":
      case "environment": {
        if (resource.type === "project" && action === "updated") break; // its name: nothing evaluation reads
        if (resource.type === "environment" && action === "updated") break;
        const data = await source.project(project.id);
        if (data) snapshot.setProject(project.id, data);
        else snapshot.removeProject(project.id);
        break;
      }
      case "flag": {
        if (action === "deleted") {
          snapshot.removeFlag(project.id, resource.key!);
          break;
        }
        if (isStaleChange({ resource, changes })) break; // its staleness: nothing evaluation reads
        const def = await source.definition(resource.id);
        if (def) snapshot.putFlag(project.id, def);
        break;
      }
      case "segment": {
        // A used segment cannot be deleted: no flag holds a deleted one.
        if (action === "deleted") {
          snapshot.removeSegment(project.id, resource.key!);
          break;
        }
        const def = await source.segment(resource.id);
        if (def) snapshot.putSegment(project.id, def);
        break;
      }
      case "flag_state": {
        // The state before, as the snapshot holds it, with the fields the entry changed: no read
        // of the database after every state write. Read only when the snapshot lacks it.
        const environmentId = snapshot.environmentId(project.id, environment!);
        const before = environmentId === undefined ? undefined : snapshot.stateOf(environmentId, resource.key!);
        if (before !== undefined) {
          snapshot.setState(project.id, resource.key!, environmentId!, changedState(before, changes));
          break;
        }
        const found = await source.stateIn(resource.id, project.id, environment!);
        if (found) snapshot.setState(project.id, resource.key!, found.environmentId, found.state);
        break;
      }
    }
  }
}

/** A state after an entry's `changes` (a field it does not name kept its value; no row before: disabled). */
function changedState(before: FlagState | null, changes: Changes): FlagState {
  const state = { ...(before ?? { enabled: false, rolloutPercentage: null }) };
  if (changes.enabled) state.enabled = changes.enabled.after as boolean;
  if (changes.rolloutPercentage) state.rolloutPercentage = changes.rolloutPercentage.after as number | null;
  return state;
}
