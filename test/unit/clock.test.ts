import { describe, expect, test } from "bun:test";
import { coarseClock } from "../../src/lib/clock";

describe("coarseClock", () => {
  test("reads its source once per resolution, then again after it passed", async () => {
    let reads = 0;
    const clock = coarseClock({ now: () => 1_000 * ++reads }, 5);
    expect(clock.now()).toBe(1_000);
    expect(clock.now()).toBe(1_000);
    expect(reads).toBe(1);
    await Bun.sleep(25);
    expect(reads).toBe(1); // nothing read while idle
    expect(clock.now()).toBe(2_000);
    expect(clock.now()).toBe(2_000);
    expect(reads).toBe(2);
  });

  test("expire() makes the next call read the source; resolution 0 reads it every time", () => {
    let t = 1_000;
    const coarse = coarseClock({ now: () => t }, 60_000);
    expect(coarse.now()).toBe(1_000);
    t = 2_000;
    expect(coarse.now()).toBe(1_000);
    coarse.expire();
    expect(coarse.now()).toBe(2_000);
    const exact = coarseClock({ now: () => t }, 0);
    expect(exact.now()).toBe(2_000);
    t = 3_000;
    expect(exact.now()).toBe(3_000);
  });
});
