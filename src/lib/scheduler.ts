/** Named recurring jobs on croner; one place to stop them all at shutdown. */
import { Cron } from "croner";
import type { Logger } from "./log";

/** Runs a job's task unless another node runs that job now (Backend.exclusive); true when it ran. */
export type Exclusive = (name: string, task: () => unknown) => Promise<boolean>;

export interface JobOptions {
  /**
   * Retention, sweeps, upkeep: work on the shared database that one node does for all. Each run
   * goes through the backend's `exclusive` (PostgreSQL: skipped while another node runs it).
   */
  oneNode?: boolean;
}

export class Scheduler {
  private readonly jobs = new Map<string, Cron>();

  constructor(
    private readonly log: Logger,
    private readonly exclusive: Exclusive = async (_name, task) => {
      await task();
      return true;
    },
  ) {}

  /**
   * Runs `task` on the cron `pattern` (seconds field allowed). A run never overlaps the previous
   * one, and a throw is logged, not fatal. `oneNode`: see JobOptions.
   */
  every(name: string, pattern: string, task: () => void | Promise<void>, { oneNode = false }: JobOptions = {}): void {
    if (this.jobs.has(name)) throw new Error(`job ${name} is already scheduled`);
    const job = new Cron(
      pattern,
      {
        // No croner `name`: croner keeps named jobs in one registry per process, and two
        // contexts in one process (tests of several nodes) schedule the same jobs.
        protect: true,
        catch: (e) => this.log.error("job failed", { job: name, error: e instanceof Error ? e.message : String(e) }),
      },
      oneNode ? () => this.exclusive(name, task).then(() => undefined) : task,
    );
    this.jobs.set(name, job);
  }

  names(): string[] {
    return [...this.jobs.keys()];
  }

  stopAll(): void {
    for (const job of this.jobs.values()) job.stop();
    this.jobs.clear();
  }
}
