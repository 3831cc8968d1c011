/**
 * Background threads and the CPU (Linux; best effort elsewhere). A plugin thread, and the
 * integrations' sender, run only on CPU time nothing else wants (SCHED_IDLE), so they never take
 * CPU from request serving, even when they share the request thread's core. Time limits must
 * then not count the time such a thread waited for a CPU: `runQueueWaitMs` reads it from the
 * kernel's schedstat.
 */
import { readFileSync, readlinkSync } from "node:fs";
import { setPriority } from "node:os";

const SCHED_IDLE = 5;

/** The calling thread's kernel id (Linux), or null. */
export function threadId(): number | null {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").pop());
  } catch {
    return null;
  }
}

/**
 * Lowers the calling thread to SCHED_IDLE (through glibc's sched_setscheduler, by bun:ffi), or,
 * where that is not available (musl, other systems), to nice 19. Returns what it got.
 */
export function lowestPriority(): "idle" | "nice 19" | "normal" {
  const tid = threadId();
  if (tid === null) return "normal";
  try {
    const { dlopen, ptr } = require("bun:ffi") as typeof import("bun:ffi");
    const libc = dlopen("libc.so.6", { sched_setscheduler: { args: ["i32", "i32", "ptr"], returns: "i32" } });
    const ok = libc.symbols.sched_setscheduler(tid, SCHED_IDLE, ptr(new Int32Array(1))) === 0;
    libc.close();
    if (ok) return "idle";
  } catch {
    // No glibc: nice 19 below.
  }
  try {
    setPriority(tid, 19);
    return "nice 19";
  } catch {
    return "normal";
  }
}

/** CPU time of the calling thread, in ms (Node's process.threadCpuUsage, which Bun implements). */
export function threadCpuMs(): number {
  const { user, system } = (process as unknown as { threadCpuUsage(): NodeJS.CpuUsage }).threadCpuUsage();
  return (user + system) / 1000;
}

/** The machine's CPU time stolen by the hypervisor, as a share of all CPU time since boot: [steal, total] in ticks (Linux), or null. */
function stealTicks(): [number, number] | null {
  try {
    const fields = readFileSync("/proc/stat", "utf8").slice(0, 200).split("\n", 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    return [fields[7] ?? 0, fields.reduce((a, b) => a + b, 0)];
  } catch {
    return null;
  }
}

/** The calling thread's time on a CPU and waiting for one, in ms (schedstat), or its CPU time alone where the kernel does not say. */
function runnableMs(): number {
  try {
    const [run, wait] = readFileSync("/proc/thread-self/schedstat", "utf8").split(" ");
    return (Number(run) + Number(wait)) / 1e6;
  } catch {
    return threadCpuMs();
  }
}

/**
 * Whether the calling thread is busy: over the last window (at least `windowMs`, measured when
 * asked: no timer) it was on a CPU or waiting for one for at least `threshold` of the time the
 * machine's CPUs were its guest's (time stolen by the hypervisor left out: on a busy host a
 * saturated thread gets less than the wall clock). For the request thread: a sign that work
 * beside it (plugins, integrations) should give way.
 */
export function busyGauge(threshold = 0.8, windowMs = 250): () => boolean {
  let at = performance.now();
  let used = runnableMs();
  let steal = stealTicks();
  let busy = false;
  return () => {
    const now = performance.now();
    if (now - at < windowMs) return busy;
    const nowUsed = runnableMs();
    const nowSteal = stealTicks();
    const stolen = steal && nowSteal && nowSteal[1] > steal[1] ? (nowSteal[0] - steal[0]) / (nowSteal[1] - steal[1]) : 0;
    busy = (nowUsed - used) / ((now - at) * Math.max(0.05, 1 - stolen)) >= threshold;
    at = now;
    used = nowUsed;
    steal = nowSteal;
    return busy;
  };
}

/**
 * How long thread `tid` of this process (the calling thread when omitted) has waited on a run
 * queue, ready to run but given no CPU, in ms since it started; null where the kernel does not say.
 */
export function runQueueWaitMs(tid?: number | null): number | null {
  try {
    const stat = readFileSync(tid == null ? "/proc/thread-self/schedstat" : `/proc/self/task/${tid}/schedstat`, "utf8");
    return Number(stat.split(" ")[1]) / 1e6;
  } catch {
    return null;
  }
}

/**
 * A timer for `ms` of time in which thread `tid` (the caller when omitted) could have run: when it
 * fires, the time the thread waited for a CPU meanwhile is added on, until none is left. Returns
 * a function that cancels it.
 */
export function runnableTimer(ms: number, fire: () => void, tid?: number | null): () => void {
  const started = Date.now();
  const waited = runQueueWaitMs(tid);
  let timer: ReturnType<typeof setTimeout>;
  const arm = (delay: number) => {
    timer = setTimeout(() => {
      const now = runQueueWaitMs(tid);
      const starved = waited === null || now === null ? 0 : now - waited;
      const left = ms - (Date.now() - started - starved);
      if (left > 1) arm(left);
      else fire();
    }, delay);
  };
  arm(ms);
  return () => clearTimeout(timer);
}
