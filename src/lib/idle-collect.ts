/**
 * A worker thread that idles after a burst of work keeps the garbage of it: JavaScriptCore
 * collects as a thread allocates, and an idle thread allocates nothing. `idleCollector` runs one
 * full collection once the thread has had no work for `ms`; each `busy()` (a piece of work came)
 * puts it off again. A thread that works steadily never collects this way (its allocations do).
 */
export const IDLE_COLLECT_MS = 2000;

export function idleCollector(ms = IDLE_COLLECT_MS): { busy(): void; idle(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return {
    busy: () => {
      clearTimeout(timer);
      timer = undefined;
    },
    idle: () => {
      clearTimeout(timer);
      timer = setTimeout(() => Bun.gc(true), ms);
    },
  };
}
