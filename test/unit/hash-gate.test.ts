/** HashGate: slots, a share per client, a bounded queue served in turn by client. */
import { describe, expect, test } from "bun:test";
import { HASH_QUEUE, HASH_SHARE, HASH_SLOTS, HashGate, SHARE_RETRY_MS } from "../../src/modules/auth/hash-gate";
import { TestClock } from "../helpers";

/** Work the test ends by hand: `started` lists the labels of the work that began, in order. */
function harness(gate: HashGate) {
  const started: string[] = [];
  const finishers = new Map<string, (fail?: boolean) => void>();
  const submit = (client: string, label: string) =>
    gate.run(client, () => {
      started.push(label);
      return new Promise<string>((done, fail) => finishers.set(label, (f) => (f ? fail(new Error(label)) : done(label))));
    });
  /** Ends `label`'s work and lets the gate hand its slot on. */
  const finish = async (label: string, fail = false) => {
    finishers.get(label)!(fail);
    await Bun.sleep(0);
  };
  return { started, submit, finish };
}

describe("HashGate", () => {
  test("defaults: a slot per core (at least one), half of them per client, a queue of twice the slots", () => {
    expect(HASH_SLOTS).toBe(Math.max(1, navigator.hardwareConcurrency));
    expect(HASH_SHARE).toBe(Math.max(1, Math.floor(HASH_SLOTS / 2)));
    expect(HASH_QUEUE).toBe(2 * HASH_SLOTS);
    const gate = new HashGate();
    expect([gate.slots, gate.share, gate.queueSize]).toEqual([HASH_SLOTS, HASH_SHARE, HASH_QUEUE]);
  });

  test("runs at most `slots` at once; the others start as slots free up", async () => {
    const gate = new HashGate(2, 10, 10);
    const { started, submit, finish } = harness(gate);
    const results = ["a", "b", "c", "d"].map((label) => submit(label, label));
    await Bun.sleep(0);
    expect(started).toEqual(["a", "b"]);
    expect(gate.load()).toEqual({ running: 2, waiting: 2, clients: 4 });
    await finish("a");
    expect(started).toEqual(["a", "b", "c"]);
    await finish("b");
    await finish("c");
    await finish("d");
    expect(await Promise.all(results)).toEqual(["a", "b", "c", "d"]);
    expect(gate.load()).toEqual({ running: 0, waiting: 0, clients: 0 });
  });

  test("a client past its share is refused at once and its work never runs; another client is not", async () => {
    const gate = new HashGate(4, 2, 10);
    const { started, submit } = harness(gate);
    submit("x", "x1");
    submit("x", "x2");
    expect(submit("x", "x3")).toBe("share");
    expect(submit("y", "y1")).toBeInstanceOf(Promise);
    await Bun.sleep(0);
    expect(started).toEqual(["x1", "x2", "y1"]);
    // Waiting places count toward the share too.
    const small = harness(new HashGate(1, 2, 10));
    small.submit("x", "x1");
    small.submit("x", "x2");
    expect(small.submit("x", "x3")).toBe("share");
  });

  test("a client refused for its share is refused until it has waited as told, even with a place free", async () => {
    const clock = new TestClock();
    const { started, submit, finish } = harness(new HashGate(4, 1, 10, clock));
    submit("x", "x1");
    expect(submit("x", "x2")).toBe("share");
    await Bun.sleep(0);
    await finish("x1");
    // Its place is free again, but it was told to retry after a second: asking sooner is
    // refused (without moving the wait: clients behind one address are slowed, not shut out).
    clock.advance(SHARE_RETRY_MS / 2);
    expect(submit("x", "x3")).toBe("share");
    expect(submit("y", "y1")).toBeInstanceOf(Promise);
    clock.advance(SHARE_RETRY_MS / 2);
    expect(submit("x", "x4")).toBeInstanceOf(Promise);
    await Bun.sleep(0);
    expect(started).toEqual(["x1", "y1", "x4"]);
  });

  test("with every slot taken and the queue full, a new client is refused at once", async () => {
    const gate = new HashGate(1, 1, 2);
    const { started, submit, finish } = harness(gate);
    submit("a", "a");
    submit("b", "b");
    submit("c", "c");
    expect(submit("d", "d")).toBe("full");
    await Bun.sleep(0);
    expect(started).toEqual(["a"]);
    expect(gate.load()).toEqual({ running: 1, waiting: 2, clients: 3 });
    await finish("a");
    expect(submit("d", "d")).toBeInstanceOf(Promise);
  });

  test("waiting clients are served in turn, one check each, not in arrival order", async () => {
    const gate = new HashGate(1, 3, 10);
    const { started, submit, finish } = harness(gate);
    for (const label of ["a0", "a1", "a2"]) submit("a", label);
    submit("b", "b1");
    submit("c", "c1");
    await Bun.sleep(0);
    for (const label of ["a0", "a1", "b1", "c1"]) await finish(label);
    // a1 went first (a waited first), then b and c had their turn before a's second waiter.
    expect(started).toEqual(["a0", "a1", "b1", "c1", "a2"]);
  });

  test("work that fails gives its slot and place back and its error to the caller", async () => {
    const gate = new HashGate(1, 1, 1);
    const { started, submit, finish } = harness(gate);
    const failure = (submit("a", "a") as Promise<string>).catch((e: Error) => e.message);
    const waiting = submit("b", "b") as Promise<string>;
    await Bun.sleep(0);
    await finish("a", true);
    expect(await failure).toBe("a");
    expect(started).toEqual(["a", "b"]);
    await finish("b");
    expect(await waiting).toBe("b");
    expect(gate.load()).toEqual({ running: 0, waiting: 0, clients: 0 });
  });
});
