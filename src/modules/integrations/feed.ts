/**
 * The request thread's side of the integrations' sender (sender.ts): what it hands over, and
 * nothing else. It subscribes to the evaluation-record stream (the one plugins read) for each
 * project with an enabled integration that takes evaluations, and passes each batch's shared
 * JSON text on as it is; it passes on which projects have new change events; and after an API
 * write of an integration (or a deleted project) it reads the enabled integrations again and
 * tells the sender to do the same. The sender runs on a thread of its own in the server, so
 * each of these is one message to the integrations thread.
 */
import type { ChangeEntry } from "../../changes/entry";
import type { Logger } from "../../lib/log";
import type { EvaluationRecords } from "../evaluation/records";
import type { Connector } from "./connectors/types";
import { takesEvaluations, type IntegrationSink } from "./sender";
import type { IntegrationRuntimeStore } from "./store";

export class IntegrationFeed {
  /** Projects with an enabled integration, and the unsubscribe of those whose records are read. */
  private projects = new Map<string, (() => void) | null>();
  /** Refreshes run one at a time, in order. */
  private refreshing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly deps: {
      store: Pick<IntegrationRuntimeStore, "enabled">;
      records: EvaluationRecords;
      sink: IntegrationSink;
      connectors: Readonly<Record<string, Connector>>;
      log: Logger;
    },
  ) {
    this.refresh(false);
  }

  /** After each commit: an integration written or a project deleted changes what is read. */
  readonly subscriber = (entries: readonly ChangeEntry[]): void => {
    if (entries.some((e) => e.resource.type === "integration" || (e.resource.type === "project" && e.action === "deleted"))) this.refresh(true);
  };

  /** A reader of the change-event queue: the sender pulls the project's new events. */
  eventsCommitted(projectId: string): void {
    if (this.projects.has(projectId)) this.deps.sink.eventsCommitted(projectId);
  }

  close(): void {
    this.closed = true;
    for (const unsubscribe of this.projects.values()) unsubscribe?.();
    this.projects.clear();
  }

  /** Reads the project's records into the sink: a batch it would not take now is only counted. */
  private read(projectId: string): () => void {
    const { records, sink } = this.deps;
    return records.subscribe(projectId, {
      take: (json, count) => sink.evaluations(projectId, json, count),
      ready: () => sink.accepts?.() ?? true,
      missed: (count) => sink.missed?.(projectId, count),
    });
  }

  private refresh(tellSender: boolean): void {
    this.refreshing = this.refreshing
      .then(() => this.reread(tellSender))
      .catch((e) => this.deps.log.error("integrations: reading the enabled integrations failed", { error: e instanceof Error ? e.message : String(e) }));
  }

  private async reread(tellSender: boolean): Promise<void> {
    const { sink, connectors } = this.deps;
    const rows = await this.deps.store.enabled();
    if (this.closed) return;
    const wanted = new Map<string, boolean>();
    for (const row of rows) {
      const evaluations = takesEvaluations(connectors[row.type], JSON.parse(row.config) as Record<string, unknown>);
      wanted.set(row.projectId, (wanted.get(row.projectId) ?? false) || evaluations);
    }
    const next = new Map<string, (() => void) | null>();
    for (const [projectId, evaluations] of wanted) {
      const current = this.projects.get(projectId) ?? null;
      if (evaluations) next.set(projectId, current ?? this.read(projectId));
      else {
        current?.();
        next.set(projectId, null);
      }
    }
    for (const [projectId, unsubscribe] of this.projects) if (!next.has(projectId)) unsubscribe?.();
    this.projects = next;
    if (tellSender) sink.reload();
  }
}
