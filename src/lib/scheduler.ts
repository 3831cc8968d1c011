/** Named recurring jobs on croner; one place to stop them all at shutdown. */
import { Cron } from "croner";
import type { Logger } from "./log";

export class Scheduler {
  private readonly jobs = new Map<string, Cron>();

  constructor(private readonly log: Logger) {}

  /**
   * Runs `task` on the cron `pattern` (seconds field allowed). A run never overlaps the previous
   * one, and a throw is logged, not fatal.
   */
  every(name: string, pattern: string, task: () => void | Promise<void>): void {
    if (this.jobs.has(name)) throw new Error(`job ${name} is already scheduled`);
    const job = new Cron(
      pattern,
      {
        name,
        protect: true,
        catch: (e) => this.log.error("job failed", { job: name, error: e instanceof Error ? e.message : String(e) }),
      },
      task,
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
